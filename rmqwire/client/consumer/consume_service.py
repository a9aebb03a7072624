"""How a push consumer runs its listener (Java ``ConsumeMessageConcurrentlyService`` and
``ConsumeMessageOrderlyService``).

Process queues, offsets and retries live in the reactor thread; only the listener call leaves
it, through a runner:

- ``ThreadRunner``: ``threads`` worker threads (Java's consume thread pool; its queue is
  unbounded, so ``consume_thread_min`` threads are what run); finished calls are handed back to
  the reactor in batches (one wakeup for many results);
- ``ReactorRunner``: the listener runs in the reactor thread and may return a Deferred or a
  coroutine (the Twisted API).

Concurrent: each pulled batch is split into requests of ``consume_message_batch_max_size``
messages. After the listener: SUCCESS acks up to ``context.ack_index``; the rest (or all, on
RECONSUME_LATER, an exception or None) go back to the broker with CONSUMER_SEND_MSG_BACK (in
clustering; broadcasting drops them with a warning); a message whose send-back failed is retried
locally 5 s later with reconsume times + 1. The offset then moves to the smallest message still
held. Messages held longer than ``consume_timeout`` minutes are sent back with delay level 3.

Orderly: one consumer loop per queue at a time, taking messages in offset order while the
queue's broker lock is held (clustering); SUCCESS commits, SUSPEND_CURRENT_QUEUE_A_MOMENT (or an
exception or None) puts the messages back and retries them after
``suspend_current_queue_time_millis``, locally, with no DLQ unless ``max_reconsume_times`` is set;
locks are renewed every 20 s and released at shutdown.
"""

from __future__ import annotations

import dataclasses
import inspect
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqwire.client.consumer.listener import (
    CMResult,
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeResult,
    listener_takes_context,
)
from rmqwire.client.consumer.process_queue import REBALANCE_LOCK_INTERVAL, ProcessQueue
from rmqwire.codec.message import MessageExt, PropertyKey, put_property_all
from rmqwire.model import MessageModel, MessageQueue
from rmqwire.remoting.dispatcher import exception_simple_desc

if TYPE_CHECKING:
    from rmqwire.client.consumer.push_consumer import PushConsumer

__all__ = [
    "MAX_TIME_CONSUME_CONTINUOUSLY",
    "ConsumeMessageConcurrentlyService",
    "ConsumeMessageOrderlyService",
    "Outcome",
    "ReactorRunner",
    "ThreadRunner",
]

#: Java ``rocketmq.client.maxTimeConsumeContinuously``: an orderly loop yields after this (ms).
MAX_TIME_CONSUME_CONTINUOUSLY = 60_000
#: Java: a concurrent request whose send-back failed is retried locally after 5 s.
RETRY_LATER_MS = 5_000
_INT_MAX = 2**31 - 1


# ---- runners ---------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Outcome:
    """What a listener call gave: its return value, or the exception it raised; how long it ran."""

    value: Any = None
    error: Failure | None = None
    elapsed_ms: int = 0


Done = Callable[[Outcome], Any]
#: the key of a finished entry holding a list of (key, outcome) pairs
_MANY: Any = object()
#: Takes the (key, outcome) pairs of every call submitted with it that finished meanwhile.
Settle = Callable[[list[tuple[Any, Outcome]]], Any]
#: Takes the (key, args, failed, elapsed_ms) results of ``submit_batches`` entries.
BatchSettle = Callable[[list[tuple[Any, list[Any], "list[tuple[int, Outcome]] | None", int]]], Any]
#: the ``many`` mark of a ``submit_batches`` task
_BATCHES: Any = object()


def _stopped_batches(entries: list[tuple[Any, list[Any]]]) -> list[tuple[Any, list[Any], Any, int]]:
    """``submit_batches`` results for entries the stopped threads will not run: every call failed."""
    return [(key, args, [(j, Outcome(error=Failure(RuntimeError("the consume threads are stopped"))))
                         for j in range(len(args))], 0) for key, args in entries]


class ReactorRunner:
    """Run listeners in the reactor thread (they may return Deferreds or coroutines)."""

    log = Logger()
    #: a listener's plain result is there when ``submit`` returns
    runs_in_reactor = True

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    @property
    def size(self) -> int:
        return 1

    def start(self) -> None:
        pass

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], done: Done) -> Outcome | None:
        """Run ``fn(*args)``. A plain result comes back at once (``done`` is not called); a
        Deferred's or coroutine's later, through ``done``."""
        begin = self.reactor.seconds()
        try:
            value = fn(*args)
        except BaseException:  # the listener's failure is an outcome (Java catches Throwable)
            return Outcome(error=Failure(), elapsed_ms=int((self.reactor.seconds() - begin) * 1000))
        if inspect.iscoroutine(value):
            value = Deferred.fromCoroutine(value)
        if not isinstance(value, Deferred):
            return Outcome(value=value, elapsed_ms=int((self.reactor.seconds() - begin) * 1000))

        def finished(result: Any) -> None:
            elapsed = int((self.reactor.seconds() - begin) * 1000)
            outcome = (Outcome(error=result, elapsed_ms=elapsed) if isinstance(result, Failure)
                       else Outcome(value=result, elapsed_ms=elapsed))
            try:
                done(outcome)
            except Exception:
                self.log.failure("processing a consume result failed")

        value.addBoth(finished)
        return None

    def submit_settled(self, fn: Callable[..., Any], args: tuple[Any, ...], key: Any, settle: Settle) -> None:
        """Run ``fn(*args)``; ``settle([(key, outcome)])`` once it has a result."""
        outcome = self.submit(fn, args, lambda o: settle([(key, o)]))
        if outcome is not None:
            settle([(key, outcome)])

    def submit_many(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]], keys: list[Any],
                    settle: Settle) -> None:
        """``fn(*args)`` for each of ``calls``; ``settle`` gets the plain results together and a
        Deferred's when it fires."""
        now: list[tuple[Any, Outcome]] = []
        for args, key in zip(calls, keys):
            outcome = self.submit(fn, args, lambda o, key=key: settle([(key, o)]))
            if outcome is not None:
                now.append((key, outcome))
        if now:
            settle(now)

    def run(self, fn: Callable[..., Any], *args: Any) -> Deferred[Outcome]:
        d: Deferred[Outcome] = Deferred()
        outcome = self.submit(fn, args, d.callback)
        if outcome is not None:
            d.callback(outcome)
        return d

    def stop(self) -> None:
        pass

    def join(self, timeout: float) -> bool:
        return True


