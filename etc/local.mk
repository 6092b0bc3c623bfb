# Example configuration shipped with the sources.
EXTRA_DIST += etc/stork.yaml
