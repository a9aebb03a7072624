"""The fixed schema of the ``rocketmq`` source, and pulled messages as Arrow record batches.

RocketMQ's natural fields are first-class columns (rocketmq-spark had a JSON string of
properties and no tags/keys/msgId). ``properties`` holds the application's properties; the
system ones (TAGS, KEYS, UNIQ_KEY, ...) are columns already, and come too with
``systemProperties=true``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from rmqwire.client.message import RESERVED_PROPERTY_NAMES
from rmqwire.codec.message import MessageExt, PropertyKey

#: Spark DDL of the source's rows (``DataSource.schema``).
SCHEMA_DDL = ", ".join([
    "topic STRING", "brokerName STRING", "queueId INT", "queueOffset BIGINT", "msgId STRING",
    "offsetMsgId STRING", "tags STRING", "keys STRING", "body BINARY",
    "properties MAP<STRING, STRING>", "bornTimestamp TIMESTAMP", "storeTimestamp TIMESTAMP",
    "bornHost STRING", "storeHost STRING", "reconsumeTimes INT", "sysFlag INT",
])

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("brokerName", pa.string()), ("queueId", pa.int32()),
    ("queueOffset", pa.int64()), ("msgId", pa.string()), ("offsetMsgId", pa.string()),
    ("tags", pa.string()), ("keys", pa.string()), ("body", pa.binary()),
    ("properties", pa.map_(pa.string(), pa.string())), ("bornTimestamp", _TS),
    ("storeTimestamp", _TS), ("bornHost", pa.string()), ("storeHost", pa.string()),
    ("reconsumeTimes", pa.int32()), ("sysFlag", pa.int32()),
])

#: Properties the pull path adds on the client side (not stored with the message).
_CLIENT_ADDED = frozenset({PropertyKey.MIN_OFFSET, PropertyKey.MAX_OFFSET})


def host_str(host: tuple[str, int]) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def record_batch(msgs: Sequence[MessageExt], *, system_properties: bool = False) -> pa.RecordBatch:
    """One Arrow record batch of ``msgs`` in ``ARROW_SCHEMA`` (column by column: building Arrow
    arrays from Python lists is several times faster than Spark converting row tuples)."""
    if system_properties:
        props = [[kv for kv in m.properties.items() if kv[0] not in _CLIENT_ADDED] for m in msgs]
    else:
        props = [[kv for kv in m.properties.items() if kv[0] not in RESERVED_PROPERTY_NAMES]
                 for m in msgs]
    offset_ids = [m.offset_msg_id for m in msgs]
    cols = [
        [m.topic for m in msgs],
        [m.broker_name for m in msgs],
        [m.queue_id for m in msgs],
        [m.queue_offset for m in msgs],
        [m.properties.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or o for m, o in zip(msgs, offset_ids, strict=True)],
        offset_ids,
        [m.properties.get(PropertyKey.TAGS) for m in msgs],
        [m.properties.get(PropertyKey.KEYS) for m in msgs],
        [m.body for m in msgs],
        props,
        [m.born_timestamp * 1000 for m in msgs],
        [m.store_timestamp * 1000 for m in msgs],
        [host_str(m.born_host) for m in msgs],
        [host_str(m.store_host) for m in msgs],
        [m.reconsume_times for m in msgs],
        [m.sys_flag for m in msgs],
    ]
    arrays = [pa.array(c, type=f.type) for c, f in zip(cols, ARROW_SCHEMA, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
