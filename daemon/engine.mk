# daemon/engine.mk: see daemon/local.mk.
