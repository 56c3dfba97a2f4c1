"""Test doubles shared by the test suite (and usable by benchmarks)."""
