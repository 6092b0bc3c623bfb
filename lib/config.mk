# lib/config.mk: see lib/local.mk.
