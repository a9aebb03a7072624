"""The consumer side of request/reply (Java ``MessageUtil.createReplyMessage``): the reply a
consumer sends (with any producer) for a request message it received, which the broker pushes
back to the requesting client as PUSH_REPLY_MESSAGE_TO_CLIENT."""

from __future__ import annotations

from rmqwire.client.message import REPLY_MESSAGE_FLAG, REPLY_TOPIC_POSTFIX, Message
from rmqwire.codec import message as _codec
from rmqwire.codec.message import PropertyKey
from rmqwire.errors import ClientErrorCode, MQClientError

__all__ = ["create_reply_message", "get_reply_to_client"]


def create_reply_message(request: _codec.Message | None, body: bytes | str) -> Message:
    """A reply to ``request`` on ``<cluster>_REPLY_TOPIC`` carrying its CORRELATION_ID,
    REPLY_TO_CLIENT and TTL; MQClientError when the request has no CLUSTER property (it did not
    come from a broker)."""
    if request is None:
        raise MQClientError("create reply message fail, requestMessage cannot be null.",
                            response_code=ClientErrorCode.CREATE_REPLY_MESSAGE_EXCEPTION)
    props = request.properties
    cluster = props.get(PropertyKey.CLUSTER)
    if cluster is None:
        raise MQClientError(
            f"create reply message fail, requestMessage error, property[{PropertyKey.CLUSTER}] is null.",
            response_code=ClientErrorCode.CREATE_REPLY_MESSAGE_EXCEPTION)
    reply = Message(f"{cluster}_{REPLY_TOPIC_POSTFIX}", body)
    reply.properties.pop(PropertyKey.WAIT_STORE_MSG_OK, None)  # Java's new Message() sets none
    reply.properties[PropertyKey.MESSAGE_TYPE] = REPLY_MESSAGE_FLAG
    for key in (PropertyKey.CORRELATION_ID, PropertyKey.MESSAGE_REPLY_TO_CLIENT, PropertyKey.MESSAGE_TTL):
        value = props.get(key)
        if value is not None:
            reply.properties[key] = value
    return reply


def get_reply_to_client(msg: _codec.Message) -> str | None:
    return msg.properties.get(PropertyKey.MESSAGE_REPLY_TO_CLIENT)
