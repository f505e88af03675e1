"""The `acid` command line: the stable contract other tools and tests use."""
