"""Helpers for the NameServer unit tests: a fake clock, registration bodies, one-shot dispatch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred

from rmqwire.codec import RemotingCommand
from rmqwire.codec.codes import DEFAULT_VERSION, LanguageCode
from rmqwire.codec.commands.base import Command
from rmqwire.codec.commands.namesrv import RegisterBrokerBody
from rmqwire.codec.commands.topic import (
    DataVersion,
    TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
)
from rmqwire.remoting import JAVA_SERVER_CONFIG, Dispatcher, RequestContext
from rmqwire.server.namesrv.config import NamesrvSettings
from rmqwire.server.namesrv.kv import KVConfigManager
from rmqwire.server.namesrv.processor import ClientRequestProcessor, DefaultRequestProcessor
from rmqwire.server.namesrv.route_info import RouteInfoManager, TopicConfigTable


@dataclass
class FakeClock:
    now: int = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def topic_configs(*topics: str | tuple[str, int], perm: int = 6) -> dict[str, TopicConfig]:
    out = {}
    for t in topics:
        name, queues = (t, 4) if isinstance(t, str) else t
        out[name] = TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues,
                                perm=perm)
    return out


def table(*topics: str | tuple[str, int], counter: int = 1, state: int = 0,
          perm: int = 6) -> TopicConfigTable:
    return TopicConfigTable(topic_configs(*topics, perm=perm), DataVersion(state, 1000, counter))


def register_body(*topics: str | tuple[str, int], counter: int = 1, perm: int = 6) -> RegisterBrokerBody:
    return RegisterBrokerBody(topic_config_serialize_wrapper=TopicConfigAndMappingSerializeWrapper(
        topic_config_table=topic_configs(*topics, perm=perm),
        data_version=DataVersion(0, 1000, counter),
    ))


@dataclass
class Namesrv:
    """A NameServer's state and processors without any networking."""

    settings: NamesrvSettings
    clock: FakeClock
    routes: RouteInfoManager
    kv: KVConfigManager
    client: ClientRequestProcessor
    default: DefaultRequestProcessor
    channels: list[Any] = field(default_factory=list)

    def dispatcher(self) -> Dispatcher:
        return Dispatcher.for_config(JAVA_SERVER_CONFIG, self.default, self.client)

    def answer(self, command: type[Command], header: Any = None, *, body: Any = None,
               version: int = DEFAULT_VERSION, channel: Any = None, **fields: Any) -> RemotingCommand:
        """Send one typed request through a Java-like dispatcher; return the response frame."""
        request = command.request(header, body, version=version, language=LanguageCode.JAVA,
                                  **fields).with_opaque(1)
        return self.raw(request, channel=channel)

    def unchecked(self, command: type[Command], *, body: Any = None, version: int = DEFAULT_VERSION,
                  **fields: Any) -> RemotingCommand:
        """Like ``answer`` but required header fields may be missing (as a broken peer sends)."""
        assert command.header is not None
        ext = command.header(**fields).to_ext_fields()
        request = RemotingCommand.request(command.code, ext, body, version=version,
                                          language=LanguageCode.JAVA).with_opaque(1)
        return self.raw(request)

    def raw(self, request: RemotingCommand, *, channel: Any = None) -> RemotingCommand:
        d: Deferred[Any] = self.dispatcher().dispatch(
            request, RequestContext(peer="127.0.0.1:5555", channel=channel, request=request))
        results: list[Any] = []
        d.addBoth(results.append)
        assert results, "the dispatcher did not answer synchronously"
        return results[0]


def make_namesrv(props: dict[str, str] | None = None, kv_path: Any = None) -> Namesrv:
    settings = NamesrvSettings.from_properties(props or {})
    clock = FakeClock()
    routes = RouteInfoManager(settings.namesrv, clock)
    kv = KVConfigManager(kv_path)
    channels: list[Any] = []
    default = DefaultRequestProcessor(settings, routes, kv, on_broker_channel=channels.append)
    client = ClientRequestProcessor(settings, routes, kv, clock)
    return Namesrv(settings, clock, routes, kv, client, default, channels)


