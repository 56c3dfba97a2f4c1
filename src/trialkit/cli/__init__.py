"""The command line; each command lives in its own module."""
