"""Code tables and their helpers."""

from __future__ import annotations

from rmqwire.codec.codes import RequestCode, code_name


def test_code_name_names_known_request_codes_and_keeps_unknown_numbers():
    assert code_name(105) == "GET_ROUTEINFO_BY_TOPIC(105)"
    assert code_name(RequestCode.SEND_MESSAGE_V2) == "SEND_MESSAGE_V2(310)"
    assert code_name(-1) == "-1"
    assert code_name(99999) == "99999"
