"""A batch put is dispatched as one ``DispatchBatch`` (one consume-queue write, one index loop):
its consume-queue and index files must be byte for byte those of the record-by-record dispatch,
which a store takes as soon as a dispatcher is added."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import BORN_HOST, STORE_HOST, make_msg, small_config

from rmqwire.codec.message import Message, MessageExt, decode_properties, encode_batch
from rmqwire.server.store import DefaultMessageStore, DispatchBatch
from rmqwire.server.store.consume_queue import ConsumeQueue
from rmqwire.server.store.index_file import IndexFile

T0 = 1_700_000_000_000

_word = st.text(st.characters(min_codepoint=0x61, max_codepoint=0x66), min_size=1, max_size=3)
_inner = st.fixed_dictionaries(
    {}, optional={"TAGS": _word, "KEYS": st.lists(_word, max_size=3).map(" ".join), "UNIQ_KEY": _word}
)
_op = st.tuples(
    st.integers(0, 2),  # queue id
    st.lists(_inner, min_size=1, max_size=23),  # a batch (up to 23: crosses 50-entry queue files)
    st.fixed_dictionaries({}, optional={"UNIQ_KEY": _word, "KEYS": _word}),  # the batch's own
    st.booleans(),  # then a single message
    st.integers(0, 3000),  # ms until the next put
)


class _Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> int:
        return self.t


def _open(root: Path, clock: _Clock, per_record: bool) -> tuple[DefaultMessageStore, list[tuple]]:
    # 7 slots and 30 entries per index file: chains, and files filling up in the middle of a batch
    store = DefaultMessageStore(small_config(root, max_hash_slot_num=7, max_index_num=30), now_ms=clock)
    store.load()
    store.start()
    arrivals: list[tuple] = []
    if per_record:
        store.add_dispatcher(lambda req: None)  # any added dispatcher: record by record
        store.add_arrival_listener(
            lambda r: arrivals.append((r.topic, r.queue_id, r.consume_queue_offset + 1, r.tags_code)))
    else:
        def on_batch(b: DispatchBatch) -> None:
            for i, code in enumerate(b.tags_codes):
                arrivals.append((b.topic, b.queue_id, b.first_queue_offset + i + 1, code))

        store.add_arrival_listener(
            lambda r: arrivals.append((r.topic, r.queue_id, r.consume_queue_offset + 1, r.tags_code)), on_batch)
    return store, arrivals


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for sub in ("consumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=1, max_size=8))
def test_batch_dispatch_writes_the_files_of_the_record_by_record_dispatch(tmp_path_factory, ops):
    clock = _Clock()
    roots = [tmp_path_factory.mktemp("fast") / "store", tmp_path_factory.mktemp("ref") / "store"]
    (fast, fast_arrivals), (ref, ref_arrivals) = _open(roots[0], clock, False), _open(roots[1], clock, True)
    for queue_id, inner, batch_props, single, step in ops:
        body = encode_batch([Message("BatchTopic", b"x" * 20, 0, p) for p in inner])
        for store in (fast, ref):
            batch = MessageExt(topic="BatchTopic", body=body, properties=dict(batch_props), queue_id=queue_id,
                               born_host=BORN_HOST, store_host=STORE_HOST, born_timestamp=T0)
            assert store.put_messages(batch).is_ok
            if single:
                assert store.put_message(make_msg("BatchTopic", queue_id=queue_id, keys="a b")).is_ok
        clock.t += step
    assert fast_arrivals == ref_arrivals
    fast.shutdown()
    ref.shutdown()
    fast_files, ref_files = _files(roots[0]), _files(roots[1])
    assert fast_files == ref_files
    assert any(name.startswith("index") for name in fast_files)


_units = st.lists(st.tuples(st.integers(1, 500), st.integers(-(2**40), 2**40)), min_size=1, max_size=23)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=st.integers(0, 120),
    batches=st.lists(st.tuples(_units, st.integers(-3, 3)), min_size=1, max_size=6),
)
def test_consume_queue_batch_write_equals_entry_by_entry(tmp_path_factory, start, batches):
    """Also a queue starting mid-file, a repeated batch, a gap and file boundaries (50 entries)."""
    root = tmp_path_factory.mktemp("cq")
    fast = ConsumeQueue("T", 0, root / "fast", 50 * 20)
    ref = ConsumeQueue("T", 0, root / "ref", 50 * 20)
    cq_offset, phys = start, 1000
    for units, shift in batches:
        first = max(0, cq_offset + shift)  # a repeat, a gap or the next entry
        sizes = [s for s, _ in units]
        tags = [t for _, t in units]
        offsets = []
        at = phys if shift >= 0 else max(0, phys - sum(sizes))  # a repeat points below the queue's end
        for s in sizes:
            offsets.append(at)
            at += s
        ok_fast = fast.put_batch_position_info(offsets, sizes, tags, first)
        ok_ref = all([ref.put_message_position_info(o, s, t, first + i)
                      for i, (o, s, t) in enumerate(zip(offsets, sizes, tags, strict=True))])
        assert ok_fast == ok_ref
        assert (fast.max_physic_offset, fast.min_logic_offset, fast.max_offset_in_queue) == \
            (ref.max_physic_offset, ref.min_logic_offset, ref.max_offset_in_queue)
        cq_offset, phys = first + len(units), max(phys, at)
    files = [{str(p.relative_to(root / side)): p.read_bytes() for p in (root / side).rglob("*") if p.is_file()}
             for side in ("fast", "ref")]
    assert files[0] == files[1]
    fast.mapped_file_queue.close()
    ref.mapped_file_queue.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rounds=st.lists(st.tuples(st.lists(st.integers(0, 2**31 - 1), max_size=12), st.integers(0, 5000)),
                    min_size=1, max_size=5),
    start_ts=st.sampled_from([0, T0]),
)
def test_index_put_hashes_equals_put_hash_one_by_one(tmp_path_factory, rounds, start_ts):
    """The file's bytes and header fields, up to and past the file filling up (20 entries)."""
    root = tmp_path_factory.mktemp("ix")
    fast = IndexFile(root / "1", 5, 20, 0, start_ts)
    ref = IndexFile(root / "2", 5, 20, 0, start_ts)
    ts, phy = T0, 0
    for hashes, step in rounds:
        ts += step
        offsets = list(range(phy, phy + len(hashes)))
        phy += len(hashes)
        done = fast.put_hashes(hashes, offsets, ts)
        put = 0
        for h, o in zip(hashes, offsets, strict=True):
            if not ref.put_hash(h, o, ts):
                break
            put += 1
        assert done == put
        fields = ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count",
                  "index_count")
        assert [getattr(fast, k) for k in fields] == [getattr(ref, k) for k in fields]
        assert bytes(fast.mm) == bytes(ref.mm)
    fast.close(flush=False)
    ref.close(flush=False)


