"""Benchmarks (not tests): run them by hand, e.g. ``python -m tools.bench.codec``."""
