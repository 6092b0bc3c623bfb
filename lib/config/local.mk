# lib/config/local.mk: the configuration, stork.yaml (in lib/libstork.la).
lib_libstork_la_SOURCES += \
	lib/config/stork_config.c lib/config/stork_config.h
