# contrib: the local test cluster, sbatch examples, setup helpers.
EXTRA_DIST += contrib/testcluster/stork-testcluster.in \
	contrib/debian-packages contrib/bootstrap contrib/run-tests contrib/demo \
	contrib/sbatch/demo.sbatch contrib/sbatch/demo.yaml contrib/bench/gpt2-124m.yaml
noinst_SCRIPTS = contrib/testcluster/stork-testcluster
