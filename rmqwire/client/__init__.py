"""Clients built on the remoting layer; ``rmqwire.client.blocking`` is the thread-facing facade."""
