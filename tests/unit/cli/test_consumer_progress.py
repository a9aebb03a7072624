"""consumerProgress -g: the text follows the answering brokers' version (4.x: 4.9.7's mqadmin)."""

from __future__ import annotations

import types

import pytest

import rmqwire.cli.consumer as consumer
from rmqwire.cli.javafmt import printf
from rmqwire.codec.codes import DEFAULT_VERSION, V4_9_4
from rmqwire.codec.commands.admin import ConsumeStats, OffsetWrapper
from rmqwire.model import MessageQueue


def _progress(monkeypatch: pytest.MonkeyPatch, broker_version: int) -> str:
    table = {MessageQueue(topic="T", broker_name="broker-a", queue_id=i):
             OffsetWrapper(broker_offset=10, consumer_offset=5, pull_offset=7) for i in range(2)}
    stats = ConsumeStats(offset_table=table, consume_tps=1.5, broker_version=broker_version)
    shown: list[str] = []
    monkeypatch.setattr(consumer, "out", shown.append)
    env = types.SimpleNamespace(json=False, admin=types.SimpleNamespace(
        examine_consume_stats=lambda group, topic, cluster: stats))
    consumer._group_progress(env, "G", None, False, None)  # type: ignore[arg-type]
    return "".join(shown)


def test_a_4x_broker_gets_4_9_7s_text(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _progress(monkeypatch, V4_9_4)
    header = printf("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s%n", "#Topic", "#Broker Name",
                    "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime")
    assert text.startswith(header)
    assert text.endswith("\nConsume TPS: 1.50\nDiff Total: 10\n")


@pytest.mark.parametrize("version", [DEFAULT_VERSION, 0])
def test_a_5x_broker_or_none_gets_5_3_3s_text(monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    text = _progress(monkeypatch, version)
    assert "#Inflight" in text.splitlines()[0]
    assert text.endswith("\nConsume Diff Total: 10\nConsume Inflight Total: 4\n")
