"""rmqwire's producer-side Java helpers (tools/peers/java/producer/ProducerTool.java) around the
official Java client: a producer that stays registered (``hold``), a replier for request-reply
(``reply``) and the load generator of tools/bench/producer (``bench``). One JSON object per line.

    tool = JavaProducerTool(namesrv_addr)
    with tool.spawn("hold", group="g", topic="T") as proc:
        proc.wait_started()
"""

from __future__ import annotations

from pathlib import Path

from tools.peers.java_peer import JavaToolPeer


class JavaProducerTool(JavaToolPeer):
    name = "java-producer"
    source = Path(__file__).resolve().parent / "java" / "producer" / "ProducerTool.java"
    main_class = "ProducerTool"