class ThreadRunner:
    """Listeners in ``threads`` worker threads; results go back to the reactor in batches (one
    wakeup of the reactor for every result that finished meanwhile; ``submit_settled`` and
    ``submit_many`` calls are settled together, one call of their ``settle`` per batch).

    ``submit_many`` hands a list of calls over at once while listener calls are short (a
    wakeup of a worker thread costs more than a short listener call): one worker runs them back to
    back. Once most calls take longer (or a call of such a list does), they go out one per task
    again, so that the pool runs them side by side as Java's does. "Most": a call's wall time
    also counts the GIL waits of a busy process, which make a rare short call look slow.
    ``submit_batches`` is the same hand-off with results per batch of calls instead of an
    outcome per call (a concurrent consumer's short calls, most of which succeed)."""

    log = Logger()

    #: a listener call longer than this (s) is "slow": its calls are spread over the workers
    SLOW_CALL = 0.001
    #: calls one task may hold while listeners are slow and every worker is busy
    MAX_CHUNK = 16
    runs_in_reactor = False

    def __init__(self, reactor: Any, threads: int, name: str = "ConsumeMessageThread") -> None:
        if threads < 1:
            raise ValueError("a thread runner needs at least one thread")
        self.reactor = reactor
        self.threads = threads
        self.name = name
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._done: deque[tuple[Settle | None, Any, Any]] = deque()
        self._wake_pending = False
        self._workers: list[threading.Thread] = []
        self._stopped = False
        #: moving share of slow listener calls, written by the workers (a hint: races are harmless)
        self.slow_share = 0.0

    @property
    def size(self) -> int:
        return self.threads

    def start(self) -> None:
        for i in range(self.threads):
            t = threading.Thread(target=self._work, name=f"{self.name}_{i + 1}", daemon=True)
            t.start()
            self._workers.append(t)

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], done: Done) -> None:
        """Queue ``fn(*args)`` for a worker; ``done(outcome)`` runs in the reactor thread."""
        if self._stopped:
            done(Outcome(error=Failure(RuntimeError("the consume threads are stopped"))))
            return None
        self._tasks.put((None, done, fn, args, False))
        return None

    def submit_settled(self, fn: Callable[..., Any], args: tuple[Any, ...], key: Any, settle: Settle) -> None:
        """Queue ``fn(*args)`` for a worker; in the reactor thread ``settle`` gets ``(key,
        outcome)`` with those of every other call given the same ``settle`` that finished
        meanwhile."""
        if self._stopped:
            settle([(key, Outcome(error=Failure(RuntimeError("the consume threads are stopped"))))])
            return
        self._tasks.put((settle, key, fn, args, False))

    def submit_many(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]], keys: list[Any],
                    settle: Settle) -> None:
        """``submit_settled(fn, args, key, settle)`` for each pair of ``calls`` and ``keys``, in as
        few hand-offs as the listener's speed allows (see the class)."""
        if self._stopped:
            error = Outcome(error=Failure(RuntimeError("the consume threads are stopped")))
            settle([(key, error) for key in keys])
            return
        n = len(calls)
        if n == 1:
            self._tasks.put((settle, keys[0], fn, calls[0], False))
            return
        put = self._tasks.put
        if self.slow_share < 0.5:
            put((settle, keys, fn, calls, True))
            return
        # slow listeners: one call per task while a worker may be idle (Java's pool), else chunks
        chunk = 1 if self._tasks.qsize() < self.threads else self.MAX_CHUNK
        if chunk == 1:
            for args, key in zip(calls, keys):
                put((settle, key, fn, args, False))
            return
        for i in range(0, n, chunk):
            put((settle, keys[i : i + chunk], fn, calls[i : i + chunk], True))

    @property
    def runs_short_calls(self) -> bool:
        """Listener calls are mostly short now: ``submit_batches`` fits them."""
        return self.slow_share < 0.5

    def submit_batches(self, fn: Callable[..., Any], entries: list[tuple[Any, list[Any]]], ok: Any,
                       settle: BatchSettle) -> None:
        """``fn(arg)`` for every ``arg`` of each ``(key, args)`` entry, in one hand-off, results
        kept per entry rather than per call: ``settle`` gets ``(key, args, failed, elapsed_ms)``
        per entry (or per part of one a slow call split), ``failed`` the ``(index, outcome)``
        pairs of the calls that did not return ``ok`` (None when all did), ``elapsed_ms`` the sum
        of every call's whole milliseconds. A slow call hands what is left to another worker."""
        if self._stopped:
            settle(_stopped_batches(entries))
            return
        self._tasks.put((settle, entries, fn, ok, _BATCHES))

    def run(self, fn: Callable[..., Any], *args: Any) -> Deferred[Outcome]:
        d: Deferred[Outcome] = Deferred()
        self.submit(fn, args, d.callback)
        return d

    def _run_batches(self, settle: BatchSettle, entries: list[tuple[Any, list[Any]]],
                     fn: Callable[..., Any], ok: Any) -> bool:
        """One ``submit_batches`` task (see there); False when the reactor is gone."""
        monotonic, slow = time.monotonic, self.SLOW_CALL
        results: list[tuple[Any, list[Any], list[tuple[int, Outcome]] | None, int]] = []
        share = self.slow_share
        last = len(entries) - 1
        for e, (key, args) in enumerate(entries):
            failed: list[tuple[int, Outcome]] | None = None
            elapsed = 0
            n = len(args)
            for j in range(n):
                begin = monotonic()
                try:
                    value = fn(args[j])
                    error = None
                except BaseException:  # the listener's failure is an outcome (Java catches Throwable)
                    value, error = None, Failure()
                took = monotonic() - begin
                ms = int(took * 1000)
                elapsed += ms
                share += ((took >= slow) - share) * 0.125
                if error is not None or value is not ok:
                    if failed is None:
                        failed = []
                    failed.append((j, Outcome(value, error, ms)))
                if took >= slow and (j + 1 < n or e < last):
                    # a slow call: the rest goes back for another worker
                    rest = entries[e + 1 :]
                    if j + 1 < n:
                        rest.insert(0, (key, args[j + 1 :]))
                        args = args[: j + 1]
                    self._tasks.put((settle, rest, fn, ok, _BATCHES))
                    results.append((key, args, failed, elapsed))
                    self.slow_share = share
                    self._done.append((settle, _MANY, results))
                    return self._wake()
            results.append((key, args, failed, elapsed))
        self.slow_share = share
        self._done.append((settle, _MANY, results))
        return self._wake()

    def _work(self) -> None:
        tasks, finished, monotonic, slow = self._tasks, self._done, time.monotonic, self.SLOW_CALL
        while True:
            item = tasks.get()
            if item is None:
                return
            settle, key, fn, args, many = item
            if many is _BATCHES:
                if not self._run_batches(settle, key, fn, args):
                    return
                continue
            if not many:
                begin = monotonic()
                try:
                    outcome = Outcome(value=fn(*args))
                except BaseException:  # the listener's failure is an outcome (Java catches Throwable)
                    outcome = Outcome(error=Failure())
                took = monotonic() - begin
                outcome.elapsed_ms = int(took * 1000)
                self.slow_share += ((took >= slow) - self.slow_share) * 0.125
                finished.append((settle, key, outcome))
                if not self._wake():
                    return
                continue
            keys, calls = key, args
            i, n = 0, len(calls)
            # the list's results go back as one entry (settle, _MANY, [(key, outcome), ...])
            outs: list[tuple[Any, Outcome]] = []
            add = outs.append
            share = self.slow_share
            while i < n:
                begin = monotonic()
                try:
                    outcome = Outcome(fn(*calls[i]))
                except BaseException:
                    outcome = Outcome(error=Failure())
                took = monotonic() - begin
                outcome.elapsed_ms = int(took * 1000)
                share += ((took >= slow) - share) * 0.125
                add((keys[i], outcome))
                i += 1
                if took >= slow and i < n:
                    self.slow_share = share
                    # a slow call: the later half of the rest goes back for another worker
                    half = i + (n - i + 1) // 2
                    if half < n:
                        tasks.put((settle, keys[half:], fn, calls[half:], True))
                        n = half
                    finished.append((settle, _MANY, outs))
                    outs = []
                    add = outs.append
                    if not self._wake():
                        return
            self.slow_share = share
            if outs:
                finished.append((settle, _MANY, outs))
            if not self._wake():
                return

    def _wake(self) -> bool:
        """Have the reactor deliver the finished results (once until it has); False when the
        reactor is gone (interpreter exit: nobody waits)."""
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self.reactor.callFromThread(self._deliver)
            except Exception:
                return False
        return True

    def _deliver(self) -> None:
        # reset first: a result appended after this point schedules another delivery
        self._wake_pending = False
        finished = self._done
        batches: dict[Settle, list[tuple[Any, Outcome]]] = {}
        while finished:
            settle, key, outcome = finished.popleft()
            if settle is not None:
                batch = batches.get(settle)
                if batch is None:
                    batch = batches[settle] = []
                if key is _MANY:
                    batch.extend(outcome)
                else:
                    batch.append((key, outcome))
                continue
            try:
                key(outcome)  # a plain submit's done
            except Exception:
                self.log.failure("processing a consume result failed")
        for settle, batch in batches.items():
            try:
                settle(batch)
            except Exception:
                self.log.failure("processing a consume result failed")

    def stop(self) -> None:
        """No new work; each worker ends after its current listener call."""
        if self._stopped:
            return
        self._stopped = True
        while True:  # queued work is dropped (Java's shutdownNow after the await)
            try:
                item = self._tasks.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                settle, key, many = item[0], item[1], item[4]
                outcome = Outcome(error=Failure(RuntimeError("the consume threads are stopped")))
                if many is _BATCHES:
                    settle(_stopped_batches(key))
                elif settle is None:
                    key(outcome)
                else:
                    settle([(k, outcome) for k in key] if many else [(key, outcome)])
        for _ in self._workers:
            self._tasks.put(None)

    def join(self, timeout: float) -> bool:
        """Wait (not in a worker) for the workers to end; False if one is still running."""
        deadline = time.monotonic() + timeout
        me = threading.current_thread()
        for t in self._workers:
            if t is not me:
                t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._workers if t is not me)


