"""Create a topic on a broker and wait until the NameServer serves its route (test set-up only).

Interop tests create their topics explicitly (UPDATE_AND_CREATE_TOPIC, code 17, sent straight to
the broker) instead of relying on auto-creation through TBW102, so queue counts are known and no
client races the broker's periodic re-registration. Requests go through the blocking one-shot
helper of the reference-cluster tooling (tools.reference.wire).
"""

from __future__ import annotations

import time

from rmqwire.codec.commands import TopicRouteData, UpdateAndCreateTopic
from rmqwire.errors import BrokerResponseError
from tools.reference import wire

PERM_READ_WRITE = 6  # PermName.PERM_READ | PermName.PERM_WRITE


class TopicSetupError(RuntimeError):
    pass


def create_topic(broker_addr: str, topic: str, *, queues: int = 4, order: bool = False,
                 namesrv_addr: str | None = None, timeout: float = 30.0) -> None:
    """Create (or update) ``topic`` with ``queues`` read and write queues on one broker.

    With ``namesrv_addr``, also wait until the NameServer returns a route with those queues.
    """
    try:
        wire.call(broker_addr, UpdateAndCreateTopic, topic=topic, default_topic="TBW102",
                  read_queue_nums=queues, write_queue_nums=queues, perm=PERM_READ_WRITE,
                  topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=order, timeout=timeout)
    except BrokerResponseError as e:
        raise TopicSetupError(f"create topic {topic} on {broker_addr}: {e}") from e
    if namesrv_addr is not None:
        wait_for_route(namesrv_addr, topic, queues=queues, timeout=timeout)


def wait_for_route(namesrv_addr: str, topic: str, *, queues: int = 1,
                   timeout: float = 30.0) -> TopicRouteData:
    """Poll the NameServer until ``topic`` has a route with at least ``queues`` write queues."""
    deadline = time.monotonic() + timeout
    while True:
        route = wire.get_route_info(namesrv_addr, topic)
        if route is not None and sum(q.write_queue_nums for q in route.queue_datas) >= queues:
            return route
        if time.monotonic() >= deadline:
            raise TopicSetupError(f"no route with {queues} queues for {topic} after {timeout:.0f} s")
        time.sleep(0.2)
