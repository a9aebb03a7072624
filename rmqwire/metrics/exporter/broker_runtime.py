"""GET_BROKER_RUNTIME_INFO's key/value table read as numbers (rocketmq-exporter's
``BrokerRuntimeStats``).

Java's reader throws on the first missing or odd key, which loses every runtime family of that
broker (what rocketmq-exporter#132/#164 see on 5.x); here each key is read on its own and a key the
broker does not send is left out. ``remainHowManyDataToFlush`` ("1.5 KiB") is read as bytes, where
Java keeps only the number before the unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rmqwire.metrics.exporter.families import (
    PMDT_BUCKETS,
    RUNTIME_BYTES,
    RUNTIME_PREFIX,
    RUNTIME_SCALARS,
    RUNTIME_TPS,
    TPS_WINDOWS,
)

UNITS = "KMGTPE"


def human_bytes(text: str) -> float | None:
    """``MixAll.humanReadableByteCount`` read back: "0 B", "1.5 KiB", "3.2 GB" -> bytes (Java's
    exporter counts 1024 per unit whatever the suffix; so do we)."""
    parts = text.strip().rstrip(".,").split()
    if len(parts) != 2:
        return None
    try:
        base = float(parts[0])
    except ValueError:
        return None
    unit = parts[1].rstrip(".,")
    if unit == "B":
        return base
    exp = UNITS.find(unit[:1].upper())
    return base * 1024 ** (exp + 1) if exp >= 0 else None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(slots=True)
class BrokerRuntimeStats:
    """The numbers of one broker's runtime table by family name, and its identity labels."""

    values: dict[str, float] = field(default_factory=dict)
    version_desc: str = ""
    boot_timestamp: str = ""
    version: str = ""

    @property
    def commit_log_max_offset(self) -> float | None:
        return self.values.get(RUNTIME_PREFIX + "commitlog_maxoffset")

    @classmethod
    def parse(cls, table: Mapping[str, str]) -> BrokerRuntimeStats:
        values: dict[str, float] = {}
        for suffix, (key, _) in RUNTIME_SCALARS.items():
            v = _number(table.get(key))
            if v is not None:
                values[RUNTIME_PREFIX + suffix] = v
        for suffix, (key, _) in RUNTIME_BYTES.items():
            v = human_bytes(table.get(key, ""))
            if v is not None:
                values[RUNTIME_PREFIX + suffix] = v
        for key, stem in RUNTIME_TPS.items():
            text = table.get(key)
            if text is None and key == "getTransferredTps":
                text = table.get("getTransferedTps")
            for window, part in zip(TPS_WINDOWS, (text or "").split(), strict=False):
                v = _number(part)
                if v is not None:
                    values[f"{RUNTIME_PREFIX}{stem}{window}"] = v
        values.update(_capacity(table.get("commitLogDirCapacity", "")))
        values.update(_distribution(table.get("putMessageDistributeTime", "")))
        return cls(values, table.get("brokerVersionDesc", ""), table.get("bootTimestamp", ""),
                   table.get("brokerVersion", ""))


def _capacity(text: str) -> dict[str, float]:
    """"Total : 98.3 GiB, Free : 20.1 GiB." -> total and free bytes."""
    out: dict[str, float] = {}
    for part in text.split(","):
        name, _, amount = part.partition(":")
        v = human_bytes(amount)
        kind = name.strip().lower()
        if v is not None and kind in ("total", "free"):
            out[RUNTIME_PREFIX + f"commitlogdir_capacity_{kind}"] = v
    return out


def _distribution(text: str) -> dict[str, float]:
    """"[<=0ms]:12 [0~10ms]:3 ..." -> the pmdt families (puts per latency range, last minute)."""
    out: dict[str, float] = {}
    for item in text.split():
        bucket, sep, count = item.rpartition(":")
        suffix = PMDT_BUCKETS.get(bucket.strip("[]"))
        v = _number(count) if sep else None
        if suffix is not None and v is not None:
            out[f"{RUNTIME_PREFIX}pmdt_{suffix}"] = v
    return out
