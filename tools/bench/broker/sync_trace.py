"""SYNC_FLUSH timeline of an rmqwire broker: where a send waits between its append and its answer.

Run as the broker's interpreter wrapper (``python -m tools.bench.broker --trace OUT --only sync``
puts it in front of ``-m rmqwire broker ...``): it patches the classes, then runs the broker, so it
also runs against older trees (A/B). Stamps (``perf_counter_ns``) per send: the send processor
entered (request decoded) and the append done (group-commit request queued); per group-commit
round: the flush thread's wake, fdatasync start and end (the end is taken once the thread holds
the GIL again), the completions told to the reactor, the dispatch done; per round on the reactor:
the release of its answers (frames written to the channels). At exit, OUT gets the summary.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

now = time.perf_counter_ns



def _row(name: str, values: list[int]) -> str:
    """One summary line: count, p50, p90 and mean of nanosecond durations, in µs."""
    if not values:
        return f"{name:44s} -"
    v = sorted(values)
    q = lambda p: v[int(p * (len(v) - 1))] / 1e3  # noqa: E731
    return (f"{name:44s} n={len(v):6d} p50={q(.5):8.1f} p90={q(.9):8.1f} "
            f"mean={sum(v) / len(v) / 1e3:8.1f} us")

class Timeline:
    def __init__(self) -> None:
        self.appended: dict[int, tuple[int, int]] = {}  # id(request) -> (entered, appended)
        self.sends: list[tuple[int, int, int]] = []  # (entered, appended, round)
        # (wake, requests told, fsync start, fsync end, told, dispatched)
        self.rounds: list[list[int]] = []
        self.releases: dict[int, tuple[int, int]] = {}  # round -> (release start, end)
        self.entered = 0

    def install(self) -> None:
        from rmqwire.server.broker.processors import send
        from rmqwire.server.store.flush import GroupCommitService

        tl = self
        init = GroupCommitService.__init__

        def _init(service: Any, flush: Any, on_flushed: Any, **kwargs: Any) -> None:
            def timed_flush() -> int:
                start = now()
                flushed = flush()
                if tl.rounds and tl.rounds[-1][2] == 0:
                    tl.rounds[-1][2:4] = [start, now()]
                return flushed

            def timed_on_flushed(offset: int) -> None:
                on_flushed(offset)
                if tl.rounds:
                    tl.rounds[-1][5] = now()

            listener = kwargs.pop("listener", lambda: None)

            def timed_listener() -> Any:
                inner = listener()
                if inner is None:
                    return None

                def told(done: list[Any]) -> None:
                    r = len(tl.rounds) - 1
                    for req, _status in done:
                        stamps = tl.appended.pop(id(req), None)
                        if stamps is not None:
                            tl.sends.append((*stamps, r))
                    if r >= 0:
                        tl.rounds[r][1] = len(done)
                        tl.rounds[r][4] = now()
                    inner([(req, status, r) for req, status in done])
                return told

            init(service, timed_flush, timed_on_flushed, listener=timed_listener, **kwargs)

        do_commit = GroupCommitService.do_commit

        def _do_commit(service: Any) -> None:
            tl.rounds.append([now(), 0, 0, 0, 0, 0])
            do_commit(service)

        release = send._release_flushed

        def _release(done: list[Any]) -> None:
            if not done or len(done[0]) == 2:  # the flush watcher's timeouts, not a round's
                release(done)
                return
            start = now()
            release([(req, status) for req, status, _r in done])
            tl.releases[done[0][2]] = (start, now())

        _stamp_appends(tl)
        GroupCommitService.__init__ = _init
        GroupCommitService.do_commit = _do_commit
        send._release_flushed = _release

    def summary(self) -> str:
        rounds, releases = self.rounds, self.releases
        lo, hi = len(rounds) // 5, len(rounds) - len(rounds) // 10  # past the warm-up, before the end
        lines = [f"rounds {len(rounds)}, sends {len(self.sends)} (middle rounds {lo}..{hi})"]

        def row(name: str, values: list[int]) -> None:
            lines.append(_row(name, values))

        mid = [r for r in rounds[lo:hi] if r[3] and r[5]]
        if mid:
            lines.append(f"sends per round (told)                       {sum(r[1] for r in mid) / len(mid):.2f}")
        row("round: wake -> fdatasync start", [r[2] - r[0] for r in mid])
        row("round: fdatasync (+ the GIL back)", [r[3] - r[2] for r in mid])
        row("round: fdatasync end -> told", [r[4] - r[3] for r in mid if r[4]])
        row("round: told -> dispatched", [r[5] - r[4] for r in mid if r[4]])
        row("round: dispatched -> next wake",
            [rounds[i + 1][0] - rounds[i][5] for i in range(lo, hi - 1) if rounds[i][5]])
        rel = [(i, releases[i]) for i in range(lo, hi) if i in releases and rounds[i][4]]
        row("reactor: told -> release start", [s - rounds[i][4] for i, (s, _e) in rel])
        row("reactor: release (frames written)", [e - s for _i, (s, e) in rel])
        sends = [s for s in self.sends if lo <= s[2] < hi]
        row("send: entered -> appended", [a - e for e, a, _r in sends])
        row("send: appended -> its round's fdatasync", [rounds[r][2] - a for _e, a, r in sends if rounds[r][2]])
        row("send: entered -> released", [releases[r][1] - e for e, _a, r in sends if r in releases])
        # A round that starts idle: its first send came after the previous round's dispatch, so
        # the flush thread had to be woken (and to get the GIL) for it.
        first: dict[int, int] = {}
        for _e, a, r in sends:
            first[r] = min(first.get(r, a), a)
        woken = [rounds[r][0] - a for r, a in first.items() if r > 0 and a >= rounds[r - 1][5]]
        lines.append(f"rounds whose flush thread was idle            {len(woken)} of {len(first)}")
        row("idle round: first append -> wake", woken)
        return "\n".join(lines) + "\n"


class HelperTimeline:
    """The same for a store whose SYNC_FLUSH goes through the flush helper process
    (``flush_helper``): the helper's rounds come from ``flush_child_trace.py``."""

    def __init__(self, child_out: Path) -> None:
        self.child_out = child_out
        self.appended: dict[int, tuple[int, int]] = {}
        self.sends: list[tuple[int, int, int]] = []  # (entered, appended, released)
        self.targets: list[tuple[int, int]] = []  # (sent, offset)
        self.reads: list[tuple[int, int, int, int]] = []  # (read, told start, told end, n)
        self.dispatched: list[int] = []  # release end -> dispatch end (consume queues, index)
        self.read_at = 0
        self.entered = 0

    def install(self) -> bool:
        try:
            from rmqwire.server.store import flush_helper
        except ImportError:
            return False

        tl = self
        flush_helper._CHILD = str(Path(__file__).with_name("flush_child_trace.py"))
        os.environ["RMQWIRE_FLUSH_CHILD_TRACE"] = str(self.child_out)
        service = flush_helper.HelperGroupCommitService
        send_target = service._send

        def _send(svc: Any, offset: int) -> None:
            tl.targets.append((now(), offset))
            send_target(svc, offset)

        on_readable = service._on_readable

        def _on_readable(svc: Any, helper: Any) -> None:
            tl.read_at = now()
            on_readable(svc, helper)

        tell = service._tell

        def _tell(svc: Any, done: list[Any], in_reactor: bool) -> None:
            start = now()
            tell(svc, done, in_reactor)
            end = now()
            tl.reads.append((tl.read_at, start, end, len(done)))
            for req, _status in done:
                stamps = tl.appended.pop(id(req), None)
                if stamps is not None:
                    tl.sends.append((*stamps, end))

        complete = service._complete

        def _complete(svc: Any, flushed: int, *, in_reactor: bool) -> None:
            n = len(tl.reads)
            complete(svc, flushed, in_reactor=in_reactor)
            if len(tl.reads) > n:  # this answer released writers: the dispatch came after
                tl.dispatched.append(now() - tl.reads[-1][2])

        _stamp_appends(tl)
        service._complete = _complete
        service._send = _send
        service._on_readable = _on_readable
        service._tell = _tell
        return True

    def summary(self) -> str:
        import json

        try:
            rounds = [json.loads(line) for line in self.child_out.read_text().splitlines()]
        except OSError:
            rounds = []
        lo, hi = len(rounds) // 5, len(rounds) - len(rounds) // 10
        mid = [r for r in rounds[lo:hi] if r[1] and r[3]]
        lines = [f"flush helper: rounds {len(rounds)}, sends {len(self.sends)}, reactor reads {len(self.reads)}"]

        def row(name: str, values: list[int]) -> None:
            lines.append(_row(name, values))

        if mid and self.reads:
            t0, t1 = mid[0][0], mid[-1][3]
            told = sum(n for r, _s, _e, n in self.reads if t0 <= r <= t1)
            lines.append(f"sends per helper round (told)               {told / len(mid):.2f}")
        row("helper: woken -> fdatasync start", [r[1] - r[0] for r in mid])
        row("helper: fdatasync", [r[2] - r[1] for r in mid])
        row("helper: fdatasync end -> answer sent", [r[3] - r[2] for r in mid])
        reads = sorted(r[0] for r in self.reads)
        import bisect
        lag = []
        for r in mid:
            i = bisect.bisect_left(reads, r[3])
            if i < len(reads):
                lag.append(reads[i] - r[3])
        row("answer sent -> reactor reads it", lag)
        row("reactor: read -> release start", [s - r for r, s, _e, _n in self.reads])
        row("reactor: release (frames written)", [e - s for _r, s, e, _n in self.reads])
        row("reactor: released -> dispatched", self.dispatched)
        sent = sorted(t for t, _o in self.targets)
        woken = []
        for prev, r in zip(rounds[lo:hi], rounds[lo + 1:hi]):
            i = bisect.bisect_right(sent, prev[3])  # first target sent after the previous answer
            if i < len(sent) and sent[i] <= r[0]:
                woken.append(r[0] - sent[i])
        lines.append(f"rounds whose helper was idle (target after the last answer) {len(woken)} of {len(mid)}")
        row("idle round: target sent -> helper woken", woken)
        if mid:
            t0, t1 = mid[0][0], mid[-1][3]
            sends = [x for x in self.sends if t0 <= x[1] <= t1]
            row("send: entered -> appended", [a - e for e, a, _r in sends])
            row("send: entered -> released", [r - e for e, _a, r in sends])
        return "\n".join(lines) + "\n"


