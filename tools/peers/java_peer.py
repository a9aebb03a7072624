"""The official Apache RocketMQ Java client as an interop peer (tools/peers/java/peer/Peer.java).

    peer = JavaPeer("127.0.0.1:9876")
    sent = peer.produce("TopicA", 20, mode="batch", tag="TagA", keys="k{i}", props={"p": "v{i}"})
    got = peer.consume("TopicA", 20, group="g1")

One JVM per command (about 2 s each on 2 cores). Produce modes: sync, async, oneway, batch,
ordered, delay, transactional. Consume modes: push (concurrent, or ``orderly=True``) and litepull.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools.peers.process import CliPeer, PeerProcess
from tools.reference import jars

PEER_SOURCE = Path(__file__).resolve().parent / "java" / "peer" / "Peer.java"


def peer_classes(version: str = jars.DEFAULT_VERSION) -> Path:
    """Compile Peer.java against the official client jars (cached by content hash)."""
    return jars.compile_java([PEER_SOURCE], "peer", version)


class JavaPeer(CliPeer):
    name = "java"

    def __init__(self, namesrv_addr: str, version: str = jars.DEFAULT_VERSION,
                 heap: str = "256m", jvm_args: Sequence[str] = ()) -> None:
        super().__init__(namesrv_addr)
        self.version = version
        self.lib_dir = jars.ensure_jars(version)
        self.classes = peer_classes(version)
        self.heap = heap
        self.jvm_args = list(jvm_args)

    def command(self, args: Sequence[str]) -> list[str]:
        return [
            jars.java_bin(),
            f"-Xmx{self.heap}",
            # Small, quick JVMs: peers are short-lived and the machine is shared.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Duser.home={self.home}",
            # Without this the client would pick another component's logback config off the flat
            # classpath; its log then goes to <user.home>/logs/rocketmqlogs.
            "-Drmq.logback.configurationFile=rmq.client.logback.xml",
            *self.jvm_args,
            "-cp", f"{self.classes}:{self.lib_dir}/*",
            "Peer", *args,
        ]


class JavaToolPeer(CliPeer):
    """Base of our other Java helper programs (tools/peers/java/<tool>/<Main>.java): compiled
    against the official client jars, run one JVM per command, JSON objects on stdout."""

    source: Path
    main_class: str

    def __init__(self, namesrv_addr: str, version: str = jars.DEFAULT_VERSION, heap: str = "512m",
                 jvm_args: Sequence[str] = ()) -> None:
        super().__init__(namesrv_addr)
        self.version = version
        self.lib_dir = jars.ensure_jars(version)
        self.classes = jars.compile_java([self.source], self.name, version)
        self.heap = heap
        self.jvm_args = list(jvm_args)

    def command(self, args: Sequence[str]) -> list[str]:
        return [
            jars.java_bin(), f"-Xmx{self.heap}", f"-Duser.home={self.home}",
            "-Drmq.logback.configurationFile=rmq.client.logback.xml", *self.jvm_args,
            "-cp", f"{self.classes}:{self.lib_dir}/*", self.main_class, *args,
        ]

    def spawn_tool(self, command: str, deadline_s: float = 180.0, **options: Any) -> PeerProcess[dict[str, Any]]:
        """Run ``command`` with ``--namesrv`` and ``--<option> value`` for each keyword
        (underscores become dashes)."""
        args = [command, "--namesrv", self.namesrv_addr]
        for k, v in options.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        return self.spawn(args, dict, deadline_s)
