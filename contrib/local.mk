# contrib: the local test cluster, sbatch examples, setup helpers.
EXTRA_DIST += contrib/testcluster/stork-testcluster.in \
	contrib/debian-packages contrib/bootstrap contrib/run-tests contrib/test-summary contrib/run-sanitizer-tests contrib/demo contrib/as-root.bash \
	contrib/sbatch/demo.sbatch contrib/sbatch/demo.yaml contrib/bench/gpt2-124m.yaml \
	contrib/bench/gpu-figures contrib/bench/llmc-figures contrib/bench/llmc-cpu-figures \
	contrib/bench/prep-figures contrib/bench/telemetry-figures contrib/source-graph contrib/stale-names
noinst_SCRIPTS = contrib/testcluster/stork-testcluster

# The Python helper of `stork run -- PROGRAM` (stork(1), RUNNING YOUR OWN
# PROGRAM): one stdlib-only module, installed for PYTHONPATH to find
# (PYTHONPATH=$(pkgdatadir)/python), not as a Python package.
storkpythondir = $(pkgdatadir)/python
dist_storkpython_DATA = contrib/python/stork_program.py

# make deb: the Debian packages stork and stork-spank-plugin of the release
# build, built from the distribution in a temporary directory (so any
# configured tree will do) and put in deb/ (contrib/make-deb).
deb:
	$(AM_V_at)MAKE='$(MAKE)' VERSION='$(VERSION)' srcdir='$(srcdir)' OUTDIR='$(abs_top_builddir)/deb' \
		STORK_GIT_DESCRIBE='$(STORK_GIT_DESCRIBE)' bash $(srcdir)/contrib/make-deb
.PHONY: deb
clean-local: clean-deb
clean-deb:
	rm -rf deb
.PHONY: clean-deb
EXTRA_DIST += contrib/make-deb contrib/debian/changelog contrib/debian/control \
	contrib/debian/copyright contrib/debian/rules contrib/debian/source/format \
	contrib/debian/stork.install contrib/debian/stork-spank-plugin.install \
	contrib/debian/stork.lintian-overrides
