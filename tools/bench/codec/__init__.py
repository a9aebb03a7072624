"""Codec benchmark: rmqwire's codec against the official RocketMQ Java classes (see bench.py)."""
