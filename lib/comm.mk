# lib/comm.mk: see lib/local.mk.