def _stamp_appends(tl: Timeline | HelperTimeline) -> None:
    """Stamp each send when its processor is entered and when its append is queued for a flush."""
    from rmqwire.server.broker.processors import send
    from rmqwire.server.store import message_store
    from rmqwire.server.store.flush import GroupCommitRequest

    process = send.SendMessageProcessor._process

    def _process(proc: Any, *args: Any, **kwargs: Any) -> Any:
        tl.entered = now()
        return process(proc, *args, **kwargs)

    put_listened = message_store.DefaultMessageStore.put_listened

    def _put_listened(store: Any, *args: Any, **kwargs: Any) -> Any:
        r = put_listened(store, *args, **kwargs)
        if type(r) is GroupCommitRequest:
            tl.appended[id(r)] = (tl.entered, now())
        return r

    send.SendMessageProcessor._process = _process
    message_store.DefaultMessageStore.put_listened = _put_listened


def main() -> None:
    out = Path(sys.argv[1])
    rest = sys.argv[2:]
    if len(rest) < 2 or rest[0] != "-m":
        raise SystemExit("usage: python -m tools.bench.broker.sync_trace OUT -m MODULE [ARGS...]")
    child_out = out.with_name(out.name + ".child")
    child_out.unlink(missing_ok=True)
    helper = HelperTimeline(child_out)
    timeline = Timeline()
    timeline.install()
    if helper.install():
        atexit.register(lambda: out.write_text(timeline.summary() + helper.summary()))
    else:
        atexit.register(lambda: out.write_text(timeline.summary()))
    sys.argv = [rest[1], *rest[2:]]
    runpy.run_module(rest[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
