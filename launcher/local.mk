# stork: the command users type, and the command of every job step (stork
# run). It links the configuration, the run directory and libslurm, not the
# training engine: the subcommands that need the engine run in stork-engine,
# which stork executes with its own arguments (launcher/programs.c).
bin_PROGRAMS += launcher/stork
launcher_stork_SOURCES = launcher/stork.c launcher/commands.h \
	launcher/programs.c launcher/programs.h \
	launcher/sha256_file.c launcher/sha256_file.h
launcher_stork_CPPFLAGS = $(AM_CPPFLAGS) -DSTORK_PKGLIBEXECDIR='"$(pkglibexecdir)"' $(CURL_CFLAGS) $(CRYPTO_CFLAGS) \
	$(PCRE2_CFLAGS) $(JANSSON_CFLAGS) $(XXHASH_CFLAGS)
# Those installed paths (and STORK_SBINDIR) come from the Makefile, not
# config.h, which configure leaves alone when only --prefix changed: without
# this, a tree configured again for another prefix would install a stork
# that looks for storkd and stork-engine under the old one.
launcher/stork-programs.$(OBJEXT): Makefile
launcher_stork_LDADD = lib/libstork_slurm.a lib/libstork.la $(SLURM_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS) \
	$(PCRE2_LIBS) $(JANSSON_LIBS) $(XXHASH_LIBS) -lpthread

# Each command's folder adds its files in its own local.mk.
include launcher/run/local.mk
include launcher/prep/local.mk
include launcher/report/local.mk
include launcher/bench/local.mk
include launcher/engine/local.mk
