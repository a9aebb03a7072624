"""Java-compatible helpers: fastjson escaping, Double.toString, String order and hash, clock."""

from __future__ import annotations

import math
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqwire.codec.java import (
    FASTJSON_BROWSER_ESCAPES,
    FASTJSON_BROWSER_NEEDS_ESCAPE,
    FASTJSON_ESCAPES,
    FASTJSON_NEEDS_ESCAPE,
    fastjson_quote,
    java_double_str,
    java_string_hash,
    java_string_sort_key,
    now_ms,
)


def test_fastjson_quote_matches_fastjson_default_features():
    # fastjson 1.2.83 JSON.toJSONString("a\u0001\u001f\u007f\u2028/é\"\\\b\t\n\f\r\u000b😀")
    s = 'a\x01\x1f\x7f\u2028/é"\\\b\t\n\f\r\x0b😀'
    assert fastjson_quote(s) == '"a\\u0001\\u001F\\u007F\\u2028/é\\"\\\\\\b\\t\\n\\f\\r\\u000B😀"'
    assert fastjson_quote("plain/text") == '"plain/text"'


def test_browser_table_is_the_default_table_plus_slash_for_ascii():
    assert FASTJSON_BROWSER_ESCAPES[ord("/")] == "\\/"
    assert {c: e for c, e in FASTJSON_BROWSER_ESCAPES.items() if c != ord("/")} == {
        c: e for c, e in FASTJSON_ESCAPES.items() if c < 0x80
    }


@given(st.characters())
def test_needs_escape_patterns_match_exactly_the_table_keys(ch):
    assert (FASTJSON_NEEDS_ESCAPE.search(ch) is not None) == (ord(ch) in FASTJSON_ESCAPES)
    assert (FASTJSON_BROWSER_NEEDS_ESCAPE.search(ch) is not None) == (
        ord(ch) in FASTJSON_BROWSER_ESCAPES
    )


@pytest.mark.parametrize(
    ("value", "java"),
    [
        # Java Double.toString / fastjson 1.2.83 on JDK 17
        (0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"), (1.5, "1.5"), (100.0, "100.0"),
        (123.456, "123.456"), (0.1, "0.1"), (1 / 3, "0.3333333333333333"),
        (0.001, "0.001"), (1e-4, "1.0E-4"), (2e-4, "2.0E-4"), (5e-5, "5.0E-5"),
        (-2.5e-10, "-2.5E-10"), (9999999.0, "9999999.0"), (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"), (123456789.0, "1.23456789E8"), (1e16, "1.0E16"),
        (1e22, "1.0E22"), (1.5e300, "1.5E300"), (1.7976931348623157e308, "1.7976931348623157E308"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"), (4.35e-320, "4.35E-320"),
        # subnormals whose shortest form has one digit: Java prints the nearest two digits
        (5e-324, "4.9E-324"), (1e-323, "1.0E-323"), (5e-323, "4.9E-323"), (6e-323, "5.9E-323"),
        (-5e-324, "-4.9E-324"),
        (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"),
    ],
)
def test_java_double_str(value, java):
    assert java_double_str(value) == java


@settings(deadline=None, max_examples=500)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_str_reads_back_and_has_java_layout(x):
    text = java_double_str(x)
    assert float(text) == x
    mantissa = text.lstrip("-").split("E")[0]
    assert "e" not in text and "+" not in text and "." in mantissa
    assert ("E" in text) == (x != 0 and not 1e-3 <= abs(x) < 1e7)


def test_java_string_sort_key_orders_like_string_compare_to():
    # Arrays.sort on JDK 17: U+1F600 (high surrogate 0xD83D) before U+FF21, unlike code points.
    words = ["\uff21", "\U0001f600", "b", "a", "", "ab"]
    assert sorted(words, key=java_string_sort_key) == ["", "a", "ab", "b", "\U0001f600", "\uff21"]
    assert sorted(words) == ["", "a", "ab", "b", "\uff21", "\U0001f600"]
    assert java_string_sort_key("\udc80") == b"\xdc\x80"  # lone surrogates sort too


@given(st.text(max_size=20))
def test_java_string_hash_is_31h_plus_c_over_utf16_units(s):
    units = struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be"))
    h = 0
    for u in units:
        h = (h * 31 + u) % (1 << 32)
    assert java_string_hash(s) == (h - (1 << 32) if h >= 1 << 31 else h)


def test_java_string_hash_reference_values():
    # String.hashCode() on JDK 17
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("\U0001f600") == 1772899
    assert java_string_hash("the quick brown fox jumps over") == 768645004


def test_now_ms_is_the_wall_clock_in_ms():
    before = time.time_ns() // 1_000_000
    now = now_ms()
    assert before <= now <= time.time_ns() // 1_000_000
