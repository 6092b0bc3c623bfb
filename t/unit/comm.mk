# t/unit/comm.mk: see t/local.mk.
