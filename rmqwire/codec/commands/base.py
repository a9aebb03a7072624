"""``Command``: one declaration per request code, read by the client call and the server processor.

A Command names its request code, request header and body types, response header and body
types, the response codes that are normal outcomes rather than errors (``statuses``), and whether
it is oneway (cf. Twisted AMP's ``Command``, kafka-python's per-API schema classes). No Twisted
here: ``responder`` only tags a function; rmqwire.remoting builds processor tables from the tags.

Body types: ``None`` (no body), ``bytes`` (raw: message bodies, batches, pulled records), a
``FastjsonBody`` subclass (JSON), or a ``BodyCodec`` (any other encode/decode pair).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from rmqwire.codec.body import FastjsonBody
from rmqwire.codec.codes import DEFAULT_VERSION, LanguageCode, ResponseCode, code_name
from rmqwire.codec.frame import RemotingCommand
from rmqwire.codec.header import CommandHeader
from rmqwire.errors import CodecError, for_code

H = TypeVar("H")
B = TypeVar("B")

#: The attribute ``responder`` sets on a function: the Commands it answers.
RESPONDS_TO = "__rmqwire_responds_to__"


@dataclasses.dataclass(frozen=True, slots=True)
class BodyCodec:
    """A body type that is neither raw bytes nor a fastjson bean."""

    name: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


BodyType = type[bytes] | type[FastjsonBody] | BodyCodec | None


def encode_body(body_type: BodyType, value: Any) -> bytes | None:
    """``value`` as body bytes for ``body_type`` (bytes always pass through unchanged)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, FastjsonBody):
        return value.encode()
    if isinstance(body_type, BodyCodec):
        return body_type.encode(value)
    raise CodecError(
        f"cannot encode a {type(value).__name__} as a body of type {_body_name(body_type)}"
    )


def decode_body(body_type: BodyType, data: bytes | None) -> Any:
    """Body bytes as ``body_type`` (None for an absent body)."""
    if body_type is None:
        return None
    if body_type is bytes or data is None:
        return data
    return body_type.decode(data)  # a BodyCodec or a FastjsonBody class


def _body_name(body_type: BodyType) -> str:
    if isinstance(body_type, BodyCodec):
        return body_type.name
    return "none" if body_type is None else body_type.__name__


@dataclasses.dataclass(frozen=True, slots=True)
class Response(Generic[H, B]):
    """A typed response: what a responder returns and what a typed call fires with.

    ``code`` is SUCCESS or one of the command's ``statuses``; ``command`` is the received frame
    (None on the answering side).
    """

    header: H | None = None
    body: B | None = None
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    command: RemotingCommand | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


