"""Store append throughput: messages/s for 1 KiB records, ASYNC_FLUSH and SYNC_FLUSH.

    python -m tools.bench.store [--seconds 5] [--dir DIR] [--body 1024]

Runs each case on a fresh store directory (default: a temp dir on the disk holding /tmp, removed
afterwards) with the Java default segment sizes (1 GiB commit log, 6 MB consume queues):

- async: ASYNC_FLUSH, one writer calling ``put_message`` back to back;
- async-batch16: ASYNC_FLUSH, SEND_BATCH_MESSAGE bodies of 16 messages;
- sync-1: SYNC_FLUSH, one writer waiting for each flush (one fdatasync per message);
- sync-window: SYNC_FLUSH, one writer keeping up to 256 ``async_put_message`` futures in flight, as
  a reactor would: the group commit serves every waiter with one fdatasync;
- pull: ``get_message`` of 32 messages at a time over what async wrote.

A benchmark, not a test: numbers depend on the disk and on what else runs. The CPU column
(process CPU time per message, all threads) is steadier than msg/s on a busy machine.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import tempfile
import time
from pathlib import Path

from rmqwire.codec.message import Message, MessageExt, encode_batch
from rmqwire.server.store import DefaultMessageStore, FlushDiskType, MessageStoreConfig

STORE_HOST = ("127.0.0.1", 10911)
BORN_HOST = ("127.0.0.1", 50000)


def _msg(body: bytes, i: int) -> MessageExt:
    return MessageExt(
        topic="BenchTopic",
        body=body,
        queue_id=i % 8,
        properties={"TAGS": "TagA", "KEYS": f"k{i}", "UNIQ_KEY": f"7F0000010001{i:020X}", "WAIT": "true"},
        born_timestamp=1_700_000_000_000,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


def _open(root: Path, flush: FlushDiskType) -> DefaultMessageStore:
    store = DefaultMessageStore(MessageStoreConfig(store_path_root_dir=str(root), flush_disk_type=flush))
    store.load()
    store.start()
    return store


def bench_puts(root: Path, flush: FlushDiskType, body: bytes, seconds: float) -> tuple[int, float]:
    store = _open(root, flush)
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            r = store.put_message(_msg(body, n))
            assert r.is_ok, r
            n += 1
    elapsed = time.perf_counter() - t0
    store.shutdown()
    return n, elapsed


def bench_window(root: Path, body: bytes, seconds: float, window: int = 256) -> tuple[int, float]:
    store = _open(root, FlushDiskType.SYNC_FLUSH)
    inflight: collections.deque = collections.deque()
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        while len(inflight) < window:
            inflight.append(store.async_put_message(_msg(body, n)))
            n += 1
        r = inflight.popleft().result(30)
        assert r.is_ok and r.status.name == "PUT_OK", r
    for f in inflight:
        assert f.result(30).is_ok
    elapsed = time.perf_counter() - t0
    store.shutdown()
    return n, elapsed


def bench_batch(root: Path, body: bytes, seconds: float, size: int = 16) -> tuple[int, float]:
    store = _open(root, FlushDiskType.ASYNC_FLUSH)
    inner = encode_batch([Message("BenchTopic", body, properties={"TAGS": "TagA", "KEYS": f"k{i}"}) for i in range(size)])
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        batch = _msg(inner, n)
        batch.properties = {"UNIQ_KEY": f"7F0000010001{n:020X}", "WAIT": "true"}
        r = store.put_messages(batch)
        assert r.is_ok, r
        n += size
    elapsed = time.perf_counter() - t0
    store.shutdown()
    return n, elapsed


def bench_pull(root: Path) -> tuple[int, float]:
    store = _open(root, FlushDiskType.ASYNC_FLUSH)
    n = 0
    t0 = time.perf_counter()
    for q in range(8):
        offset = 0
        while True:
            r = store.get_message("bench", "BenchTopic", q, offset, 32)
            if r is None or r.status.name != "FOUND":
                break
            n += r.message_count
            offset = r.next_begin_offset
    elapsed = time.perf_counter() - t0
    store.shutdown()
    return n, elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--body", type=int, default=1024, help="body bytes per message")
    ap.add_argument("--dir", type=Path, default=None, help="parent directory for the stores")
    args = ap.parse_args(argv)
    body = bytes(range(256)) * (args.body // 256) + b"x" * (args.body % 256)
    parent = Path(tempfile.mkdtemp(prefix="rmqwire-store-bench-", dir=args.dir))
    rows = []

    def case(name: str, fn, *a) -> None:
        cpu = time.process_time()
        n, t = fn(*a)
        rows.append((name, n, t, time.process_time() - cpu))

    try:
        case("async (1 writer)", bench_puts, parent / "async", FlushDiskType.ASYNC_FLUSH, body, args.seconds)
        case("async-batch16", bench_batch, parent / "batch", body, args.seconds)
        case("sync-1 (wait each flush)", bench_puts, parent / "sync1", FlushDiskType.SYNC_FLUSH, body, args.seconds)
        case("sync-window (256 in flight)", bench_window, parent / "syncw", body, args.seconds)
        case("pull 32/call (after async)", bench_pull, parent / "async")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    print(f"store throughput, {args.body}-byte bodies, {args.seconds:.0f} s per case, dir {parent.parent}")
    print(f"{'case':30} {'messages':>9} {'seconds':>8} {'msg/s':>9} {'MiB/s':>7} {'CPU us/msg':>11}")
    for name, n, t, cpu in rows:
        mib = n * args.body / t / 2**20
        print(f"{name:30} {n:9d} {t:8.2f} {n / t:9.0f} {mib:7.1f} {cpu / n * 1e6:11.1f}")
    return 0
