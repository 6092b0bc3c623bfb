# Man pages, one per binary and one for the config file.
