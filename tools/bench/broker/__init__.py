"""Side-by-side broker benchmark (official 5.3.3 Broker vs rmqwire's): ``python -m tools.bench.broker``."""
