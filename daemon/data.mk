# daemon/data.mk: see daemon/local.mk.
