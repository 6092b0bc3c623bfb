# t/fuzz/local.mk: fuzzing the readers of what comes from outside (see
# t/local.mk): stork.yaml, the TCP rendezvous's hello and reply, a
# daemon's blob, a checkpoint's manifest.json and state.json, llm.c model
# files and token shards, Hugging Face safetensors files, the metrics
# files of `stork report`, stork prep's tokenizer files.
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_CC=clang]
#
# builds t/fuzz/fuzz_NAME for every harness t/fuzz/fuzz_NAME.c with
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer (Debian
# packages clang and libclang-rt-14-dev): the harness and the files whose
# code it fuzzes compiled again with clang, the rest linked from the
# normal build. It then runs each for FUZZ_SECONDS on its seed corpus
# t/fuzz/corpus/NAME and kept crashes t/fuzz/regress/NAME, prints each
# harness's executions and crashes (t/fuzz/fuzz.sh), and fails when one
# crashed. New corpus inputs and crashes are written under t/fuzz/work/.
# A crash found is fixed in the tree and its input kept as
# t/fuzz/regress/NAME/crash-WHAT. Not part of `make check` or CI.
#
# `make check` runs every harness over its seeds and kept crashes without
# libFuzzer: t/fuzz/input_NAME is the harness linked with the normal
# compiler to t/fuzz/run_inputs.c, run by t/fuzz/inputs.sh. A kept crash
# that was an abort fails it in any build; one that was a memory error
# fails it in a sanitizer build (README).

FUZZ_COMMON = t/fuzz/fuzz.h t/fuzz/fuzz_files.c
FUZZ_INPUT_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS) $(BLAS_CFLAGS)

check_PROGRAMS += t/fuzz/input_config t/fuzz/input_rdv_hello t/fuzz/input_rdv_reply \
	t/fuzz/input_join_blob t/fuzz/input_ckpt_manifest t/fuzz/input_ckpt_state \
	t/fuzz/input_model t/fuzz/input_token_shard t/fuzz/input_safetensors \
	t/fuzz/input_metrics t/fuzz/input_tokenizer t/fuzz/input_model_header \
	t/fuzz/input_ckpt_shard
TESTS += t/fuzz/inputs.sh

# Per harness: the sources libFuzzer instruments (FUZZ_SRC_NAME, besides
# the harness), and what both builds link.
FUZZ_SRC_config = $(srcdir)/lib/config/stork_config.c $(srcdir)/lib/config/config_keys.c \
	$(srcdir)/lib/config/config_validate.c $(srcdir)/lib/config/config_write.c
t_fuzz_input_config_SOURCES = t/fuzz/fuzz_config.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_config_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_config_LDADD = lib/libstork.la

FUZZ_SRC_rdv_hello = $(srcdir)/lib/rendezvous/rendezvous_tcp.c $(srcdir)/lib/rendezvous/rendezvous_auth.c \
	$(srcdir)/daemon/node/join.c
t_fuzz_input_rdv_hello_SOURCES = t/fuzz/fuzz_rdv_hello.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_rdv_hello_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_rdv_hello_LDADD = daemon/libstorkd.a $(RDV_LIBS) lib/libstork.la $(SLURM_LIBS)

FUZZ_SRC_rdv_reply = $(srcdir)/lib/rendezvous/rendezvous_tcp.c $(srcdir)/lib/rendezvous/rendezvous_auth.c \
	$(srcdir)/daemon/node/join.c
t_fuzz_input_rdv_reply_SOURCES = t/fuzz/fuzz_rdv_reply.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_rdv_reply_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_rdv_reply_LDADD = daemon/libstorkd.a $(RDV_LIBS) lib/libstork.la $(SLURM_LIBS)

FUZZ_SRC_join_blob = $(srcdir)/daemon/node/join.c
t_fuzz_input_join_blob_SOURCES = t/fuzz/fuzz_join_blob.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_join_blob_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_join_blob_LDADD = daemon/libstorkd.a $(RDV_LIBS) lib/libstork.la $(SLURM_LIBS)

