# contrib: the local test cluster, sbatch examples, data helpers.
EXTRA_DIST += contrib/testcluster/stork-testcluster.in
noinst_SCRIPTS = contrib/testcluster/stork-testcluster
