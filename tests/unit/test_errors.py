"""rmqwire.errors: one BrokerResponseError class per ResponseCode, for_code, retriable codes."""

from __future__ import annotations

import inspect

import pytest

from rmqwire import errors
from rmqwire.codec.codes import ResponseCode
from rmqwire.errors import (
    BrokerResponseError,
    BrokerSystemError,
    RmqwireError,
    TopicNotExistError,
    UnknownResponseCodeError,
    error_class,
    for_code,
)

#: Java's ``DefaultMQProducer.retryResponseCodes`` (client/.../producer/DefaultMQProducer.java).
JAVA_RETRY_RESPONSE_CODES = {
    ResponseCode.TOPIC_NOT_EXIST,
    ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY,
    ResponseCode.NO_PERMISSION,
    ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT,
    ResponseCode.GO_AWAY,
}
ERROR_CODES = [c for c in ResponseCode if c != ResponseCode.SUCCESS]


def per_code_classes() -> list[type[BrokerResponseError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, BrokerResponseError)
        and cls is not BrokerResponseError
        and cls is not UnknownResponseCodeError
        and cls.__module__ == errors.__name__
    ]


def expected_name(code: ResponseCode) -> str:
    """The naming rule of errors.py: CamelCase of the Java name + "Error" (not doubled when the
    name already ends in ERROR); SYSTEM_ERROR is BrokerSystemError, clear of the builtin."""
    if code == ResponseCode.SYSTEM_ERROR:
        return "BrokerSystemError"
    camel = "".join(part.capitalize() for part in code.name.split("_"))
    return camel if camel.endswith("Error") else camel + "Error"


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_every_response_code_has_exactly_one_class(code: ResponseCode) -> None:
    matching = [cls for cls in per_code_classes() if cls.code == code]
    assert len(matching) == 1, (code, matching)
    (cls,) = matching
    assert cls.__name__ == expected_name(code)
    assert error_class(code) is cls
    assert issubclass(cls, RmqwireError)


def test_no_class_for_success_and_no_class_without_a_code() -> None:
    codes = [cls.code for cls in per_code_classes()]
    assert ResponseCode.SUCCESS not in codes
    assert sorted(codes) == sorted(int(c) for c in ERROR_CODES)  # one-to-one, nothing extra


def test_code_registered_twice_is_refused() -> None:
    with pytest.raises(TypeError, match="already has TopicNotExistError"):

        class Again(BrokerResponseError, code=17):
            ...


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_for_code_returns_an_instance_with_code_and_remark(code: ResponseCode) -> None:
    err = for_code(int(code), "the remark")
    assert type(err) is error_class(code)
    assert (err.code, err.remark) == (code, "the remark")
    assert str(err) == f"{code.name} ({int(code)}): the remark"
    bare = for_code(int(code))
    assert bare.remark is None and str(bare) == f"{code.name} ({int(code)})"


def test_retriable_set_is_javas_retry_response_codes() -> None:
    retriable = {cls.code for cls in per_code_classes() if cls.retriable}
    assert retriable == {int(c) for c in JAVA_RETRY_RESPONSE_CODES}
    for code in ResponseCode:
        if code != ResponseCode.SUCCESS:
            assert for_code(code).retriable == (code in JAVA_RETRY_RESPONSE_CODES)


def test_refresh_route_flags() -> None:
    refresh = {ResponseCode(cls.code).name for cls in per_code_classes() if cls.refresh_route}
    assert refresh == {
        "SERVICE_NOT_AVAILABLE",
        "NO_PERMISSION",
        "TOPIC_NOT_EXIST",
        "BROKER_NOT_EXIST",
        "NOT_LEADER_FOR_QUEUE",
        "GO_AWAY",
    }


def test_unknown_code_keeps_the_number() -> None:
    err = for_code(4242, "new in 6.x")
    assert type(err) is UnknownResponseCodeError and isinstance(err, BrokerResponseError)
    assert (err.code, err.remark) == (4242, "new in 6.x")
    assert str(err) == "response code 4242: new in 6.x"
    assert not err.retriable and not err.refresh_route
    assert error_class(4242) is UnknownResponseCodeError
    assert for_code(-7).code == -7


def test_typed_errors_can_be_raised_with_only_a_remark() -> None:
    err = TopicNotExistError(remark="No topic route info in name server for the topic: T")
    assert (err.code, err.remark) == (17, "No topic route info in name server for the topic: T")
    assert isinstance(BrokerSystemError(), BrokerResponseError) and BrokerSystemError().code == 1
    # the base class takes any code (raised by raw handlers)
    base = BrokerResponseError(ResponseCode.NO_PERMISSION, "denied")
    assert (base.code, base.remark, str(base)) == (16, "denied", "NO_PERMISSION (16): denied")


def test_catching_by_class_hierarchy() -> None:
    with pytest.raises(BrokerResponseError):
        raise for_code(ResponseCode.SYSTEM_BUSY)
    with pytest.raises(RmqwireError):
        raise for_code(999)
