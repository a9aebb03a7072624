"""Side-by-side producer benchmark (rmqwire vs the official Java client): ``python -m tools.bench.producer``."""
