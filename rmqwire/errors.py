"""One exception tree for rmqwire (stdlib only; every layer may import it)."""

from __future__ import annotations


class RmqwireError(Exception):
    """Base of every rmqwire exception."""


class CodecError(RmqwireError, ValueError):
    """Malformed bytes or values met while encoding or decoding.

    ``offset`` is the byte offset in the input where decoding failed, when known.
    """

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message if offset is None else f"{message} (at byte {offset})")
        self.offset = offset
        #: Frames decoded before the error in the same FrameDecoder.feed call.
        self.frames: list = []


class FrameTooLargeError(CodecError):
    """A frame's length prefix exceeds the configured maximum frame length."""


class HeaderLengthError(CodecError):
    """The header length in the header word does not fit inside the frame."""


class UnknownSerializeTypeError(CodecError):
    """The serialize-type byte of the header word is neither JSON (0) nor ROCKETMQ (1)."""


class HeaderDecodeError(CodecError):
    """The JSON or ROCKETMQ header could not be decoded (bad JSON, bad UTF-8, bad field)."""


class MissingHeaderFieldError(CodecError):
    """A required (Java ``@CFNotNull``) custom header field is absent."""


class MessageDecodeError(CodecError):
    """A stored/pulled message record or a batch body is malformed."""


class ProtocolError(RmqwireError):
    """The remoting conversation broke its rules."""


class LocalProtocolError(ProtocolError):
    """We misused the API (e.g. replying to a oneway request)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes we cannot accept; the connection must be closed without a reply."""


class RemotingError(RmqwireError):
    """Transport-level failure of a remoting call."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the call's timeout."""


class RemotingConnectError(RemotingError):
    """The TCP connection to the peer could not be established."""


class ConnectionLostError(RemotingError):
    """The connection closed while the call was pending."""


class RemotingTooManyRequestsError(RemotingError):
    """Too many calls in flight on one connection (Java ``RemotingTooMuchRequestException``)."""


class MQClientError(RmqwireError):
    """Local misuse of the client API (bad topic name, oversized message, ...), or a client
    operation that gave up (Java ``MQClientException``).

    ``response_code`` is Java's: a ResponseCode (e.g. 13 MESSAGE_ILLEGAL for a bad message), a
    ``ClientErrorCode`` (10001..10007), or -1. The last cause of a failed send is ``__cause__``.
    """

    def __init__(self, message: str = "", *, response_code: int = -1) -> None:
        super().__init__(message)
        self.response_code = response_code


class ClientErrorCode:
    """Java ``ClientErrorCode``: response codes of client-side failures."""

    CONNECT_BROKER_EXCEPTION = 10001
    ACCESS_BROKER_TIMEOUT = 10002
    BROKER_NOT_EXIST_EXCEPTION = 10003
    NO_NAME_SERVER_EXCEPTION = 10004
    NOT_FOUND_TOPIC_EXCEPTION = 10005
    REQUEST_TIMEOUT_EXCEPTION = 10006
    CREATE_REPLY_MESSAGE_EXCEPTION = 10007


