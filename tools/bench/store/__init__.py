"""Append throughput of rmqwire's store (``python -m tools.bench.store``)."""
