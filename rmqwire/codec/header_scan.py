"""A fast scan of a remoting JSON header in the one shape Java's fastjson writes it.

Java serializes a ``RemotingCommand`` header with its fields in name order, no whitespace, nulls
left out: ``{"code":0,"extFields":{...},"flag":1,"language":"JAVA","opaque":2,
"serializeTypeCurrentRPC":"JSON","version":479}`` (a remark, when set, between opaque and
serializeTypeCurrentRPC). ``scan_json_header`` accepts that shape only, with every string plain
printable ASCII (no escape, no quote) and every number a plain int of at most 19 digits, and then
reads the fields exactly as ``decode_json_header`` does; anything else (whitespace, another field
order or field, an escape, a quoted number, null, non-ASCII) is declined and goes to
``decode_json_header``, which stays the reader of record. tests/unit/codec/test_header_scan.py
property-tests that the scan declines or agrees with it.

The scan is what lets the remoting layer see a response's opaque and flag before any decode, and a
receiver read a send response's fields (``code``, ``ext_fields``) without a RemotingCommand.
Its result is the ``re.Match`` itself (no object built per frame), read through the functions
below; ``match.string`` is the header text. A send's SUCCESS answer in the brokers' usual shape
(``SEND_OK_EXT``) has its values read in the same pass (``SEND_OK_FIELDS``), so the producer does
not scan its extFields again.
"""

from __future__ import annotations

import json
import re

from rmqwire.codec.frame import RemotingCommand, decode_json_header

#: a JSON string body with nothing to unescape: printable ASCII but for '"' and '\'
_PLAIN = r'[ !#-\[\]-~]*'
#: a JSON int as Java writes it (no leading zero, no sign but '-'), small enough for a long
_INT = r'-?(?:0|[1-9][0-9]{0,18})'
_PAIR = rf'"{_PLAIN}":"{_PLAIN}"'

#: the extFields of a send's SUCCESS answer as Java brokers (4.9 and 5.x) write them: the response
#: header's fields and the broker's TRACE_ON and MSG_REGION in the HashMap's order of that key
#: set, ids in range for an int and a long (one digit more than either holds is left to the
#: reader's checks). A subset of the generic object below, tried first inside the one scan so a
#: send's answer is not scanned a second time; its groups are None for any other object.
SEND_OK_EXT = (
    rf'\{{"queueId":"(0|[1-9][0-9]{{0,9}})","transactionId":"({_PLAIN})",'
    rf'"msgId":"({_PLAIN})","TRACE_ON":"({_PLAIN})","MSG_REGION":"({_PLAIN})",'
    rf'"queueOffset":"(0|[1-9][0-9]{{0,17}})"\}}'
)

_HEADER = re.compile(
    rf'\{{"code":({_INT}),'
    rf'(?:"extFields":((?:{SEND_OK_EXT})|\{{(?:{_PAIR}(?:,{_PAIR})*)?\}}),)?'
    rf'"flag":({_INT}),"language":"[A-Z_]+","opaque":({_INT}),'
    rf'(?:"remark":"({_PLAIN})",)?'
    rf'"serializeTypeCurrentRPC":"JSON","version":{_INT}\}}'
)

#: group numbers of a scan's fields
CODE, EXT_FIELDS, FLAG, OPAQUE, REMARK = 1, 2, 9, 10, 11
#: group numbers of the send-OK extFields' values (queueId, transactionId, msgId, TRACE_ON,
#: MSG_REGION, queueOffset): set only when the extFields are SEND_OK_EXT's shape
SEND_OK_FIELDS = (3, 4, 5, 6, 7, 8)
SEND_OK_QUEUE_ID = 3

scan_json_header = _HEADER.fullmatch
"""``scan_json_header(text)``: the match of a header's text (decoded as latin-1, so any bytes
are text), or None when it is not in the shape above."""

_SCAN_OBJECT = json.JSONDecoder().scan_once


def scanned_code(scan: re.Match[str]) -> int:
    return int(scan[CODE])


def scanned_ext_fields(scan: re.Match[str]) -> dict[str, str] | None:
    """The extFields object (None when absent), as the JSON parser reads it: a later duplicate
    key wins. The scan has checked it is an object of plain strings."""
    ext = scan[EXT_FIELDS]
    return None if ext is None else _SCAN_OBJECT(ext, 0)[0]


def scanned_remark(scan: re.Match[str]) -> str | None:
    return scan[REMARK]


def scanned_command(scan: re.Match[str], body: bytes | None) -> RemotingCommand:
    """The header as ``decode_json_header`` reads it (the typed path's input)."""
    return decode_json_header(scan.string.encode("ascii"), body)
