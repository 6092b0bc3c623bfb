# Man pages, one per binary and one for the config file.
dist_man_MANS += man/stork.1 man/storkd.8 man/spank_stork.8 man/stork.yaml.5
