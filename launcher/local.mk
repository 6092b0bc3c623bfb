# stork: the command users type.
bin_PROGRAMS += launcher/stork
launcher_stork_SOURCES = launcher/stork.c launcher/commands.h
launcher_stork_LDADD = lib/libstork.la