def _call_listener(listener: Callable[..., Any], with_context: bool, msgs: Sequence[MessageExt],
                   context: Any) -> Any:
    return listener(msgs, context) if with_context else listener(msgs)


def _result_of(outcome: Outcome) -> ConsumeResult | None:
    if outcome.error is not None:
        return None
    try:
        return ConsumeResult.of(outcome.value)
    except (TypeError, ValueError):
        return None


# ---- concurrent ------------------------------------------------------------------------------


def _meter(consumer: PushConsumer, mq: MessageQueue, ok: bool, elapsed_ms: int, messages: int,
           queued_ms: int = 0) -> None:
    """One listener call into the client metrics, when they are on; ``queued_ms`` (when the
    request was queued for a consume thread) gives the time it waited."""
    metrics, instance = consumer.metrics, consumer.instance
    if metrics is not None and instance is not None:
        waited = consumer.now_ms() - queued_ms - elapsed_ms if queued_ms else None
        metrics.on_consume(mq.topic, consumer.group, instance.client_id, ok, elapsed_ms, messages, waited)


@dataclasses.dataclass(eq=False, slots=True)
class _Batch:
    """What the requests of one submitted batch share."""

    process_queue: ProcessQueue
    message_queue: MessageQueue
    queued_ms: int = 0  # set only when client metrics are on


