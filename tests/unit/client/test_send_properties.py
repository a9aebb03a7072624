"""The properties of a single send with a new UNIQ_KEY (Producer._with_new_id) as the template
frames them: the text and its quoted form equal encode_properties + json_quote of the whole map."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.testing import MemoryReactorClock

from rmqwire.client.producer import Producer
from rmqwire.codec.frame import json_quote
from rmqwire.codec.message import encode_properties

# keys and values with separators' neighbours, quotes, backslashes, controls (lower-case hex
# escapes), DEL, U+2028 and non-ASCII: everything json_quote's fix-ups touch
chars = st.sampled_from('ab"\\\x00\x03\x0b\x1f\x7f\u2028\u00e9\U0001f600')
key = st.text(chars, min_size=1, max_size=5)
value = st.text(chars, min_size=1, max_size=8)
uid = st.text("0123456789ABCDEF", min_size=32, max_size=32)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(key, value, max_size=4), min_size=1, max_size=4), uid)
def test_new_id_properties_equal_the_whole_map_written_and_quoted(maps, new_id):
    p = Producer(MemoryReactorClock(), "pg")
    for props in maps + maps:  # the second round reads the quoted heads kept by the first
        props = dict(props)
        text, quoted = p._with_new_id(props, new_id)
        assert list(props)[-1] == "UNIQ_KEY" and props["UNIQ_KEY"] == new_id
        assert text == encode_properties(props)
        assert quoted == json_quote(text).encode()