def test_index_put_hashes_resumes_where_it_stopped(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "1", 5, 4)
    assert f.put_hashes([1, 2, 3, 4, 5], [10, 11, 12, 13, 14], T0) == 3  # entry 0 is never used
    g = IndexFile(tmp_path / "2", 5, 4)
    assert g.put_hashes([1, 2, 3, 4, 5], [10, 11, 12, 13, 14], T0, 3) == 5
    assert struct.unpack_from(">iqii", g.mm, 40 + 5 * 4 + 20) == (4, 13, 0, 0)
    f.close(flush=False)
    g.close(flush=False)


_pair = st.builds(lambda k, v: k + b"\x01" + v,
                  st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"XTAGS", b"WAIT", b""]),
                  st.sampled_from([b"", b"a", b"b c", b"\xc3\xa9", b"\xff", b"TAGS\x01x", b"KEYS"]))
_segment = st.one_of(_pair, _pair, _pair, st.binary(max_size=6))
_raw_props = st.lists(_segment, max_size=5).flatmap(
    lambda segs: st.booleans().map(lambda close: b"\x02".join(segs) + (b"\x02" if close and segs else b"")))


@settings(max_examples=300, deadline=None)
@given(
    inner=st.lists(_raw_props, min_size=1, max_size=4),
    batch_props=st.fixed_dictionaries({}, optional={"TAGS": st.sampled_from(["t", "\u00e9"]),
                                                    "KEYS": st.sampled_from(["k", "k l"]),
                                                    "UNIQ_KEY": st.just("U"), "WAIT": st.just("true")}),
)
def test_batch_record_keys_are_those_of_the_whole_properties_string(inner, batch_props):
    """Tags code, KEYS and UNIQ_KEY picked per record (the batch's pairs once, an inner string
    parsed only when it may hold a key) against ``decode_properties`` of the record's whole
    properties string: empty values, look-alike keys, values holding a key name, bad UTF-8."""
    from rmqwire.server.store.commitlog import tags_code_of
    from rmqwire.server.store.message_store import encode_batch_records

    body = b"".join(struct.pack(">iiiii", 20 + 1 + 2 + len(p), 0, 0, 0, 1) + b"b" + struct.pack(">h", len(p)) + p
                    for p in inner)
    batch = MessageExt(topic="T", body=body, properties=batch_props, born_host=BORN_HOST, store_host=STORE_HOST)
    encoded = encode_batch_records(batch, 0)
    assert len(encoded.sizes) == len(inner)
    for i, raw in enumerate(encoded.raw_properties):
        props = decode_properties(raw.decode("utf-8", "replace"))
        assert encoded.tags_codes[i] == tags_code_of("T", props, 0, {})
        assert encoded.keys[i] == props.get("KEYS", "")
        assert encoded.uniq_keys[i] == props.get("UNIQ_KEY")
