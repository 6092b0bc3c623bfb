# spank_stork.so: the SPANK plugin (see plugins/README in spank_stork(8)).