FUZZ_SRC_ckpt_manifest = $(srcdir)/daemon/engine/checkpoint/checkpoint.c
t_fuzz_input_ckpt_manifest_SOURCES = t/fuzz/fuzz_ckpt_manifest.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_ckpt_manifest_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_ckpt_manifest_LDADD = daemon/libstorkd.a $(ENGINE_LIBS) lib/libstork.la $(XXHASH_LIBS)

FUZZ_SRC_ckpt_state = $(srcdir)/daemon/engine/checkpoint/checkpoint.c
t_fuzz_input_ckpt_state_SOURCES = t/fuzz/fuzz_ckpt_state.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_ckpt_state_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_ckpt_state_LDADD = daemon/libstorkd.a $(ENGINE_LIBS) lib/libstork.la $(XXHASH_LIBS)

FUZZ_SRC_ckpt_shard = $(srcdir)/daemon/engine/checkpoint/checkpoint.c \
	$(srcdir)/daemon/engine/checkpoint/checkpoint_reshard.c $(FUZZ_SRC_model)
t_fuzz_input_ckpt_shard_SOURCES = t/fuzz/fuzz_ckpt_shard.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_ckpt_shard_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_ckpt_shard_LDADD = daemon/libstorkd.a $(ENGINE_LIBS) lib/libstork.la $(XXHASH_LIBS)

FUZZ_SRC_model = $(srcdir)/daemon/engine/model/model.c $(srcdir)/daemon/engine/model/model_file.c \
	$(srcdir)/daemon/engine/model/model_shape.c $(srcdir)/daemon/engine/model/model_config.c
t_fuzz_input_model_SOURCES = t/fuzz/fuzz_model.c t/fuzz/fuzz_model.h t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_model_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_model_LDADD = $(ENGINE_LIBS) lib/libstork.la

FUZZ_SRC_model_header = $(FUZZ_SRC_model)
t_fuzz_input_model_header_SOURCES = t/fuzz/fuzz_model_header.c t/fuzz/fuzz_model.h t/fuzz/run_inputs.c \
	$(FUZZ_COMMON)
t_fuzz_input_model_header_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_model_header_LDADD = $(ENGINE_LIBS) lib/libstork.la

FUZZ_SRC_token_shard = $(srcdir)/lib/formats/token_shard.c $(srcdir)/daemon/engine/data/data.c
t_fuzz_input_token_shard_SOURCES = t/fuzz/fuzz_token_shard.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_token_shard_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_token_shard_LDADD = daemon/libdata.a lib/libstork.la

FUZZ_SRC_safetensors = $(srcdir)/lib/formats/safetensors.c
t_fuzz_input_safetensors_SOURCES = t/fuzz/fuzz_safetensors.c t/fuzz/run_inputs.c $(FUZZ_COMMON)
t_fuzz_input_safetensors_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_safetensors_LDADD = lib/libstork.la

# stork report's reader is part of the stork program, not of a library:
# both builds compile it here.
FUZZ_SRC_metrics = $(srcdir)/lib/run/metrics_file.c $(srcdir)/launcher/report/report_data.c \
	$(srcdir)/launcher/report/report_html.c $(srcdir)/launcher/run/run_metrics.c
t_fuzz_input_metrics_SOURCES = t/fuzz/fuzz_metrics.c t/fuzz/run_inputs.c $(FUZZ_COMMON) \
	launcher/report/report_data.c launcher/report/report_html.c launcher/run/run_metrics.c
t_fuzz_input_metrics_CFLAGS = $(FUZZ_INPUT_CFLAGS)
t_fuzz_input_metrics_LDADD = lib/libstork.la -lm

# stork prep's tokenizer files (part of the stork program, compiled here).
FUZZ_SRC_tokenizer = $(srcdir)/launcher/prep/tokenizer.c $(srcdir)/launcher/prep/tokenizer_load.c
t_fuzz_input_tokenizer_SOURCES = t/fuzz/fuzz_tokenizer.c t/fuzz/run_inputs.c $(FUZZ_COMMON) \
	launcher/prep/tokenizer.c launcher/prep/tokenizer_load.c
