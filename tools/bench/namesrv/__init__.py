"""Side-by-side NameServer benchmark (see bench.py)."""
