# t/unit/bind.mk: see t/local.mk.
