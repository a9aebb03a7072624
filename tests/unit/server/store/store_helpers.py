"""Helpers of the store tests: small segment sizes, message builder, store factory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmqwire.codec.message import MessageExt
from rmqwire.server.store import DefaultMessageStore, MessageStoreConfig

STORE_HOST = ("127.0.0.1", 10911)
BORN_HOST = ("10.0.0.7", 50123)


def small_config(root: Path, **overrides: Any) -> MessageStoreConfig:
    """A store config with 64 KiB commit-log files, 50-entry consume-queue files and index
    files of 100 slots and 400 entries."""
    values: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": 64 * 1024,
        "mapped_file_size_consume_queue": 50 * 20,
        "max_hash_slot_num": 100,
        "max_index_num": 400,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)


def make_msg(
    topic: str = "TopicTest",
    body: bytes = b"hello",
    *,
    queue_id: int = 0,
    tags: str | None = "TagA",
    keys: str | None = None,
    props: dict[str, str] | None = None,
    **fields: Any,
) -> MessageExt:
    properties: dict[str, str] = {}
    if tags is not None:
        properties["TAGS"] = tags
    if keys is not None:
        properties["KEYS"] = keys
    properties.update(props or {})
    fields.setdefault("born_host", BORN_HOST)
    fields.setdefault("store_host", STORE_HOST)
    fields.setdefault("born_timestamp", 1_700_000_000_000)
    return MessageExt(topic=topic, body=body, properties=properties, queue_id=queue_id, **fields)


class StoreFactory:
    """Opens stores (load + start) and shuts down whatever is still open at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.open: list[DefaultMessageStore] = []

    def __call__(self, config: MessageStoreConfig | None = None, *, start: bool = True, **kw: Any) -> DefaultMessageStore:
        cfg = config if config is not None else small_config(self.root)
        store = DefaultMessageStore(cfg, **kw)
        store.load()
        if start:
            store.start()
        self.open.append(store)
        return store

    def close_all(self) -> None:
        for s in self.open:
            s.shutdown()  # a no-op for stores already shut down or abandoned
        self.open.clear()