t_fuzz_input_tokenizer_CFLAGS = $(FUZZ_INPUT_CFLAGS) $(PCRE2_CFLAGS) $(JANSSON_CFLAGS) \
	$(XXHASH_CFLAGS)
t_fuzz_input_tokenizer_LDADD = lib/libstork.la $(PCRE2_LIBS) $(JANSSON_LIBS) $(XXHASH_LIBS)

EXTRA_DIST += t/fuzz/inputs.sh t/fuzz/fuzz.sh t/fuzz/corpus t/fuzz/regress

# ------------------------------------------------------------- make fuzz
FUZZ_CC = clang
FUZZ_SECONDS = 60
FUZZ_NAMES = config rdv_hello rdv_reply join_blob ckpt_manifest ckpt_state ckpt_shard model \
	model_header token_shard safetensors metrics tokenizer
FUZZ_FLAGS = -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined
# The normal build's preprocessor flags and its libraries' include paths,
# not its warning flags (they are gcc's).
FUZZ_BUILD = $(LIBTOOL) $(AM_V_lt) --tag=CC --mode=link $(FUZZ_CC) -std=gnu11 $(FUZZ_FLAGS) \
	$(DEFS) $(DEFAULT_INCLUDES) $(AM_CPPFLAGS) $(CPPFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS) \
	$(BLAS_CFLAGS) $(MUNGE_CFLAGS) $(CRYPTO_CFLAGS) $(LDFLAGS) -o $@ \
	$(srcdir)/t/fuzz/fuzz_files.c

