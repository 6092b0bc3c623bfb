# t/unit/engine.mk: see t/local.mk.
