# Man pages, one per binary and one for the config file.
dist_man_MANS += man/stork.yaml.5
