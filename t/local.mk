# Tests: Check unit tests (t/unit) and integration tests on a real Slurm
# cluster (t/integration), all run by `make check`.

# Flags every Check unit test uses; each area's fragment lists its programs:
#   check_PROGRAMS += t/unit/check_foo
#   TESTS += t/unit/check_foo
#   t_unit_check_foo_SOURCES = t/unit/check_foo.c
#   t_unit_check_foo_CFLAGS = $(UNIT_CFLAGS)
#   t_unit_check_foo_LDADD = $(UNIT_LIBS)
UNIT_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -DSTORK_TEST_DATA='"$(abs_top_srcdir)/t/data"'
UNIT_LIBS = lib/libstork.la $(CHECK_LIBS)

include t/unit/bind.mk
include t/unit/config.mk
include t/unit/hf.mk
include t/unit/comm.mk
include t/unit/engine.mk
include t/unit/rendezvous.mk
include t/gpu/gpu.mk
include t/fuzz/local.mk

# Integration tests: one TAP-producing driver that starts the cluster once.
check_PROGRAMS += t/integration/pmix_hello
t_integration_pmix_hello_SOURCES = t/integration/pmix_hello.c
t_integration_pmix_hello_CFLAGS = $(AM_CFLAGS) $(PMIX_CFLAGS)
t_integration_pmix_hello_LDADD = $(PMIX_LIBS)

TESTS += t/integration/run.sh
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
# hwloc's plugins (PCI, GL, OpenCL, libxml) find nothing on these CPU-only
# test machines (test topologies come as XML, read by hwloc's core) and leak
# a little memory when hwloc unloads them, which fails tests built with
# LeakSanitizer; the tests run without them.
# Every bats test gets 15 minutes (the longest, a job run to its time limit,
# takes about three): a test that hangs fails with a timeout instead of
# holding the suite.
# The figures stork bench and stork plan keep (stork(1) FILES) go to the
# build tree, not the user's cache.
AM_TESTS_ENVIRONMENT = abs_top_srcdir='$(abs_top_srcdir)' abs_top_builddir='$(abs_top_builddir)'; \
	HWLOC_PLUGINS_PATH='$(abs_top_builddir)/t/no-hwloc-plugins'; \
	BATS_TEST_TIMEOUT=$${BATS_TEST_TIMEOUT:-900}; \
	XDG_CACHE_HOME='$(abs_top_builddir)/t/cache'; \
	export abs_top_srcdir abs_top_builddir HWLOC_PLUGINS_PATH BATS_TEST_TIMEOUT XDG_CACHE_HOME;
EXTRA_DIST += t/integration/run.sh t/integration/helpers.bash t/integration/cluster.bats \
	t/integration/preempt.bats t/integration/rendezvous.bats t/integration/plugin.bats \
	t/integration/multinode.bats \
	t/integration/bench_comm.bats t/integration/package.bats t/integration/start_checks.bats \
	t/integration/sbatch_example.bats
# `stork run -- PROGRAM` on the cluster, and the programs it runs.
EXTRA_DIST += t/integration/program.bats t/integration/program/ddp_train.py \
	t/integration/program/rank.sh t/integration/mpi.bats t/integration/program/mpi_check.c
check_SCRIPTS += contrib/testcluster/stork-testcluster
clean-local: clean-integration
clean-integration:
	rm -rf t/integration/work t/testcluster.env t/testcluster.start.log
.PHONY: clean-integration
# The cluster's state goes with distclean, unless the cluster is running.
distclean-local: distclean-testcluster
distclean-testcluster:
	@if [ -e t/testcluster/run/slurmctld.pid ]; then \
		echo "t/testcluster kept: the test cluster is running (stork-testcluster stop)"; \
	else rm -rf t/testcluster; fi
.PHONY: distclean-testcluster

# ShellCheck over every shell and bats file of the git checkout (settings:
# .shellcheckrc); a finding fails the suite.
TESTS += t/lint/shellcheck.sh
EXTRA_DIST += t/lint/shellcheck.sh .shellcheckrc

# What the README and the examples in etc/ promise, read as text: the
# README's two commands run as written for root and for a user with sudo
# (with fakes of sudo and of the scripts' work), etc/stork.yaml names every
# key of the configuration table, etc/stork.sbatch shows the GPU lines.
TESTS += t/lint/readme.bats t/lint/examples.bats t/lint/tree.bats
EXTRA_DIST += t/lint/readme.bats t/lint/examples.bats t/lint/tree.bats

# The training engine's behaviour, run locally with `stork run` (no Slurm).
TESTS += t/train/train.bats t/train/errors.bats t/train/preempt_local.bats t/train/parallel.bats t/train/staging.bats t/train/llama.bats t/train/tokenizer.bats \
	t/train/checkpoint.bats t/train/spike.bats t/train/plan.bats
TEST_EXTENSIONS += .bats
# A crafted checkpoint's manifest made to agree with it (t/train/checkpoint.bats).
check_PROGRAMS += t/tools/ckpt_resum
t_tools_ckpt_resum_SOURCES = t/tools/ckpt_resum.c
t_tools_ckpt_resum_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(XXHASH_CFLAGS)
t_tools_ckpt_resum_LDADD = $(JANSSON_LIBS) $(XXHASH_LIBS)
BATS_LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
BATS_LOG_COMPILER = bats --tap --timing
EXTRA_DIST += t/tools/npm-oracles t/tools/tokenizer_oracle.js t/tools/make_corpus.py t/tools/tokenizer_files.py
EXTRA_DIST += t/tools/png_colours.py t/tools/webhook.py t/tools/http_server.py t/tools/local_server.py t/train/staging.bats
EXTRA_DIST += t/training.bash t/train/helpers.bash t/train/train.bats t/train/errors.bats t/train/preempt_local.bats t/train/parallel.bats t/train/llama.bats t/train/tokenizer.bats \
	t/train/checkpoint.bats t/train/spike.bats t/train/plan.bats
clean-local: clean-train
clean-train:
	rm -rf t/train/work t/cache
.PHONY: clean-train

# What the built programs load and export (ldd, nm): the plugin and stork
# stay free of the training engine's libraries.
TESTS += t/build/binaries.bats t/build/help.bats
EXTRA_DIST += t/build/binaries.bats t/build/help.bats