t/fuzz/fuzz_config: t/fuzz/fuzz_config.c $(FUZZ_COMMON) $(FUZZ_SRC_config) \
		$(t_fuzz_input_config_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_config.c $(FUZZ_SRC_config) \
		$(t_fuzz_input_config_LDADD)
t/fuzz/fuzz_rdv_hello: t/fuzz/fuzz_rdv_hello.c $(FUZZ_COMMON) $(FUZZ_SRC_rdv_hello) \
		$(t_fuzz_input_rdv_hello_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_rdv_hello.c $(FUZZ_SRC_rdv_hello) \
		$(t_fuzz_input_rdv_hello_LDADD)
t/fuzz/fuzz_rdv_reply: t/fuzz/fuzz_rdv_reply.c $(FUZZ_COMMON) $(FUZZ_SRC_rdv_reply) \
		$(t_fuzz_input_rdv_reply_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_rdv_reply.c $(FUZZ_SRC_rdv_reply) \
		$(t_fuzz_input_rdv_reply_LDADD)
t/fuzz/fuzz_join_blob: t/fuzz/fuzz_join_blob.c $(FUZZ_COMMON) $(FUZZ_SRC_join_blob) \
		$(t_fuzz_input_join_blob_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_join_blob.c $(FUZZ_SRC_join_blob) \
		$(t_fuzz_input_join_blob_LDADD)
t/fuzz/fuzz_ckpt_manifest: t/fuzz/fuzz_ckpt_manifest.c $(FUZZ_COMMON) \
		$(FUZZ_SRC_ckpt_manifest) $(t_fuzz_input_ckpt_manifest_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_ckpt_manifest.c $(FUZZ_SRC_ckpt_manifest) \
		$(t_fuzz_input_ckpt_manifest_LDADD)
t/fuzz/fuzz_ckpt_state: t/fuzz/fuzz_ckpt_state.c $(FUZZ_COMMON) $(FUZZ_SRC_ckpt_state) \
		$(t_fuzz_input_ckpt_state_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_ckpt_state.c $(FUZZ_SRC_ckpt_state) \
		$(t_fuzz_input_ckpt_state_LDADD)
t/fuzz/fuzz_model: t/fuzz/fuzz_model.c $(FUZZ_COMMON) $(FUZZ_SRC_model) \
		$(t_fuzz_input_model_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_model.c $(FUZZ_SRC_model) \
		$(t_fuzz_input_model_LDADD)
t/fuzz/fuzz_model_header: t/fuzz/fuzz_model_header.c $(FUZZ_COMMON) $(FUZZ_SRC_model_header) \
		$(t_fuzz_input_model_header_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_model_header.c $(FUZZ_SRC_model_header) \
		$(t_fuzz_input_model_header_LDADD)
t/fuzz/fuzz_ckpt_shard: t/fuzz/fuzz_ckpt_shard.c $(FUZZ_COMMON) $(FUZZ_SRC_ckpt_shard) \
		$(t_fuzz_input_ckpt_shard_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_ckpt_shard.c $(FUZZ_SRC_ckpt_shard) \
		$(t_fuzz_input_ckpt_shard_LDADD)
t/fuzz/fuzz_token_shard: t/fuzz/fuzz_token_shard.c $(FUZZ_COMMON) $(FUZZ_SRC_token_shard) \
		$(t_fuzz_input_token_shard_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_token_shard.c $(FUZZ_SRC_token_shard) \
		$(t_fuzz_input_token_shard_LDADD)
t/fuzz/fuzz_safetensors: t/fuzz/fuzz_safetensors.c $(FUZZ_COMMON) $(FUZZ_SRC_safetensors) \
		$(t_fuzz_input_safetensors_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_safetensors.c $(FUZZ_SRC_safetensors) \
		$(t_fuzz_input_safetensors_LDADD)
t/fuzz/fuzz_tokenizer: t/fuzz/fuzz_tokenizer.c $(FUZZ_COMMON) $(FUZZ_SRC_tokenizer) \
		$(t_fuzz_input_tokenizer_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_tokenizer.c $(FUZZ_SRC_tokenizer) \
		$(t_fuzz_input_tokenizer_LDADD)
t/fuzz/fuzz_metrics: t/fuzz/fuzz_metrics.c $(FUZZ_COMMON) $(FUZZ_SRC_metrics) \
		$(t_fuzz_input_metrics_DEPENDENCIES)
	$(AM_V_CCLD)$(FUZZ_BUILD) $(srcdir)/t/fuzz/fuzz_metrics.c $(FUZZ_SRC_metrics) \
		$(t_fuzz_input_metrics_LDADD)

FUZZ_TARGETS = t/fuzz/fuzz_config t/fuzz/fuzz_rdv_hello t/fuzz/fuzz_rdv_reply \
	t/fuzz/fuzz_join_blob t/fuzz/fuzz_ckpt_manifest t/fuzz/fuzz_ckpt_state \
	t/fuzz/fuzz_model t/fuzz/fuzz_model_header t/fuzz/fuzz_token_shard t/fuzz/fuzz_safetensors \
	t/fuzz/fuzz_metrics t/fuzz/fuzz_tokenizer

fuzz-check-cc:
	@$(MKDIR_P) t/fuzz
	@echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' > t/fuzz/cc-probe.c
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o t/fuzz/cc-probe t/fuzz/cc-probe.c \
		>/dev/null 2>&1 || { rm -f t/fuzz/cc-probe t/fuzz/cc-probe.c; \
		echo "make fuzz: '$(FUZZ_CC)' cannot build with libFuzzer and the sanitizers:" \
		     "install the Debian packages clang and libclang-rt-14-dev, or set FUZZ_CC" >&2; \
		exit 1; }
	@rm -f t/fuzz/cc-probe t/fuzz/cc-probe.c

# The harnesses are built once the compiler is known to work.
fuzz: fuzz-check-cc
	@$(MAKE) $(AM_MAKEFLAGS) fuzz-build
	@srcdir='$(srcdir)' $(SHELL) $(srcdir)/t/fuzz/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_NAMES)
fuzz-build: $(FUZZ_TARGETS)
	@:
.PHONY: fuzz fuzz-check-cc fuzz-build

clean-local: clean-fuzz
clean-fuzz:
	rm -rf t/fuzz/work $(FUZZ_TARGETS)
.PHONY: clean-fuzz