class Command:
    """Base of every request declaration. Subclasses set the class attributes below.

    ``code``: the request code this declaration sends; ``codes``: every code it stands for
    (defaults to ``(code,)``; a responder of this command answers all of them).
    """

    code: ClassVar[int]
    codes: ClassVar[tuple[int, ...]] = ()
    header: ClassVar[type[CommandHeader] | None] = None
    body: ClassVar[BodyType] = None
    response_header: ClassVar[type[CommandHeader] | None] = None
    response_body: ClassVar[BodyType] = None
    statuses: ClassVar[frozenset[int]] = frozenset()
    oneway: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not hasattr(cls, "code"):
            return  # an abstract family base
        if "codes" not in cls.__dict__:
            cls.codes = (cls.code,)  # a subclass for another code does not inherit its parent's
        cls.code = int(cls.code)
        cls.codes = tuple(int(c) for c in cls.codes)
        if cls.code not in cls.codes:
            raise TypeError(f"{cls.__name__}.code {cls.code} is not among its codes {cls.codes}")
        cls.statuses = frozenset(int(c) for c in cls.statuses)
        if ResponseCode.SUCCESS in cls.statuses:
            raise TypeError(f"{cls.__name__}.statuses must not list SUCCESS")

    # ---- declaration helpers -------------------------------------------------------------------

    @classmethod
    def responder(cls, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Mark ``fn(self, header, body, context)`` as this command's responder (only tags it)."""
        tagged = list(getattr(fn, RESPONDS_TO, ()))
        tagged.append(cls)
        setattr(fn, RESPONDS_TO, tuple(tagged))
        return fn

    @classmethod
    def describe(cls) -> str:
        return f"{cls.__name__}[{code_name(cls.code)}]"

    # ---- the requesting side -------------------------------------------------------------------

    @classmethod
    def make_header(cls, header: Any = None, **fields: Any) -> CommandHeader | None:
        """A header object from an instance, a mapping of attribute names, or keyword fields."""
        if header is not None and fields:
            raise TypeError(f"{cls.__name__}: give a header (or mapping) or keyword fields, not both")
        if cls.header is None:
            if header is not None or fields:
                raise TypeError(f"{cls.describe()} has no request header")
            return None
        if isinstance(header, CommandHeader):
            if not isinstance(header, cls.header):
                raise TypeError(
                    f"{cls.describe()} takes a {cls.header.__name__}, got {type(header).__name__}"
                )
            return header
        return cls.header(**(dict(header) if header is not None else fields))

    @classmethod
    def request(
        cls,
        header: Any = None,
        body: Any = None,
        *,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = DEFAULT_VERSION,
        **fields: Any,
    ) -> RemotingCommand:
        """The request frame (opaque 0: the connection assigns one). Required header fields must be
        set (MissingHeaderFieldError otherwise), as Java senders always fill them."""
        hdr = cls.make_header(header, **fields)
        if hdr is not None:
            hdr.validate()
        return RemotingCommand.request(
            cls.code,
            hdr,
            encode_body(cls.body, body),
            oneway=cls.oneway,
            language=language,
            version=version,
        )

    @classmethod
    def parse_response(cls, response: RemotingCommand) -> Response[Any, Any]:
        """The typed response, or raise the typed error of a code that is not an outcome."""
        code = response.code
        if code != ResponseCode.SUCCESS and code not in cls.statuses:
            raise for_code(code, response.remark)
        header = None
        if cls.response_header is not None:
            # Outcome statuses often lack the success fields (PULL_NOT_FOUND, ...): Java decodes
            # them leniently too.
            header = cls.response_header.from_ext_fields(
                response.ext_fields, strict=code == ResponseCode.SUCCESS
            )
        return Response(
            header, decode_body(cls.response_body, response.body), code, response.remark, response
        )

    # ---- the answering side --------------------------------------------------------------------

    @classmethod
    def parse_request(
        cls, request: RemotingCommand, *, strict: bool = False
    ) -> tuple[CommandHeader | None, Any]:
        """The typed header and the decoded body.

        As Java's servers do, a missing required (``@CFNotNull``) field is left None by default:
        their header decoder logs the missing field and hands the processor a null, whose outcome
        is the processor's (GET_ROUTEINFO_BY_TOPIC without a topic answers TOPIC_NOT_EXIST for
        the topic "null"). ``strict=True`` raises MissingHeaderFieldError instead. A value that
        does not parse as its Java type always raises HeaderDecodeError.
        """
        header = None
        if cls.header is not None:
            header = cls.header.from_ext_fields(request.ext_fields, strict=strict)
        return header, decode_body(cls.body, request.body)

    @classmethod
    def build_response(
        cls,
        request: RemotingCommand,
        result: Response[Any, Any],
        *,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = DEFAULT_VERSION,
    ) -> RemotingCommand:
        """The frame answering ``request`` with ``result``."""
        return request.response_to(
            result.code,
            result.remark,
            result.header,
            encode_body(cls.response_body, result.body),
            language=language,
            version=version,
        )

    @classmethod
    def as_response(cls, value: Any) -> Response[Any, Any] | RemotingCommand | None:
        """What a responder returned, as a Response: None, a RemotingCommand (sent as it is), a
        Response, a header object (SUCCESS with that header) or a body (SUCCESS with that body)."""
        if value is None or isinstance(value, (Response, RemotingCommand)):
            return value
        if isinstance(value, CommandHeader):
            return Response(header=value)
        return Response(body=value)
