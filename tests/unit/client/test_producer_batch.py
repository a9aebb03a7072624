"""A batch send's one-pass check and tag (``Producer._batch``) against Java's checks written out
one by one (``Producer._batch_checked``): the same batch, error, ids and messages afterwards."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.client.message import Message
from rmqwire.client.producer.producer import Producer, _batch_ids
from rmqwire.codec.ids import UniqueIdGenerator


class _Instance:
    def __init__(self) -> None:
        # the same ids for both paths: a fixed clock, the same counter
        self.unique_ids = UniqueIdGenerator("10.0.0.1", pid=1, hash_code=2, clock=lambda: 1_700_000_000_000)


class _Config:
    max_message_size = 64


class _Producer:
    """What ``_batch`` reads of a producer."""

    _batch = Producer._batch
    _batch_alike = Producer._batch_alike
    _batch_checked = Producer._batch_checked

    def __init__(self, namespace: str | None) -> None:
        self.config = _Config()
        self._namespace = namespace
        self.instance = _Instance()

    def _instance(self) -> Any:
        return self.instance


_ODD = [
    ("topic", "U"), ("topic", "%RETRY%g"), ("topic", "T?"), ("topic", "SCHEDULE_TOPIC_XXXX"),
    ("body", b""), ("body", b"x" * 65), ("body", None), ("body", "text"), ("body", bytearray(b"ba")),
    ("WAIT", "false"), ("WAIT", "TRUE"), ("WAIT", None), ("DELAY", "2"), ("DELAY", "0"),
    ("UNIQ_KEY", "preset"), ("INNER_MULTI_DISPATCH", "q/r"), ("INNER_MULTI_DISPATCH", "q"),
    ("", "v"), ("a", "v"),
]


def _message(body: bytes, tags: str | None, odd: list[tuple[str, Any]]) -> Message:
    """A usual message of topic T, with what ``odd`` changes (a field, or a property set or
    removed)."""
    m = Message("T", body, tags=tags)
    for key, value in odd:
        if key in ("topic", "body"):
            setattr(m, key, value)
        elif value is None:
            m.properties.pop(key, None)
        else:
            m.properties[key] = value
    return m


_messages = st.builds(_message, st.binary(min_size=1, max_size=64), st.sampled_from([None, "A"]),
                      st.one_of(st.just([]), st.lists(st.sampled_from(_ODD), min_size=1, max_size=2)))


def _outcome(p: _Producer, batch: list[Any], *, check: bool) -> tuple[Any, ...]:
    try:
        b = p._batch_checked(list(batch)) if check else p._batch(batch)
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        made: Any = (type(e), str(e))
    else:
        made = (b.topic, b.body, b.flag, b.properties, [id(m) for m in b.messages])
        if b.ids is not None:  # a send result's msg_id as the messages hold their ids now
            assert b.ids == _batch_ids(b.messages)
    # the messages afterwards: ids, property order, topics (a message may be listed twice)
    after = [(m.topic, list(m.properties.items())) if isinstance(m, Message) else m for m in batch]
    return made, after, p.instance.unique_ids.next_id()


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(_messages, _messages, _messages, st.just("not a message")), min_size=1, max_size=6),
       st.sampled_from([None, "ns"]), st.data())
def test_one_pass_batch_equals_the_checks_one_by_one(batch: list[Any], namespace: str | None,
                                                      data: st.DataObject) -> None:
    if data.draw(st.booleans()) and isinstance(batch[0], Message):
        batch.append(batch[0])  # a message listed twice is tagged once
    twin = copy.deepcopy(batch)
    fast = _outcome(_Producer(namespace), batch, check=False)
    slow = _outcome(_Producer(namespace), twin, check=True)
    if isinstance(fast[0][0], str):  # a batch: its messages are the caller's, in order
        assert fast[0][4] == [id(m) for m in batch]
        fast = ((*fast[0][:4],), *fast[1:])
        slow = ((*slow[0][:4],), *slow[1:])
    assert fast == slow


@pytest.mark.parametrize("namespace", [None, "ns"])
@pytest.mark.parametrize("at", [0, 1, 2, "all"])
@pytest.mark.parametrize("odd", _ODD, ids=repr)
def test_each_odd_message_anywhere_gives_what_the_checks_one_by_one_give(
        odd: tuple[str, Any], at: int | str, namespace: str | None) -> None:
    batch = [_message(b"a", None, [odd] if at in (i, "all") else []) for i in range(3)]
    twin = copy.deepcopy(batch)
    fast = _outcome(_Producer(namespace), batch, check=False)
    slow = _outcome(_Producer(namespace), twin, check=True)
    assert fast[0][:4] == slow[0][:4] and fast[1:] == slow[1:]


def test_a_usual_batch_takes_the_one_pass() -> None:
    p = _Producer(None)
    calls = []
    p._batch_checked = lambda msgs: calls.append(msgs)  # type: ignore[method-assign]
    msgs = [Message("T", b"a", tags="A"), Message("T", b"bb", keys="k")]
    b = p._batch(msgs)
    assert calls == [] and b.messages == msgs
    assert [list(m.properties) for m in msgs] == [["TAGS", "WAIT", "UNIQ_KEY"], ["KEYS", "WAIT", "UNIQ_KEY"]]


def test_alike_maps_carry_their_ids_joined_and_others_do_not() -> None:
    p = _Producer(None)
    msgs = [Message("T", b"a", tags="A"), Message("T", b"bb", tags="A")]
    b = p._batch(msgs)
    assert b.ids == ",".join(m.properties["UNIQ_KEY"] for m in msgs) and b.ids.count(",") == 1
    # another map (the general pass) or a message listed twice: read from the messages at the answer
    twice = Message("T", b"a", tags="A")
    for batch in ([Message("T", b"a", tags="A"), Message("T", b"a", tags="B")],
                  [twice, Message("T", b"c", tags="A"), twice]):
        assert p._batch(batch).ids is None


_maps = st.dictionaries(st.sampled_from(["TAGS", "KEYS", "a", "b", "UNIQ_KEY", "DELAY", "WAIT", "",
                                         "INNER_MULTI_DISPATCH"]),
                        st.sampled_from(["v", "true", "false", "x\x02", "é", "2"]), max_size=3)


@settings(max_examples=400, deadline=None)
@given(_maps, st.integers(1, 5), st.lists(st.binary(min_size=1, max_size=8), min_size=5, max_size=5),
       st.sampled_from(["alike", "reordered", "twice", "shared map", "another map", "empty body"]),
       st.integers(0, 4), st.sampled_from([None, "ns"]))
def test_a_batch_of_alike_maps_equals_the_checks_one_by_one(base: dict[str, str], n: int,
                                                            bodies: list[bytes], odd: str, at: int,
                                                            namespace: str | None) -> None:
    # messages whose maps are equal (the one-pass's shared-text case), and each way out of it:
    # the same keys in another order, a message listed twice, two messages sharing one map,
    # another map, a body Java refuses
    batch = [Message("T", body) for body in bodies[:n]]
    for m in batch:
        m.properties = dict(base)  # any map, system keys too
    at %= n
    if odd == "reordered" and len(base) > 1:
        batch[at].properties = dict(reversed(base.items()))
    elif odd == "twice":
        batch.append(batch[at])
    elif odd == "shared map" and n > 1:
        batch[at].properties = batch[at - 1].properties
    elif odd == "another map":
        batch[at].properties["b"] = "other"
    elif odd == "empty body":
        batch[at].body = b""
    twin = copy.deepcopy(batch)
    fast = _outcome(_Producer(namespace), batch, check=False)
    slow = _outcome(_Producer(namespace), twin, check=True)
    if isinstance(fast[0][0], str):
        assert fast[0][4] == [id(m) for m in batch]
        fast = ((*fast[0][:4],), *fast[1:])
        slow = ((*slow[0][:4],), *slow[1:])
    assert fast == slow


def test_alike_maps_are_encoded_from_one_text_and_others_are_not() -> None:
    import rmqwire.client.producer.producer as producer_module

    calls: list[int] = []
    real = producer_module.encode_batch_alike

    def recording(msgs: Any, text: str, ids: Any) -> Any:
        calls.append(len(msgs))
        return real(msgs, text, ids)

    producer_module.encode_batch_alike = recording  # type: ignore[assignment]
    try:
        p = _Producer(None)
        p._batch([Message("T", b"a", tags="A"), Message("T", b"bb", tags="A")])
        assert calls == [2]
        twisted = Message("T", b"c", tags="A")
        twisted.properties = dict(reversed(twisted.properties.items()))  # WAIT, then TAGS
        b = p._batch([Message("T", b"a", tags="A"), twisted])
        assert calls == [2]  # the same map in another order: its own text
        assert b.body.count(b"TAGS\x01A\x02WAIT\x01true\x02UNIQ_KEY") == 1
        assert b.body.count(b"WAIT\x01true\x02TAGS\x01A\x02UNIQ_KEY") == 1
    finally:
        producer_module.encode_batch_alike = real  # type: ignore[assignment]


def test_one_body_size_and_flag_are_encoded_from_one_run_and_others_are_not() -> None:
    import rmqwire.client.producer.producer as producer_module

    runs: list[int] = []
    real = producer_module.encode_batch_run

    def recording(bodies: Any, flag: int, text: str, id_text: str, low: int) -> Any:
        out = real(bodies, flag, text, id_text, low)
        runs.append(len(bodies) if out is not None else -1)
        return out

    producer_module.encode_batch_run = recording  # type: ignore[assignment]
    try:
        p = _Producer(None)
        p.instance.unique_ids._count = iter(range(0x10, 0x1000))  # a run within one low byte
        msgs = [Message("T", b"ab", tags="A") for _ in range(3)]
        b = p._batch(msgs)
        assert runs == [3]
        assert b.body == producer_module.encode_batch(msgs)
        for odd in ("size", "flag", "big flag"):
            other = [Message("T", b"ab", tags="A") for _ in range(3)]
            if odd == "size":
                other[1].body = b"abc"
            elif odd == "flag":
                other[2].flag = 7
            else:  # equal big ints that are not one object: the per-entry writer
                other[0].flag = int("1000")
                other[1].flag = int("1000")
                other[2].flag = int("1000")
            b = p._batch(other)
            assert runs == [3], odd
            assert b.body == producer_module.encode_batch(other)
        p.instance.unique_ids._count = iter(range(0xFE, 0x1000))  # the low byte wraps: no run
        wrapped = [Message("T", b"ab", tags="A") for _ in range(3)]
        b = p._batch(wrapped)
        assert runs == [3]
        assert b.body == producer_module.encode_batch(wrapped)
        assert [m.properties["UNIQ_KEY"][-4:] for m in wrapped] == ["00FE", "00FF", "0100"]
    finally:
        producer_module.encode_batch_run = real  # type: ignore[assignment]
