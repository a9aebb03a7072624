"""fastjson-compatible JSON: lenient reading, fastjson-style and standard writing, bad input.

Literal expectations marked "fastjson 1.2.83" were printed by JSON.toJSONString / JSON.parse of
the fastjson-1.2.83 jar shipped with RocketMQ 5.3.3 (JDK 17).
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.codec.fastjson import (
    _NO_RESULT,
    MAX_DEPTH,
    FrozenObject,
    _loads_rewritten,
    _Scanner,
    dumps,
    java_double,
    loads,
)
from rmqwire.errors import CodecError
from rmqwire.model import MessageQueue

MQ_KEY_OBJ = FrozenObject({"brokerName": "b", "queueId": 0, "topic": "T"})


# ---- reading --------------------------------------------------------------------------------


def test_standard_json_passes_through():
    assert loads('{"a":[1,2.5,"x",true,false,null]}') == {"a": [1, 2.5, "x", True, False, None]}
    assert loads(b'{"k":"\\u00e9\\uD83D\\uDE00"}') == {"k": "é😀"}


def test_unquoted_numeric_keys_become_ints():
    assert loads('{0:"127.0.0.1:10911",1:"127.0.0.1:10921",-1:"x"}') == {
        0: "127.0.0.1:10911",
        1: "127.0.0.1:10921",
        -1: "x",
    }


def test_object_keys_become_hashable_frozen_objects():
    v = loads('{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":10}}')
    [(key, value)] = v.items()
    assert isinstance(key, FrozenObject)
    assert key == {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert key == MQ_KEY_OBJ and hash(key) == hash(MQ_KEY_OBJ)
    assert value == {"maxOffset": 10}
    # Nested containers inside a key are frozen too (arrays become tuples).
    assert loads('{{"a":[1,{"b":2}]}:1}') == {FrozenObject({"a": (1, FrozenObject({"b": 2}))}): 1}
    assert loads("{[1,2]:3}") == {(1, 2): 3}
    # A frozen key equals the plain dict it was parsed from, lists included.
    assert loads('{{"a":[1,{"b":[2]}]}:1}') == {FrozenObject({"a": [1, {"b": [2]}]}): 1}
    [key] = loads('{{"a":[1,{"b":[2]}]}:1}')
    assert key == {"a": [1, {"b": [2]}]}
    assert key != {"a": [1, {"b": [3]}]}


def test_lenient_syntax_fastjson_accepts():
    # Unquoted identifier keys, single quotes, \x escapes and stray commas (all fastjson 1.2.83).
    assert loads("{a:1,'b':'x\\x41',\"c\":[1,2,],}") == {"a": 1, "b": "xA", "c": [1, 2]}
    assert loads("[1,,2]") == [1, 2]
    assert loads("{$ref_1:true}") == {"$ref_1": True}
    assert loads('"\x01raw control"') == "\x01raw control"


def test_big_ints_and_java_doubles():
    assert loads("[123456789012345678901234567890,-9223372036854775808]") == [
        123456789012345678901234567890,
        -(2**63),
    ]
    assert loads("[1.0E7,4.9E-324,-0.0,1.5F,7L]") == [1e7, 5e-324, -0.0, 1.5, 7]


def test_bytes_are_utf8():
    assert loads('{"t":"标签"}'.encode()) == {"t": "标签"}
    with pytest.raises(CodecError) as ei:
        loads(b'{"t":"\xff"}')
    assert ei.value.offset == 6


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("", 0),
        ("[", 1),
        ("{", 1),
        ('{"a"', 4),
        ('{"a":}', 5),
        ("[1 2]", 3),
        ('"abc', 0),
        ("nul", 0),
        ('{"a":1}x', 7),
        ('"\\u12"', 1),
        ('{"a":1 "b":2}', 7),
        ('"\\q"', 1),
        ("{:1}", 1),
        ("-", 0),
    ],
)
def test_bad_text_raises_codec_error_with_offset(text, offset):
    with pytest.raises(CodecError) as ei:
        loads(text)
    assert ei.value.offset == offset


@pytest.mark.parametrize("opener", ["[", "{", '{"a":', "{{"])
def test_nesting_is_bounded_without_recursion_error(opener):
    with pytest.raises(CodecError, match="nesting deeper than 512"):
        loads(opener * 100_000)
    # At the limit it still parses.
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_deeply_nested_object_key_raises_codec_error():
    # Within MAX_DEPTH, but freezing/hashing such a key recurses once per level.
    key = '{"a":' * 500 + "1" + "}" * 500
    with pytest.raises(CodecError, match="nested too deeply"):
        loads("{" + key + ":1}")
    shallow = '{"a":' * 50 + "1" + "}" * 50
    assert len(loads("{" + shallow + ":1," + shallow + ":2}")) == 1  # equal keys: last one wins


# ---- writing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "java"),
    [
        # fastjson 1.2.83: JSON.toJSONString(double)
        (0.0, "0.0"),
        (1.5, "1.5"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (1e-3, "0.001"),
        (1e-4, "1.0E-4"),
        (0.1, "0.1"),
        (1e16, "1.0E16"),
        (1e22, "1.0E22"),
        (1 / 3, "0.3333333333333333"),
        (-0.0, "-0.0"),
        (100.0, "100.0"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (math.nan, "null"),
        (math.inf, "null"),
        (9999999.0, "9999999.0"),
    ],
)
def test_java_double_layout(value, java):
    assert java_double(value) == java


@settings(deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_round_trips(x):
    text = java_double(x)
    assert float(text) == x
    assert "e" not in text and "+" not in text


def test_string_escaping_matches_fastjson():
    s = 'a\x01\x1f\x7f\u2028/é"\\\b\t\n\f\r\x0b😀'
    # fastjson 1.2.83: JSON.toJSONString(map) with default features
    expected = '{"s":"a\\u0001\\u001F\\u007F\\u2028/é\\"\\\\\\b\\t\\n\\f\\r\\u000B😀"}'
    assert dumps({"s": s}, standard=False) == expected
    assert loads(expected) == {"s": s}
    # fastjson 1.2.83 with BrowserCompatible (the NameServer's standard route)
    browser = '{"s":"a\\u0001\\u001F\\u007F\\u2028\\/\\u00E9\\"\\\\\\b\\t\\n\\f\\r\\u000B\\uD83D\\uDE00"}'
    assert dumps({"s": s}) == browser
    assert json.loads(browser) == {"s": s}
    assert dumps({"s": "plain/ascii"}) == '{"s":"plain\\/ascii"}'


def test_standard_style_sorts_map_keys_like_map_sort_field():
    # MapSortField sorts by the keys' own type: Long keys numerically (verified: 1, 2, 10).
    assert dumps({10: "a", 2: "b", 1: "c"}) == '{"1":"c","2":"b","10":"a"}'
    assert dumps({10: "a", 2: "b", 1: "c"}, standard=False) == '{10:"a",2:"b",1:"c"}'
    # String keys in String.compareTo order (UTF-16 units: U+FF21 after U+1F600).
    assert dumps({"\uff21": 1, "\U0001F600": 2, "b": 3, "a": 4}) == (
        '{"a":4,"b":3,"\\uD83D\\uDE00":2,"\\uFF21":1}'
    )
    mq = [MessageQueue("T", b, q) for b, q in (("b", 0), ("a", 3), ("a", 1))]
    out = dumps({m: 0 for m in mq})
    assert [loads(k)["brokerName"] + str(loads(k)["queueId"]) for k in json.loads(out)] == [
        "a1",
        "a3",
        "b0",
    ]


def test_standard_style_writes_unsafe_longs_as_strings():
    # BrowserCompatible: longs outside +-(2**53-1) become strings (JavaScript-safe).
    assert dumps([2**53 - 1, 2**53, -(2**53)]) == '[9007199254740991,"9007199254740992","-9007199254740992"]'
    assert dumps([2**53], standard=False) == "[9007199254740992]"


def test_non_string_keys_default_style_vs_standard():
    # fastjson 1.2.83 writes {1:"a",true:"b",1.5:"c",null:"d"} for a LinkedHashMap with those
    # keys (a Python dict cannot hold both 1 and True, hence two dicts).
    v = {1: "a", 1.5: "c", None: "d"}
    assert dumps(v, standard=False) == '{1:"a",1.5:"c",null:"d"}'
    assert dumps({True: "b"}, standard=False) == '{true:"b"}'
    assert json.loads(dumps(v)) == {"1": "a", "1.5": "c", "null": "d"}
    assert json.loads(dumps({True: "b"})) == {"true": "b"}


def test_object_keys_default_style_vs_standard():
    v = {MQ_KEY_OBJ: {"a": 1}}
    assert dumps(v, standard=False) == '{{"brokerName":"b","queueId":0,"topic":"T"}:{"a":1}}'
    std = dumps(v)
    assert std == '{"{\\"brokerName\\":\\"b\\",\\"queueId\\":0,\\"topic\\":\\"T\\"}":{"a":1}}'
    assert json.loads(std) == {'{"brokerName":"b","queueId":0,"topic":"T"}': {"a": 1}}
    # A MessageQueue key is written as the same object.
    mq = MessageQueue("T", "b", 0)
    assert dumps({mq: 1}, standard=False) == dumps({MQ_KEY_OBJ: 1}, standard=False)
    assert dumps({mq: 1}) == dumps({MQ_KEY_OBJ: 1})
    assert dumps([mq]) == '[{"brokerName":"b","queueId":0,"topic":"T"}]'


def test_standard_output_is_strict_json_for_awkward_values():
    v = {"n": math.nan, "sets": {1}, "t": (1, 2), "big": 2**70}
    out = dumps(v)
    assert json.loads(out) == {"n": None, "sets": [1], "t": [1, 2], "big": str(2**70)}
    assert dumps(v, standard=False) == '{"n":null,"sets":[1],"t":[1,2],"big":1180591620717411303424}'


def test_unencodable_values_raise_codec_error():
    with pytest.raises(CodecError):
        dumps({"x": object()}, standard=False)
    with pytest.raises(CodecError):
        dumps({"x": object()})
    deep: list = []
    cur = deep
    for _ in range(MAX_DEPTH + 5):
        cur.append([])
        cur = cur[0]
    with pytest.raises(CodecError):
        dumps(deep, standard=False)


# ---- properties -----------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
# Object keys as fastjson writes them for MessageQueue-like beans: string names, scalar values.
object_keys = st.dictionaries(
    st.text(max_size=6),
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=6),
    max_size=3,
).map(FrozenObject)
map_keys = st.text(max_size=8) | st.integers(-(2**63), 2**63 - 1) | object_keys

json_ish = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(map_keys, children, max_size=4),
    max_leaves=20,
)


@settings(deadline=None, max_examples=300)
@given(json_ish)
def test_default_style_round_trip(v):
    assert loads(dumps(v, standard=False)) == v


def _standardise(v):
    """What a standard JSON reader sees: keys turned into strings, unsafe longs into strings."""
    if isinstance(v, dict):
        return {_std_key(k): _standardise(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_standardise(x) for x in v]
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53 - 1:
        return str(v)
    return v


def _std_key(k):
    if isinstance(k, str):
        return k
    if isinstance(k, FrozenObject):
        return dumps(k, standard=False)  # the key string holds the object's fastjson text
    return str(k)


@settings(deadline=None, max_examples=300)
@given(json_ish)
def test_standard_style_is_strict_json(v):
    text = dumps(v)
    assert json.loads(text) == _standardise(v)
    assert loads(text) == _standardise(v)


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=64))
def test_random_bytes_raise_only_codec_error(data):
    try:
        loads(data)
    except CodecError:
        pass


@settings(deadline=None, max_examples=300)
@given(json_ish, st.data())
def test_mutated_text_raises_only_codec_error(v, data):
    text = dumps(v, standard=data.draw(st.booleans()))
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 4)))
    junk = data.draw(st.text(alphabet="{}[]:,'\"\\-0123456789.eEaxu ", max_size=3))
    try:
        loads(text[:i] + junk + text[j:])
    except CodecError:
        pass


# ---- the two lenient paths agree ----------------------------------------------------------------


def test_int_key_fast_path_skips_string_contents():
    text = r'{"s":"{0:1}","e\\":"\",3:","q\"":{7:"x"},8:[{9:1}]}'
    expected = {"s": "{0:1}", "e\\": '",3:', 'q"': {7: "x"}, 8: [{9: 1}]}
    assert loads(text) == expected
    assert _Scanner(text).parse() == expected


@settings(deadline=None, max_examples=300)
@given(json_ish)
def test_fast_path_agrees_with_scanner(v):
    text = dumps(v, standard=False)
    fast = _loads_rewritten(text)
    if fast is not _NO_RESULT:
        assert fast == _Scanner(text).parse() == v
