# t/unit/comm.mk: the collectives (check_comm) and the training data
# loader and `stork prep` (check_data).
check_PROGRAMS += t/unit/check_comm
TESTS += t/unit/check_comm
t_unit_check_comm_SOURCES = t/unit/check_comm.c
t_unit_check_comm_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_comm_LDADD = $(COMM_LIBS) $(UNIT_LIBS)

# The hierarchical communicator and UCX peer failures, with forked processes.
check_PROGRAMS += t/unit/check_comm_hier
TESTS += t/unit/check_comm_hier
t_unit_check_comm_hier_SOURCES = t/unit/check_comm_hier.c
t_unit_check_comm_hier_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_comm_hier_LDADD = $(COMM_LIBS) $(UNIT_LIBS)

# check_data also builds `stork prep` (launcher/prep/prep.c, with its tokenizers)
# to round-trip text.
check_PROGRAMS += t/unit/check_data
TESTS += t/unit/check_data
t_unit_check_data_SOURCES = t/unit/check_data.c launcher/prep/prep.c launcher/prep/prep.h \
	launcher/prep/prep_tokens.c launcher/prep/tokenizer.c launcher/prep/tokenizer_load.c \
	launcher/sha256_file.c
t_unit_check_data_CFLAGS = $(UNIT_CFLAGS) $(PCRE2_CFLAGS) $(JANSSON_CFLAGS) $(XXHASH_CFLAGS) \
	$(CRYPTO_CFLAGS)
t_unit_check_data_LDADD = daemon/libdata.a $(UNIT_LIBS) $(PCRE2_LIBS) $(JANSSON_LIBS) \
	$(XXHASH_LIBS) $(CRYPTO_LIBS)