@dataclasses.dataclass(eq=False, slots=True)
class _ConcurrentRequest:
    msgs: list[MessageExt]
    process_queue: ProcessQueue
    message_queue: MessageQueue
    queued_ms: int = 0  # set only when client metrics are on


class ConsumeMessageConcurrentlyService:
    log = Logger()

    def __init__(self, consumer: PushConsumer, listener: Callable[..., Any], runner: Any) -> None:
        self.consumer = consumer
        self.listener = listener
        self.with_context = listener_takes_context(listener)
        self.runner = runner
        self.group = consumer.group
        self._clean_call: Any = None
        self._later: set[Any] = set()
        self.stopped = False
        #: (calls, keys, batch entries) held between ``gather`` and ``hand_off``
        self._gathered: tuple[list[Any], list[Any], list[Any]] | None = None
        #: the runner takes ``submit_batches`` (consume threads)
        self._batches = hasattr(runner, "submit_batches")

    @property
    def core_pool_size(self) -> int:
        return self.runner.size

    def gather(self) -> None:
        """Hold the requests submitted from now until ``hand_off``, which gives them to the runner
        in one hand-off (the batches of several queues decoded together: one worker woken, not
        one per batch)."""
        if self._gathered is None:
            self._gathered = ([], [], [])

    def hand_off(self) -> None:
        gathered, self._gathered = self._gathered, None
        if gathered is None:
            return
        if gathered[2]:
            self.runner.submit_batches(self.listener, gathered[2], ConsumeResult.SUCCESS, self._settle_batches)
        if gathered[0]:
            self.runner.submit_many(self.listener, gathered[0], gathered[1], self._settle)

    def start(self) -> None:
        self.runner.start()
        minutes = self.consumer.config.consume_timeout
        self._clean_call = self.consumer.reactor.callLater(minutes * 60, self._clean_expired_loop)

    def _clean_expired_loop(self) -> None:
        self._clean_call = None
        if self.stopped:
            return
        self.consumer.clean_expired_messages()
        self._clean_call = self.consumer.reactor.callLater(self.consumer.config.consume_timeout * 60,
                                                           self._clean_expired_loop)

    def shutdown(self) -> Deferred[None]:
        self.stopped = True
        if self._clean_call is not None and self._clean_call.active():
            self._clean_call.cancel()
        for call in list(self._later):
            if call.active():
                call.cancel()
        self._later.clear()
        self.runner.stop()
        return defer.succeed(None)

    def _call_later(self, ms: int, fn: Callable[..., Any], *args: Any) -> None:
        if self.stopped:
            return

        def run() -> None:
            self._later.discard(call)
            if not self.stopped:
                fn(*args)

        call = self.consumer.reactor.callLater(ms / 1000, run)
        self._later.add(call)

    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
                               dispatch_to_consume: bool) -> None:
        """Split ``msgs`` into requests of ``consume_message_batch_max_size`` for the runner (one
        hand-off for all of them while listener calls are short); their results are settled in
        batches (``_settle``)."""
        if self.stopped or pq.dropped:
            return
        consumer = self.consumer
        size = consumer.config.consume_message_batch_max_size
        queued = consumer.now_ms() if consumer.metrics is not None else 0
        consumer.reset_retry_and_namespace(msgs)
        put_property_all(msgs, PropertyKey.CONSUME_START_TIMESTAMP, str(consumer.now_ms()))
        with_context = self.with_context
        # a request is (batch, its messages, its context): the request object and a context the
        # listener does not take are made only when a result needs them (_ran)
        batch = _Batch(pq, mq, queued)
        # each part is the tuple the listener gets (not our list to change) and the request's key
        if size == 1:
            parts: list[tuple[MessageExt, ...]] = [(m,) for m in msgs]
        else:
            parts = [tuple(msgs[i : i + size]) for i in range(0, len(msgs), size)]
        if not with_context and not queued and self._batches and self.runner.runs_short_calls:
            # short calls without a context or metrics: the batch's results come back per batch
            # (the failed calls one by one), not as an outcome and a key per call
            pq.consuming_tasks += len(parts)
            gathered = self._gathered
            if gathered is not None:
                gathered[2].append((batch, parts))
                return
            self.runner.submit_batches(self.listener, [(batch, parts)], ConsumeResult.SUCCESS,
                                       self._settle_batches)
            return
        if with_context:
            contexts = [ConsumeConcurrentlyContext(mq) for _ in parts]
            calls = [(p, c) for p, c in zip(parts, contexts)]
            keys = [(batch, p, c) for p, c in zip(parts, contexts)]
        else:
            calls = [(p,) for p in parts]
            keys = [(batch, p, None) for p in parts]
        pq.consuming_tasks += len(parts)
        gathered = self._gathered
        if gathered is not None:
            gathered[0].extend(calls)
            gathered[1].extend(keys)
            return
        # the listener itself is the call (no wrapper frame per message)
        self.runner.submit_many(self.listener, calls, keys, self._settle)

    def _settle(self, items: list[tuple[Any, Outcome]]) -> None:
        """Results of listener calls: fully acknowledged successes are committed together, one
        offset update per queue (the offset is the smallest message still held either way);
        anything else goes through ``_ran`` one by one."""
        done: dict[int, list[Any]] = {}  # id(pq) -> [pq, mq, msgs, calls, elapsed ms]
        metered = self.consumer.metrics is not None
        success = ConsumeResult.SUCCESS
        for (batch, msgs, context), o in items:
            pq = batch.process_queue
            if (o.error is None and o.value is success and not pq.dropped
                    and (context is None or context.ack_index >= len(msgs) - 1)):
                pq.consuming_tasks -= 1
                if metered:
                    _meter(self.consumer, batch.message_queue, True, o.elapsed_ms, len(msgs), batch.queued_ms)
                entry = done.get(id(pq))
                if entry is None:
                    done[id(pq)] = [pq, batch.message_queue, list(msgs), 1, o.elapsed_ms]
                else:
                    entry[2].extend(msgs)
                    entry[3] += 1
                    entry[4] += o.elapsed_ms
            else:
                self._ran(o, _ConcurrentRequest(list(msgs), pq, batch.message_queue, batch.queued_ms),
                          context if context is not None else ConsumeConcurrentlyContext(batch.message_queue))
        self._commit_done(done)

    def _settle_batches(self, items: list[tuple[_Batch, list[tuple[MessageExt, ...]],
                                                list[tuple[int, Outcome]] | None, int]]) -> None:
        """``submit_batches`` results: what ``_settle`` does with the same calls' outcomes. A
        batch whose calls all succeeded on a live queue is committed with the others of its
        queue; otherwise each call as ``_settle`` would (a success's elapsed time is then the
        batch's mean)."""
        done: dict[int, list[Any]] = {}
        success = ConsumeResult.SUCCESS
        for batch, parts, failed, elapsed in items:
            pq, mq = batch.process_queue, batch.message_queue
            entry = None
            if failed is None and not pq.dropped:
                n = len(parts)
                pq.consuming_tasks -= n
                msgs = [m for part in parts for m in part]
                entry = done.get(id(pq))
                if entry is None:
                    done[id(pq)] = [pq, mq, msgs, n, elapsed]
                else:
                    entry[2].extend(msgs)
                    entry[3] += n
                    entry[4] += elapsed
                continue
            bad = dict(failed) if failed else {}
            ok_elapsed = elapsed - sum(o.elapsed_ms for o in bad.values())
            ok_calls = len(parts) - len(bad)
            mean = ok_elapsed // ok_calls if ok_calls else 0
            for j, part in enumerate(parts):
                o = bad.get(j)
                if o is None and not pq.dropped:
                    pq.consuming_tasks -= 1
                    if entry is None:
                        entry = done.get(id(pq))
                        if entry is None:
                            entry = done[id(pq)] = [pq, mq, [], 0, 0]
                    entry[2].extend(part)
                    entry[3] += 1
                    entry[4] += mean
                    continue
                self._ran(o if o is not None else Outcome(success, None, mean),
                          _ConcurrentRequest(list(part), pq, mq, batch.queued_ms),
                          ConsumeConcurrentlyContext(mq))
        self._commit_done(done)

    def _commit_done(self, done: dict[int, list[Any]]) -> None:
        """Acknowledged messages, per queue: one removal and one offset update."""
        stats, store = self.consumer.stats, self.consumer.offset_store
        for pq, mq, msgs, calls, elapsed in done.values():
            stats.inc_consume_rt_many(self.group, mq.topic, calls, elapsed)
            stats.inc_consume_ok_tps(self.group, mq.topic, len(msgs))
            offset = pq.remove_messages(msgs)
            if offset >= 0 and not pq.dropped:
                store.update_offset(mq, offset, True)

    def _ran(self, outcome: Outcome, req: _ConcurrentRequest, context: ConsumeConcurrentlyContext) -> Any:
        pq = req.process_queue
        pq.consuming_tasks -= 1
        status = _result_of(outcome)
        if outcome.error is not None:
            self.log.warn("consumeMessage exception: {why} Group: {group} Msgs: {n} MQ: {mq}",
                          why=outcome.error.getErrorMessage(), group=self.group, n=len(req.msgs),
                          mq=req.message_queue)
        elif status is None:
            self.log.warn("consumeMessage return null, Group: {group} Msgs: {n} MQ: {mq}",
                          group=self.group, n=len(req.msgs), mq=req.message_queue)
        if status not in (ConsumeResult.SUCCESS, ConsumeResult.RECONSUME_LATER):
            status = ConsumeResult.RECONSUME_LATER
        self.consumer.stats.inc_consume_rt(self.group, req.message_queue.topic, outcome.elapsed_ms)
        _meter(self.consumer, req.message_queue, status is ConsumeResult.SUCCESS, outcome.elapsed_ms, len(req.msgs),
               req.queued_ms)
        if pq.dropped:
            self.log.warn("processQueue is dropped without process consume result. messageQueue={mq}",
                          mq=req.message_queue)
            return None
        return self.process_consume_result(status, context, req)

    def process_consume_result(self, status: ConsumeResult, context: ConsumeConcurrentlyContext,
                               req: _ConcurrentRequest) -> Deferred[None] | None:
        msgs = req.msgs
        if not msgs:
            return None
        topic = req.message_queue.topic
        stats = self.consumer.stats
        if status is ConsumeResult.SUCCESS:
            ack = min(context.ack_index, len(msgs) - 1)
            stats.inc_consume_ok_tps(self.group, topic, ack + 1)
            if ack + 1 < len(msgs):
                stats.inc_consume_failed_tps(self.group, topic, len(msgs) - ack - 1)
        else:
            ack = -1
            stats.inc_consume_failed_tps(self.group, topic, len(msgs))
        failed = msgs[ack + 1 :]
        if not failed:
            self._commit(req)
            return None
        if self.consumer.message_model is MessageModel.BROADCASTING:
            for m in failed:
                self.log.warn("BROADCASTING, the message consume failed, drop it, {msg}", msg=m.msg_id)
            self._commit(req)
            return None
        pq = req.process_queue
        backs = []
        for m in failed:
            if not pq.contains(m):  # expired and cleaned meanwhile
                continue
            backs.append(self.consumer.send_message_back(m, context.delay_level_when_next_consume,
                                                         req.message_queue)
                         .addCallback(lambda ok, m=m: None if ok else m))

        def after(results: list[MessageExt | None]) -> None:
            back_failed = [m for m in results if m is not None]
            if back_failed:
                for m in back_failed:
                    m.reconsume_times += 1
                ids = {id(m) for m in back_failed}
                req.msgs = [m for m in msgs if id(m) not in ids]
                self._call_later(RETRY_LATER_MS, self.submit_consume_request, back_failed,
                                 req.process_queue, req.message_queue, True)
            self._commit(req)

        return defer.gatherResults(backs, consumeErrors=True).addCallback(after)

    def _commit(self, req: _ConcurrentRequest) -> None:
        pq = req.process_queue
        offset = pq.remove_messages(req.msgs)
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(req.message_queue, offset, True)

    def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> Deferred[dict[str, Any]]:
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        msg.broker_name = broker_name
        context = ConsumeConcurrentlyContext(mq)
        self.consumer.reset_retry_and_namespace([msg])

        def done(outcome: Outcome) -> dict[str, Any]:
            result = {"order": False, "autoCommit": True, "spentTimeMills": outcome.elapsed_ms}
            if outcome.error is not None:
                result["consumeResult"] = CMResult.CR_THROW_EXCEPTION
                result["remark"] = _simple_desc(outcome.error)
                return result
            status = _result_of(outcome)
            result["consumeResult"] = {
                ConsumeResult.SUCCESS: CMResult.CR_SUCCESS,
                ConsumeResult.RECONSUME_LATER: CMResult.CR_LATER,
                None: CMResult.CR_RETURN_NULL,
            }.get(status, CMResult.CR_RETURN_NULL)
            return result

        return self.runner.run(_call_listener, self.listener, self.with_context, (msg,), context).addCallback(done)


