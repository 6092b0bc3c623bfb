# Example configuration shipped with the sources.
