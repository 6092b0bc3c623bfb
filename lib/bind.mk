# lib/bind.mk: see lib/local.mk.