class RequestTimeoutError(MQClientError):
    """A request-reply message was sent but no reply came in time (Java ``RequestTimeoutException``)."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message, response_code=ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION)


class BrokerResponseError(RmqwireError):
    """A peer answered with a response code that is neither success nor a normal outcome.

    One subclass per ``ResponseCode`` (kafka-python's errors module); ``for_code`` picks it.
    ``code`` is the int response code, ``remark`` the peer's remark (may be None). ``retriable``:
    Java's ``DefaultMQProducer.retryResponseCodes`` (a send is tried again on another broker);
    ``refresh_route``: the topic's route is stale and should be fetched again.
    """

    code: int = -1
    retriable: bool = False
    refresh_route: bool = False

    def __init_subclass__(
        cls, *, code: int | None = None, retriable: bool = False, refresh_route: bool = False
    ) -> None:
        super().__init_subclass__()
        if code is None:
            return
        if code in _BY_CODE:
            raise TypeError(f"response code {code} already has {_BY_CODE[code].__name__}")
        cls.code, cls.retriable, cls.refresh_route = code, retriable, refresh_route
        _BY_CODE[code] = cls

    def __init__(self, code: int | None = None, remark: str | None = None) -> None:
        if code is None:
            code = type(self).code
        text = f"response code {code}"
        name = _code_name(code)
        if name:
            text = f"{name} ({code})"
        super().__init__(f"{text}: {remark}" if remark else text)
        self.code = code
        self.remark = remark


_BY_CODE: dict[int, type[BrokerResponseError]] = {}

#: Java's ``MQBrokerException`` (response code + remark): the producer raises the typed
#: BrokerResponseError of the code, with ``broker_addr`` set to the broker that answered.
MQBrokerError = BrokerResponseError


class UnknownResponseCodeError(BrokerResponseError):
    """A response code rmqwire does not know; ``code`` keeps the number."""


def for_code(code: int, remark: str | None = None) -> BrokerResponseError:
    """The typed error for a response ``code`` (an UnknownResponseCodeError for unknown codes)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownResponseCodeError(code, remark)
    return cls(code, remark)


def error_class(code: int) -> type[BrokerResponseError]:
    """The class ``for_code`` uses for ``code`` (UnknownResponseCodeError when none)."""
    return _BY_CODE.get(code, UnknownResponseCodeError)


def _code_name(code: int) -> str | None:
    # imported late: the codec package imports this module
    from rmqwire.codec.codes import ResponseCode

    try:
        return ResponseCode(code).name
    except ValueError:
        return None


# ---- one class per ResponseCode: CamelCase of the Java name, plus "Error" unless it already ends
# so (SYSTEM_ERROR is BrokerSystemError, clear of the builtin); tests/unit/test_errors.py keeps this
# in step with rmqwire.codec.codes.ResponseCode. 4.9.8 used 209..211 for ACL admin failures; the 5.x names win here.

class RpcTimeOutError(BrokerResponseError, code=-1006): ...
class RpcSendToChannelFailedError(BrokerResponseError, code=-1004): ...
class RpcAddrIsNullError(BrokerResponseError, code=-1002): ...
class RpcUnknownError(BrokerResponseError, code=-1000): ...
class BrokerSystemError(BrokerResponseError, code=1, retriable=True): ...
class SystemBusyError(BrokerResponseError, code=2, retriable=True): ...
class RequestCodeNotSupportedError(BrokerResponseError, code=3): ...
class TransactionFailedError(BrokerResponseError, code=4): ...
class FlushDiskTimeoutError(BrokerResponseError, code=10): ...
class SlaveNotAvailableError(BrokerResponseError, code=11): ...
class FlushSlaveTimeoutError(BrokerResponseError, code=12): ...
class MessageIllegalError(BrokerResponseError, code=13): ...
class ServiceNotAvailableError(BrokerResponseError, code=14, retriable=True, refresh_route=True): ...
class VersionNotSupportedError(BrokerResponseError, code=15): ...
class NoPermissionError(BrokerResponseError, code=16, retriable=True, refresh_route=True): ...
class TopicNotExistError(BrokerResponseError, code=17, retriable=True, refresh_route=True): ...
class TopicExistAlreadyError(BrokerResponseError, code=18): ...
class PullNotFoundError(BrokerResponseError, code=19): ...
class PullRetryImmediatelyError(BrokerResponseError, code=20): ...
class PullOffsetMovedError(BrokerResponseError, code=21): ...
class QueryNotFoundError(BrokerResponseError, code=22): ...
class SubscriptionParseFailedError(BrokerResponseError, code=23): ...
class SubscriptionNotExistError(BrokerResponseError, code=24): ...
class SubscriptionNotLatestError(BrokerResponseError, code=25): ...
class SubscriptionGroupNotExistError(BrokerResponseError, code=26): ...
class FilterDataNotExistError(BrokerResponseError, code=27): ...
class FilterDataNotLatestError(BrokerResponseError, code=28): ...
class InvalidParameterError(BrokerResponseError, code=29): ...
class TransactionShouldCommitError(BrokerResponseError, code=200): ...
class TransactionShouldRollbackError(BrokerResponseError, code=201): ...
class TransactionStateUnknowError(BrokerResponseError, code=202): ...
class TransactionStateGroupWrongError(BrokerResponseError, code=203): ...
class NoBuyerIdError(BrokerResponseError, code=204, retriable=True): ...
class NotInCurrentUnitError(BrokerResponseError, code=205, retriable=True): ...
class ConsumerNotOnlineError(BrokerResponseError, code=206): ...
class ConsumeMsgTimeoutError(BrokerResponseError, code=207): ...
class NoMessageError(BrokerResponseError, code=208): ...
class PollingFullError(BrokerResponseError, code=209): ...
class PollingTimeoutError(BrokerResponseError, code=210): ...
class BrokerNotExistError(BrokerResponseError, code=211, refresh_route=True): ...
class BrokerDispatchNotCompleteError(BrokerResponseError, code=212): ...
class BroadcastConsumptionError(BrokerResponseError, code=213): ...
class FlowControlError(BrokerResponseError, code=215): ...
class NotLeaderForQueueError(BrokerResponseError, code=501, refresh_route=True): ...
class IllegalOperationError(BrokerResponseError, code=604): ...
class GoAwayError(BrokerResponseError, code=1500, retriable=True, refresh_route=True): ...
class ControllerFencedMasterEpochError(BrokerResponseError, code=2000): ...
class ControllerFencedSyncStateSetEpochError(BrokerResponseError, code=2001): ...
class ControllerInvalidMasterError(BrokerResponseError, code=2002): ...
class ControllerInvalidReplicasError(BrokerResponseError, code=2003): ...
class ControllerMasterNotAvailableError(BrokerResponseError, code=2004): ...
class ControllerInvalidRequestError(BrokerResponseError, code=2005): ...
class ControllerBrokerNotAliveError(BrokerResponseError, code=2006): ...
class ControllerNotLeaderError(BrokerResponseError, code=2007): ...
class ControllerBrokerMetadataNotExistError(BrokerResponseError, code=2008): ...
class ControllerInvalidCleanBrokerMetadataError(BrokerResponseError, code=2009): ...
class ControllerBrokerNeedToBeRegisteredError(BrokerResponseError, code=2010): ...
class ControllerMasterStillExistError(BrokerResponseError, code=2011): ...
class ControllerElectMasterFailedError(BrokerResponseError, code=2012): ...
class ControllerAlterSyncStateSetFailedError(BrokerResponseError, code=2013): ...
class ControllerBrokerIdInvalidError(BrokerResponseError, code=2014): ...
class ControllerJraftInternalError(BrokerResponseError, code=2015): ...
class ControllerBrokerLiveInfoNotExistsError(BrokerResponseError, code=2016): ...
class UserNotExistError(BrokerResponseError, code=3001): ...
class PolicyNotExistError(BrokerResponseError, code=3002): ...

