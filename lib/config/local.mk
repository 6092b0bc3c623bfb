# lib/config/local.mk: the configuration, stork.yaml (in lib/libstork.la):
# its table of keys, the parser, the checks of the whole, and its output,
# equality and hashes.
lib_libstork_la_SOURCES += \
	lib/config/stork_config.c lib/config/stork_config.h \
	lib/config/config_keys.c lib/config/config_keys.h \
	lib/config/config_validate.c lib/config/config_write.c
