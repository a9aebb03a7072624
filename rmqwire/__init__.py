"""rmqwire: a pure-Python implementation of the Apache RocketMQ remoting protocol."""

__version__ = "0.1.0"
