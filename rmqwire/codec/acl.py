"""ACL request signing for the remoting protocol (wire-format.md section 11).

Client rule (4.9.4+ and 5.x ``AclClientRPCHook``): put AccessKey (and SecurityToken) into extFields,
sort every extFields entry by key in Java ``String.compareTo`` order, concatenate the values (not the
keys) except ``Signature``, append the body, HMAC-SHA1 with the secret key, Base64, and send the
result as extFields ``Signature``. extFields must already hold the flattened custom header.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
from collections.abc import Iterable, Mapping

from rmqwire.codec.frame import RemotingCommand
from rmqwire.codec.java import java_string_sort_key
from rmqwire.errors import CodecError

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
#: Java ``MixAll.UNIQUE_MSG_QUERY_FLAG``: 4.x brokers always leave it out of the signed content.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"

#: Java ``SigningAlgorithm`` names to hashlib constructors.
SIGNING_ALGORITHMS = {
    "HmacSHA1": hashlib.sha1,
    "HmacSHA256": hashlib.sha256,
    "HmacMD5": hashlib.md5,
}

#: Request versions up to V4_9_3 (ordinal 399) get _UNIQUE_KEY_QUERY stripped by a 5.x verifier.
_V4_9_3 = 399


def signature_content(
    ext_fields: Mapping[str, str] | None, body: bytes | None, *, exclude: Iterable[str] = ()
) -> bytes:
    """The signed bytes: values of ``ext_fields`` sorted by key (minus ``Signature`` and
    ``exclude``), UTF-8 encoded, then the raw body."""
    skip = {SIGNATURE, *exclude}
    fields = ext_fields or {}
    try:
        keys = sorted((k for k in fields if k not in skip), key=java_string_sort_key)
        values = "".join(fields[k] for k in keys)
        return values.encode("utf-8") + (body or b"")
    except (TypeError, UnicodeEncodeError) as e:
        raise CodecError(f"extFields cannot be signed: {e}") from None


def calculate_signature(content: bytes, secret_key: str, algorithm: str = "HmacSHA1") -> str:
    """Base64 (with padding) of HMAC(UTF-8 secret key, content) (Java ``AclSigner.calSignature``)."""
    try:
        digest = SIGNING_ALGORITHMS[algorithm]
    except KeyError:
        raise CodecError(f"unknown signing algorithm {algorithm!r}") from None
    try:
        mac = hmac.new(secret_key.encode("utf-8"), content, digest).digest()
    except (AttributeError, TypeError, UnicodeEncodeError) as e:
        raise CodecError(f"cannot sign with this secret key / content: {e}") from None
    return base64.b64encode(mac).decode("ascii")


def sign_command(
    cmd: RemotingCommand,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
    *,
    drop_unique_key_query: bool = False,
) -> RemotingCommand:
    """A copy of ``cmd`` with AccessKey, SecurityToken (if given) and Signature in its extFields.

    ``drop_unique_key_query`` leaves ``_UNIQUE_KEY_QUERY`` out of the signed content while still
    sending it: a 4.x plain-ACL broker strips it before verifying.
    """
    ext = dict(cmd.ext_fields or {})
    ext[ACCESS_KEY] = access_key
    if security_token is not None:
        ext[SECURITY_TOKEN] = security_token
    exclude = (UNIQUE_KEY_QUERY,) if drop_unique_key_query else ()
    ext[SIGNATURE] = calculate_signature(signature_content(ext, cmd.body, exclude=exclude), secret_key)
    return dataclasses.replace(cmd, ext_fields=ext)


def verifier_strips_unique_key_query(request_version: int, *, broker_4x: bool = False) -> bool:
    """Whether a broker leaves ``_UNIQUE_KEY_QUERY`` out of the content it verifies: a 4.x broker
    always does, a 5.x broker only for requests of version V4_9_3 (399) or older."""
    return broker_4x or request_version <= _V4_9_3


def verify_command(
    cmd: RemotingCommand,
    secret_key: str,
    *,
    strip_unique_key_query: bool,
    algorithm: str = "HmacSHA1",
) -> bool:
    """True when ``cmd`` carries an AccessKey and a Signature that matches (constant-time compare)."""
    ext = cmd.ext_fields or {}
    signature = ext.get(SIGNATURE)
    if signature is None or ext.get(ACCESS_KEY) is None:
        return False
    exclude = (UNIQUE_KEY_QUERY,) if strip_unique_key_query else ()
    content = signature_content(ext, cmd.body, exclude=exclude)
    expected = calculate_signature(content, secret_key, algorithm)
    return hmac.compare_digest(expected.encode("utf-8"), signature.encode("utf-8"))
