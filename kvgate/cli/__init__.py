"""The ``kvgate`` command line."""
