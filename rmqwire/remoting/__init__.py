"""Remoting over Twisted: sans-IO connection, channels, typed calls and processors, client pool,
server, one RemotingConfig and RPC hooks."""

from rmqwire.remoting.client import RemotingClient
from rmqwire.remoting.config import JAVA_SERVER_CONFIG, RemotingConfig, RPCHook
from rmqwire.remoting.connection import (
    PendingCall,
    ProtocolFailed,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
    UnmatchedResponse,
)
from rmqwire.remoting.dispatcher import Dispatcher, Processor, RequestContext
from rmqwire.remoting.hooks import AclClientRPCHook
from rmqwire.remoting.protocol import RemotingProtocol
from rmqwire.remoting.server import RemotingServer

__all__ = [
    "JAVA_SERVER_CONFIG",
    "AclClientRPCHook",
    "Dispatcher",
    "PendingCall",
    "Processor",
    "ProtocolFailed",
    "RPCHook",
    "RemotingClient",
    "RemotingConfig",
    "RemotingConnection",
    "RemotingProtocol",
    "RemotingServer",
    "RequestContext",
    "RequestReceived",
    "ResponseReceived",
    "UnmatchedResponse",
]
