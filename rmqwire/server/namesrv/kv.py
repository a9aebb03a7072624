"""KVConfigManager: namespace -> {key -> value}, persisted as the official ``kvConfig.json``.

The file is what Java's KVConfigSerializeWrapper writes, ``{"configTable":{"<ns>":{"k":"v"}}}``
(fastjson's default style), so a Java NameServer can take over rmqwire's file and back. Every
change is written at once and atomically (a temporary file, fsync, rename); the previous content
is kept beside it as ``<file>.bak``, as Java keeps it, and start-up falls back to it if the file
itself does not parse. The ``ORDER_TOPIC_CONFIG`` namespace is the one with a built-in meaning
(shared/spec/broker-and-store.md section 7.6).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from twisted.logger import Logger

from rmqwire.codec import fastjson
from rmqwire.codec.commands.namesrv import KVTable
from rmqwire.errors import CodecError
from rmqwire.server.files import write_with_backup
from rmqwire.server.namesrv.hash_order import hashmap_order

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigError(RuntimeError):
    """The KV file exists but neither it nor its backup can be read."""


class KVConfigManager:
    log = Logger()

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        """``path`` None keeps the table in memory only."""
        self.path = Path(path) if path is not None else None
        #: Values may be None (Java stores a null value; it is never written out or returned).
        self.config_table: dict[str, dict[str, str | None]] = {}
        #: Changes so far (route caches key on it: orderTopicConf comes from here).
        self.version = 0

    # ---- persistence -------------------------------------------------------------------------

    def load(self) -> None:
        if self.path is None:
            return
        errors = []
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            try:
                table = _parse(data)
            except CodecError as e:
                errors.append(f"{candidate}: {e}")
                self.log.error("cannot read KV config {path}: {error}", path=candidate, error=e)
                continue
            self.config_table.update(table)
            self.version += 1
            self.log.info("load KV config table OK from {path}", path=candidate)
            return
        if errors:
            raise KVConfigError("; ".join(errors))

    def persist(self) -> None:
        if self.path is None:
            return
        content = self.to_json().encode("utf-8", "replace")
        write_with_backup(self.path, content, self.path.with_name(self.path.name + ".bak"))

    def to_json(self) -> str:
        tree = {
            "configTable": {
                ns: {k: v for k in hashmap_order(table) if (v := table[k]) is not None}
                for ns in hashmap_order(self.config_table)
                for table in (self.config_table[ns],)
            }
        }
        return fastjson.dumps(tree, standard=False)

    # ---- operations --------------------------------------------------------------------------

    def put(self, namespace: str, key: str, value: str | None) -> None:
        table = self.config_table.setdefault(namespace, {})
        prev = table.get(key)
        table[key] = value
        self.version += 1
        self.log.info(
            "putKVConfig {what} config item, Namespace: {ns} Key: {key} Value: {value}",
            what="update" if prev is not None else "create new", ns=namespace, key=key, value=value,
        )
        self.persist()

    def delete(self, namespace: str | None, key: str | None) -> None:
        table = self.config_table.get(namespace)  # type: ignore[arg-type]
        if table is not None and key in table:
            value = table.pop(key)  # type: ignore[arg-type]
            self.version += 1
            self.log.info("deleteKVConfig delete a config item, Namespace: {ns} Key: {key} "
                          "Value: {value}", ns=namespace, key=key, value=value)
        self.persist()

    def get(self, namespace: str | None, key: str | None) -> str | None:
        table = self.config_table.get(namespace)  # type: ignore[arg-type]
        return table.get(key) if table is not None else None  # type: ignore[arg-type]

    def get_kv_list(self, namespace: str | None) -> bytes | None:
        """KVTable JSON of the namespace (None when it does not exist, even if empty ones do)."""
        table = self.config_table.get(namespace)  # type: ignore[arg-type]
        if table is None:
            return None
        ordered = {k: v for k in hashmap_order(table) if (v := table[k]) is not None}
        return KVTable(table=ordered).encode(standard=False)


def _parse(data: bytes) -> dict[str, dict[str, str | None]]:
    tree = fastjson.loads(data)
    if not isinstance(tree, Mapping):
        raise CodecError("the KV config file is not a JSON object")
    raw = tree.get("configTable") or {}
    if not isinstance(raw, Mapping):
        raise CodecError("configTable is not a JSON object")
    out: dict[str, dict[str, str | None]] = {}
    for ns, table in raw.items():
        if table is None:
            continue
        if not isinstance(table, Mapping):
            raise CodecError(f"namespace {ns!r} is not a JSON object")
        out[str(ns)] = {str(k): None if v is None else str(v) for k, v in table.items()}
    return out
