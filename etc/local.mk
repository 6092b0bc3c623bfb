# Example configuration shipped with the sources.
EXTRA_DIST += etc/plugstack.conf.d/stork.conf etc/stork.yaml etc/stork.sbatch
