"""Servers speaking the RocketMQ remoting protocol: the NameServer (``rmqwire.server.namesrv``);
the Broker and its store come later. Servers import remoting and codec, never the client."""