def _simple_desc(failure: Failure) -> str:
    return exception_simple_desc(failure)


# ---- orderly ---------------------------------------------------------------------------------


class ConsumeMessageOrderlyService:
    log = Logger()

    def __init__(self, consumer: PushConsumer, listener: Callable[..., Any], runner: Any) -> None:
        self.consumer = consumer
        self.listener = listener
        self.with_context = listener_takes_context(listener)
        self.runner = runner
        self.group = consumer.group
        self.stopped = False
        self._active: set[MessageQueue] = set()
        self._again: set[MessageQueue] = set()
        self._later: set[Any] = set()
        self._lock_call: Any = None

    @property
    def core_pool_size(self) -> int:
        return self.runner.size

    @property
    def clustering(self) -> bool:
        return self.consumer.message_model is MessageModel.CLUSTERING

    def start(self) -> None:
        self.runner.start()
        if self.clustering:
            self._lock_call = self.consumer.reactor.callLater(1.0, self._lock_loop)

    def _lock_loop(self) -> None:
        self._lock_call = None
        if self.stopped:
            return
        d = self.consumer.rebalance.lock_all()

        def again(_: Any) -> None:
            if not self.stopped:
                self._lock_call = self.consumer.reactor.callLater(REBALANCE_LOCK_INTERVAL / 1000,
                                                                  self._lock_loop)

        d.addBoth(again)

    def shutdown(self) -> Deferred[None]:
        self.stopped = True
        if self._lock_call is not None and self._lock_call.active():
            self._lock_call.cancel()
        for call in list(self._later):
            if call.active():
                call.cancel()
        self._later.clear()
        self.runner.stop()
        if self.clustering:
            return self.consumer.rebalance.unlock_all(False)
        return defer.succeed(None)

    def _call_later(self, ms: int, fn: Callable[..., Any], *args: Any) -> None:
        if self.stopped:
            return

        def run() -> None:
            self._later.discard(call)
            if not self.stopped:
                fn(*args)

        call = self.consumer.reactor.callLater(ms / 1000, run)
        self._later.add(call)

    def submit_consume_request(self, msgs: list[MessageExt] | None, pq: ProcessQueue, mq: MessageQueue,
                               dispatch_to_consume: bool) -> None:
        if dispatch_to_consume:
            self._consume(pq, mq)

    def _submit_later(self, pq: ProcessQueue, mq: MessageQueue, suspend_ms: int) -> None:
        ms = self.consumer.config.suspend_current_queue_time_millis if suspend_ms == -1 else suspend_ms
        ms = min(max(ms, 10), 30_000)
        self._call_later(ms, self.submit_consume_request, None, pq, mq, True)

    def _try_lock_later_and_reconsume(self, mq: MessageQueue, pq: ProcessQueue, delay_ms: int) -> None:
        def lock() -> None:
            if self.stopped:
                return
            self.consumer.rebalance.lock(mq).addCallback(
                lambda ok: self._submit_later(pq, mq, 10 if ok else 3000))

        self._call_later(delay_ms, lock)

    def _consume(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """One consume loop per queue: a request while one runs makes it loop once more."""
        if pq.dropped or self.stopped:
            return
        if mq in self._active:
            self._again.add(mq)
            return
        if not (not self.clustering or (pq.locked and not pq.is_lock_expired())):
            self._try_lock_later_and_reconsume(mq, pq, 100)
            return
        self._active.add(mq)
        self._loop(pq, mq, self.consumer.now_ms())

    def _end(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        self._active.discard(mq)
        if mq in self._again:
            self._again.discard(mq)
            if pq.has_temp_message():
                self._consume(pq, mq)

    def _loop(self, pq: ProcessQueue, mq: MessageQueue, begin: int) -> None:
        while True:
            if pq.dropped or self.stopped:
                self.log.warn("the message queue not be able to consume, because it's dropped. {mq}", mq=mq)
                return self._end(mq, pq)
            if self.clustering and not pq.locked:
                self.log.warn("the message queue not locked, so consume later, {mq}", mq=mq)
                self._try_lock_later_and_reconsume(mq, pq, 10)
                return self._end(mq, pq)
            if self.clustering and pq.is_lock_expired():
                self.log.warn("the message queue lock expired, so consume later, {mq}", mq=mq)
                self._try_lock_later_and_reconsume(mq, pq, 10)
                return self._end(mq, pq)
            if self.consumer.now_ms() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                self._submit_later(pq, mq, 10)
                return self._end(mq, pq)
            msgs = pq.take_messages(self.consumer.config.consume_message_batch_max_size)
            self.consumer.reset_retry_and_namespace(msgs)
            if not msgs:
                return self._end(mq, pq)
            context = ConsumeOrderlyContext(mq)
            pq.consuming_tasks += 1

            def later(outcome: Outcome, msgs: list[MessageExt] = msgs,
                      context: ConsumeOrderlyContext = context) -> None:
                step = self._after(outcome, msgs, context, pq, mq)
                if isinstance(step, Deferred):
                    step.addCallback(self._continue, pq, mq, begin)
                else:
                    self._continue(step, pq, mq, begin)

            outcome = self.runner.submit(_call_listener, (self.listener, self.with_context, tuple(msgs), context),
                                         later)
            if outcome is None:
                return None  # the listener runs elsewhere: ``later`` goes on
            # a synchronous (reactor) listener: keep looping here, without recursion
            step = self._after(outcome, msgs, context, pq, mq)
            if isinstance(step, Deferred):
                step.addCallback(self._continue, pq, mq, begin)
                return None
            if not step:
                return self._end(mq, pq)

    def _continue(self, go_on: bool, pq: ProcessQueue, mq: MessageQueue, begin: int) -> None:
        if go_on:
            self._loop(pq, mq, begin)
        else:
            self._end(mq, pq)

    def _after(self, outcome: Outcome, msgs: list[MessageExt], context: ConsumeOrderlyContext,
               pq: ProcessQueue, mq: MessageQueue) -> bool | Deferred[bool]:
        pq.consuming_tasks -= 1
        status = _result_of(outcome)
        if outcome.error is not None:
            self.log.warn("consumeMessage exception: {why} Group: {group} Msgs: {n} MQ: {mq}",
                          why=outcome.error.getErrorMessage(), group=self.group, n=len(msgs), mq=mq)
        if status in (None, ConsumeResult.ROLLBACK, ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT,
                      ConsumeResult.RECONSUME_LATER):
            self.log.warn("consumeMessage Orderly return not OK, Group: {group} Msgs: {n} MQ: {mq}",
                          group=self.group, n=len(msgs), mq=mq)
        if status is None or status is ConsumeResult.RECONSUME_LATER:
            status = ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        self.consumer.stats.inc_consume_rt(self.group, mq.topic, outcome.elapsed_ms)
        _meter(self.consumer, mq, status in (ConsumeResult.SUCCESS, ConsumeResult.COMMIT), outcome.elapsed_ms,
               len(msgs))
        if pq.dropped:
            return False
        return self.process_consume_result(msgs, status, context, pq, mq)

    def process_consume_result(self, msgs: list[MessageExt], status: ConsumeResult,
                               context: ConsumeOrderlyContext, pq: ProcessQueue,
                               mq: MessageQueue) -> bool | Deferred[bool]:
        stats, topic = self.consumer.stats, mq.topic

        def finish(commit_offset: int, go_on: bool) -> bool:
            if commit_offset >= 0 and not pq.dropped:
                self.consumer.offset_store.update_offset(mq, commit_offset, False)
            return go_on

        def suspend_or(fallback_commit: bool) -> Deferred[bool]:
            def checked(suspend: bool) -> bool:
                if suspend:
                    pq.make_messages_to_consume_again(msgs)
                    self._submit_later(pq, mq, context.suspend_current_queue_time_millis)
                    return finish(-1, False)
                return finish(pq.commit() if fallback_commit else -1, True)

            return self._check_reconsume_times(msgs).addCallback(checked)

        if context.auto_commit:
            if status is ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                stats.inc_consume_failed_tps(self.group, topic, len(msgs))
                return suspend_or(True)
            if status in (ConsumeResult.COMMIT, ConsumeResult.ROLLBACK):
                self.log.warn("the message queue consume result is illegal, we think you want to ack "
                              "these message {mq}", mq=mq)
            stats.inc_consume_ok_tps(self.group, topic, len(msgs))
            return finish(pq.commit(), True)
        if status is ConsumeResult.SUCCESS:
            stats.inc_consume_ok_tps(self.group, topic, len(msgs))
            return finish(-1, True)
        if status is ConsumeResult.COMMIT:
            return finish(pq.commit(), True)
        if status is ConsumeResult.ROLLBACK:
            pq.rollback()
            self._submit_later(pq, mq, context.suspend_current_queue_time_millis)
            return finish(-1, False)
        stats.inc_consume_failed_tps(self.group, topic, len(msgs))
        return suspend_or(False)

    def max_reconsume_times(self) -> int:
        configured = self.consumer.config.max_reconsume_times
        return _INT_MAX if configured == -1 else configured

    def _check_reconsume_times(self, msgs: list[MessageExt]) -> Deferred[bool]:
        """True when the batch must be retried here; messages over the limit go to the retry
        topic (and so to the DLQ) instead."""
        limit = self.max_reconsume_times()
        suspend = False
        sends = []
        for m in msgs:
            if m.reconsume_times >= limit:
                m.properties[PropertyKey.RECONSUME_TIME] = str(m.reconsume_times)

                def sent(ok: bool, m: MessageExt = m) -> None:
                    nonlocal suspend
                    if not ok:
                        suspend = True
                        m.reconsume_times += 1

                sends.append(self.consumer.send_message_back_as_normal(m, limit).addCallback(sent))
            else:
                suspend = True
                m.reconsume_times += 1
        return defer.gatherResults(sends, consumeErrors=True).addCallback(lambda _: suspend)

    def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> Deferred[dict[str, Any]]:
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        context = ConsumeOrderlyContext(mq)
        self.consumer.reset_retry_and_namespace([msg])

        def done(outcome: Outcome) -> dict[str, Any]:
            result: dict[str, Any] = {"order": True, "autoCommit": context.auto_commit,
                                      "spentTimeMills": outcome.elapsed_ms}
            if outcome.error is not None:
                result["consumeResult"] = CMResult.CR_THROW_EXCEPTION
                result["remark"] = _simple_desc(outcome.error)
                return result
            result["consumeResult"] = {
                ConsumeResult.COMMIT: CMResult.CR_COMMIT,
                ConsumeResult.ROLLBACK: CMResult.CR_ROLLBACK,
                ConsumeResult.SUCCESS: CMResult.CR_SUCCESS,
                ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT: CMResult.CR_LATER,
            }.get(_result_of(outcome), CMResult.CR_RETURN_NULL)  # type: ignore[arg-type]
            return result

        return self.runner.run(_call_listener, self.listener, self.with_context, (msg,), context).addCallback(done)


