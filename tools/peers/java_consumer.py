"""rmqwire's consumer-side Java helpers (tools/peers/java/consumer/ConsumerTool.java) around the
official Java client: request/reply requests sent with ``DefaultMQProducer.request``
(``request``), and the backlog drain of tools/bench/consumer (``drain``). One JSON object per line.

    tool = JavaConsumerTool(namesrv_addr)
    with tool.spawn_tool("request", topic="T", count=3) as proc:
        replies = proc.finish()
"""

from __future__ import annotations

from pathlib import Path

from tools.peers.java_peer import JavaToolPeer


class JavaConsumerTool(JavaToolPeer):
    name = "java-consumer"
    source = Path(__file__).resolve().parent / "java" / "consumer" / "ConsumerTool.java"
    main_class = "ConsumerTool"
