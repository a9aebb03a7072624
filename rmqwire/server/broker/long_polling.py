"""Long polling (Java ``PullRequestHoldService``): a pull that found nothing waits here.

A held pull is resumed (processed again, without suspension, and answered) as soon as a message
that its filter accepts is dispatched to its queue, or when its suspend time is up. Java re-checks
held pulls every 5 s; here each one has its own timer, so a pull is answered at its deadline.

The store reports arrivals from whatever thread dispatched the record (the flush thread under
SYNC_FLUSH); they are handed to the reactor, and all the arrivals of one reactor turn are applied
together, so a burst of sends wakes each waiting pull once.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger

from rmqwire.server.store import DispatchBatch, DispatchRequest, MessageFilter

__all__ = ["PullRequest", "PullRequestHoldService"]


@dataclasses.dataclass(eq=False, slots=True)
class PullRequest:
    """One held pull: wakes with ``resume()`` exactly once."""

    topic: str
    queue_id: int
    pull_from_offset: int
    message_filter: MessageFilter | None
    resume: Callable[[], None]
    #: Called instead of ``resume`` when the client's channel closed: nobody reads the answer.
    drop: Callable[[], None] | None = None
    channel: Any = None
    timer: IDelayedCall | None = None
    done: bool = False


#: Held pulls at most (Java bounds its pull thread pool's queue at 100 000): past it a pull that
#: found nothing is answered at once, so a client flooding suspended pulls cannot exhaust memory.
MAX_HELD_PULLS = 100_000


class PullRequestHoldService:
    log = Logger()

    def __init__(self, reactor: Any, max_offset: Callable[[str, int], int], *,
                 max_held: int = MAX_HELD_PULLS) -> None:
        self.reactor = reactor
        self.max_held = max_held
        self._max_offset = max_offset
        self._held: dict[tuple[str, int], list[PullRequest]] = {}
        # (topic, queue id) -> (max offset, tags codes) of arrivals not yet applied
        self._arrivals: dict[tuple[str, int], tuple[int, list[int | None]]] = {}
        self._arrivals_lock = threading.Lock()
        self._flush_scheduled = False
        self._reactor_thread: int | None = None
        self._stopped = False
        #: Held pulls answered because a message arrived / because their time was up.
        self.woken_by_arrival = 0
        self.timed_out = 0

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self._held.values())

    def held_for(self, topic: str, queue_id: int) -> int:
        """How many pulls of one queue are held."""
        return len(self._held.get((topic, queue_id), ()))

    def start(self) -> None:
        self._reactor_thread = threading.get_ident()
        self._stopped = False

    def suspend(self, req: PullRequest, timeout_ms: int) -> None:
        """Hold ``req`` for up to ``timeout_ms``."""
        if self._stopped or self.held_count >= self.max_held:
            req.done = True
            req.resume()
            return
        self._held.setdefault((req.topic, req.queue_id), []).append(req)
        req.timer = self.reactor.callLater(max(0, timeout_ms) / 1000.0, self._timed_out, req)
        # A record dispatched by the flush thread between the empty read and the line above was
        # reported to nobody: look once more now that the pull is registered.
        if self._max_offset(req.topic, req.queue_id) > req.pull_from_offset:
            self.notify_message_arriving(req.topic, req.queue_id, 0)

    def _timed_out(self, req: PullRequest) -> None:
        req.timer = None
        queue = self._held.get((req.topic, req.queue_id))
        if queue is not None:
            try:
                queue.remove(req)
            except ValueError:
                pass
            if not queue:
                del self._held[(req.topic, req.queue_id)]
        if not req.done:
            self.timed_out += 1
        self._wake(req)

    def _wake(self, req: PullRequest) -> None:
        if req.done:
            return
        req.done = True
        if req.timer is not None and req.timer.active():
            req.timer.cancel()
        req.timer = None
        try:
            req.resume()
        except Exception:
            self.log.failure("resuming a held pull of {topic}-{q} failed", topic=req.topic, q=req.queue_id)

    # ---- arrivals --------------------------------------------------------------------------------

    def on_arrival(self, dispatch: DispatchRequest) -> None:
        """The store's arrival listener (any thread)."""
        key = (dispatch.topic, dispatch.queue_id)
        if key not in self._held:  # a plain dict read: racing a suspend only delays that pull
            return
        self._arrived(key, dispatch.consume_queue_offset + 1, [dispatch.tags_code])

    def on_arrival_batch(self, batch: DispatchBatch) -> None:
        """The store's arrival listener for the records of a batch put (any thread)."""
        key = (batch.topic, batch.queue_id)
        if key not in self._held:
            return
        self._arrived(key, batch.max_offset_in_queue, batch.tags_codes)

    def _arrived(self, key: tuple[str, int], max_offset: int, tags_codes: list[int]) -> None:
        with self._arrivals_lock:
            entry = self._arrivals.get(key)
            if entry is None:
                self._arrivals[key] = (max_offset, list(tags_codes))
            else:
                entry[1].extend(tags_codes)
                self._arrivals[key] = (max(entry[0], max_offset), entry[1])
            if self._flush_scheduled:
                return
            self._flush_scheduled = True
        if threading.get_ident() == self._reactor_thread:
            self.reactor.callLater(0, self._apply_arrivals)
        else:
            self.reactor.callFromThread(self._apply_arrivals)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int,
                                tags_codes: list[int | None] | None = None) -> None:
        """Wake the pulls of one queue that now have something to read (reactor thread)."""
        queue = self._held.pop((topic, queue_id), None)
        if not queue:
            return
        keep: list[PullRequest] = []
        for req in queue:
            if req.done:
                continue
            newest = max_offset
            if newest <= req.pull_from_offset:
                newest = self._max_offset(topic, queue_id)
            if newest > req.pull_from_offset and self._matches(req, tags_codes):
                self.woken_by_arrival += 1
                self._wake(req)
            else:
                keep.append(req)
        if keep:
            self._held.setdefault((topic, queue_id), []).extend(keep)

    @staticmethod
    def _matches(req: PullRequest, tags_codes: list[int | None] | None) -> bool:
        f = req.message_filter
        if f is None or tags_codes is None:
            return True
        return any(f.is_matched_by_consume_queue(code) for code in tags_codes)

    def _apply_arrivals(self) -> None:
        with self._arrivals_lock:
            arrivals, self._arrivals = self._arrivals, {}
            self._flush_scheduled = False
        for (topic, queue_id), (max_offset, codes) in arrivals.items():
            self.notify_message_arriving(topic, queue_id, max_offset, codes)

    def channel_closed(self, channel: Any) -> None:
        """Forget the pulls held for a closed channel (their answers would be dropped anyway)."""
        for key, queue in list(self._held.items()):
            gone = [r for r in queue if r.channel is channel]
            if not gone:
                continue
            for req in gone:
                queue.remove(req)
                req.done = True
                if req.timer is not None and req.timer.active():
                    req.timer.cancel()
                req.timer = None
                if req.drop is not None:
                    req.drop()
            if not queue:
                del self._held[key]

    # ---- shutdown --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Answer every held pull now (nothing new will arrive)."""
        self._stopped = True
        held, self._held = self._held, {}
        for queue in held.values():
            for req in queue:
                self._wake(req)
