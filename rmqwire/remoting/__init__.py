"""Remoting over Twisted: sans-IO connection, protocol, processor table, client pool, server."""

from rmqwire.remoting.client import RemotingClient
from rmqwire.remoting.connection import (
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
    UnmatchedResponse,
)
from rmqwire.remoting.dispatcher import Dispatcher, RequestContext
from rmqwire.remoting.protocol import RemotingProtocol
from rmqwire.remoting.server import RemotingServer

__all__ = [
    "Dispatcher",
    "RemotingClient",
    "RemotingConnection",
    "RemotingProtocol",
    "RemotingServer",
    "RequestContext",
    "RequestReceived",
    "ResponseReceived",
    "UnmatchedResponse",
]
