"""rmqwire's consumer-side Java helpers (tools/peers/java/consumer/ConsumerTool.java) around the
official Java client: request/reply requests sent with ``DefaultMQProducer.request``
(``request``), and the backlog drain of tools/bench/consumer (``drain``). One JSON object per line.

    tool = JavaConsumerTool(namesrv_addr)
    with tool.spawn_tool("request", topic="T", count=3) as proc:
        replies = proc.finish()
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools.peers.process import CliPeer, PeerProcess
from tools.reference import jars

SOURCE = Path(__file__).resolve().parent / "java" / "consumer" / "ConsumerTool.java"


class JavaConsumerTool(CliPeer):
    name = "java-consumer"

    def __init__(self, namesrv_addr: str, version: str = jars.DEFAULT_VERSION, heap: str = "512m",
                 jvm_args: Sequence[str] = ()) -> None:
        super().__init__(namesrv_addr)
        self.version = version
        self.lib_dir = jars.ensure_jars(version)
        self.classes = jars.compile_java([SOURCE], "consumer-tool", version)
        self.heap = heap
        self.jvm_args = list(jvm_args)

    def command(self, args: Sequence[str]) -> list[str]:
        return [
            jars.java_bin(), f"-Xmx{self.heap}", f"-Duser.home={self.home}",
            "-Drmq.logback.configurationFile=rmq.client.logback.xml", *self.jvm_args,
            "-cp", f"{self.classes}:{self.lib_dir}/*", "ConsumerTool", *args,
        ]

    def spawn_tool(self, command: str, deadline_s: float = 180.0, **options: Any) -> PeerProcess[dict[str, Any]]:
        """Run ``command`` with ``--namesrv`` and ``--<option> value`` for each keyword
        (underscores become dashes)."""
        args = [command, "--namesrv", self.namesrv_addr]
        for k, v in options.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        return self.spawn(args, dict, deadline_s)
