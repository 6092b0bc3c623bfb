# t/unit/config.mk: see t/local.mk.
