"""Run a peer CLI as a subprocess and turn its JSON-line stdout into records, with deadlines.

All three peers (Java client, ali-ons, the C++ client) share one command line:

    produce --namesrv A --topic T --count N [--mode M] [--tag X] [--keys K] [--prop k=v ...]
            [--body TEXT | --body-size B] [--compress] [--group G]
    consume --namesrv A --topic T --count N [--mode M] [--model cluster|broadcast] [--orderly]
            [--group G] [--from first|last] [--timeout-ms M] [--sub EXPR]

so ``CliPeer`` builds the arguments once and subclasses only say how to launch their runtime.
Exit codes: 0 ok, 2 usage/client error, 3 consume timeout (records received so far are kept).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from tools.peers.records import (
    PeerEvent,
    PeerOutputError,
    ReceivedRecord,
    SentRecord,
    parse_line,
)

R = TypeVar("R", SentRecord, ReceivedRecord)

EXIT_OK = 0
EXIT_TIMEOUT = 3
# A process that outlives its own deadline by this much is killed: JVM start plus shutdown slack.
STARTUP_SLACK_S = 45.0


class PeerError(RuntimeError):
    """A peer process failed (bad arguments, client exception, crash)."""

    def __init__(self, message: str, returncode: int | None = None, stderr: str = "",
                 client_log: str = "") -> None:
        tail = stderr.strip()[-3000:]
        super().__init__(f"{message}" + (f"\n--- peer stderr (tail) ---\n{tail}" if tail else "")
                         + (f"\n--- client log warnings (tail) ---\n{client_log}" if client_log else ""))
        self.returncode = returncode
        self.stderr = stderr


class PeerTimeoutError(PeerError):
    """The peer did not see the expected messages in time; ``records`` holds what did arrive."""

    def __init__(self, message: str, records: Sequence[Any], returncode: int | None = None,
                 stderr: str = "", client_log: str = "") -> None:
        super().__init__(message, returncode, stderr, client_log)
        self.records = list(records)


class PeerProcess(Generic[R]):
    """One running peer command; a reader thread collects records and events as they are printed."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str,
                 record_type: Callable[[dict[str, Any]], R], deadline_s: float) -> None:
        self.argv = list(argv)
        self._record_type = record_type
        self._cond = threading.Condition()
        self._records: list[R] = []
        self._events: list[PeerEvent] = []
        self._bad_output: PeerOutputError | None = None
        self._stderr_file = tempfile.TemporaryFile(mode="w+b")
        self._cwd = cwd
        self.started_at = time.monotonic()
        self.deadline = self.started_at + deadline_s
        self._proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr_file,
            env=dict(env), cwd=cwd,
        )
        self._reader = threading.Thread(target=self._read, name=f"peer-reader-{self._proc.pid}",
                                        daemon=True)
        self._reader.start()
        # Never leave a peer running when a test forgets to stop it.
        self._finalizer = weakref.finalize(self, _kill, self._proc)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            try:
                obj = parse_line(raw.decode("utf-8", errors="replace"))
                if obj is None:
                    continue
                if "event" in obj:
                    item: Any = PeerEvent(str(obj.pop("event")), obj)
                else:
                    item = self._record_type(obj)
            except PeerOutputError as e:
                with self._cond:
                    self._bad_output = self._bad_output or e
                    self._cond.notify_all()
                continue
            with self._cond:
                (self._events if isinstance(item, PeerEvent) else self._records).append(item)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    # -- inspection

    @property
    def records(self) -> list[R]:
        with self._cond:
            return list(self._records)

    @property
    def events(self) -> list[PeerEvent]:
        with self._cond:
            return list(self._events)

    def event(self, name: str) -> PeerEvent | None:
        return next((e for e in self.events if e.name == name), None)

    def running(self) -> bool:
        return self._proc.poll() is None

    def stderr_text(self) -> str:
        self._stderr_file.seek(0)
        return self._stderr_file.read().decode("utf-8", errors="replace")

    def client_log(self) -> str:
        """The warnings of the client's own log files: why a route or send failed is often only
        there, and the peer's HOME is removed after the test."""
        return client_log_warnings(os.path.join(self._cwd, "logs"))

    # -- waiting

    def _wait_until(self, pred: Callable[[], bool], timeout: float) -> bool:
        end = min(time.monotonic() + timeout, self.deadline)
        with self._cond:
            while not pred():
                if self._bad_output is not None:
                    raise PeerError(str(self._bad_output), None, self.stderr_text(), self.client_log())
                left = end - time.monotonic()
                if left <= 0 or (not self._reader.is_alive() and self._proc.poll() is not None):
                    return pred()
                self._cond.wait(min(left, 0.5))
        return True

    def wait_started(self, timeout: float = 60.0) -> PeerEvent:
        """Block until the peer reports its client started (for consumers: subscribed)."""
        if not self._wait_until(lambda: any(e.name == "started" for e in self._events), timeout):
            rc = self._proc.poll()
            raise PeerError(f"peer did not start within {timeout:.0f} s (exit code {rc}): {self.argv}",
                            rc, self.stderr_text(), self.client_log())
        started = self.event("started")
        assert started is not None
        return started

    def wait_for(self, n: int, timeout: float = 60.0) -> list[R]:
        """Block until at least ``n`` records arrived; raise PeerTimeoutError with the partial list."""
        if not self._wait_until(lambda: len(self._records) >= n, timeout):
            recs = self.records
            raise PeerTimeoutError(f"peer produced {len(recs)} of {n} records within {timeout:.0f} s",
                                   recs, self._proc.poll(), self.stderr_text(), self.client_log())
        return self.records

    def finish(self, timeout: float | None = None) -> list[R]:
        """Wait for the process to exit and return its records; nonzero exit raises."""
        left = (self.deadline - time.monotonic()) if timeout is None else timeout
        try:
            rc = self._proc.wait(timeout=max(0.1, left))
        except subprocess.TimeoutExpired:
            self.stop()
            recs = self.records
            raise PeerTimeoutError(f"peer process overran its deadline and was killed: {self.argv}",
                                   recs, None, self.stderr_text(), self.client_log()) from None
        self._reader.join(timeout=10)
        if self._bad_output is not None:
            raise PeerError(str(self._bad_output), rc, self.stderr_text(), self.client_log())
        recs = self.records
        if rc == EXIT_TIMEOUT:
            raise PeerTimeoutError(f"peer timed out with {len(recs)} records: {self.argv}", recs, rc,
                                   self.stderr_text(), self.client_log())
        if rc != EXIT_OK:
            errs = [e.data.get("message") for e in self.events if e.name in ("error", "send-failed")]
            raise PeerError(f"peer exited with code {rc} {errs or ''}: {self.argv}", rc,
                            self.stderr_text(), self.client_log())
        return recs

    def stop(self, grace: float = 10.0) -> int | None:
        """Ask the peer to exit (SIGTERM), then kill it after ``grace`` seconds."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._reader.join(timeout=10)
        return self._proc.returncode

    def __enter__(self) -> PeerProcess[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# logback's WARN/ERROR, boost.log's (warning)/(error) in the C++ client's log.
_WARNING = re.compile(r"\((warning|error|fatal)\)|\b(WARN|ERROR)\b")


def client_log_warnings(log_dir: str, lines: int = 30) -> str:
    """The last WARN/ERROR lines of every file under ``log_dir`` (the Java client's rocketmqlogs, the
    C++ client's rocketmq-cpp)."""
    found: list[str] = []
    for root, _dirs, files in os.walk(log_dir):
        for name in sorted(files):
            try:
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    found.extend(f"{name}: {line.rstrip()}" for line in f if _WARNING.search(line))
            except OSError:
                continue
    return "\n".join(found[-lines:])


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()


ConsumerHandle = PeerProcess[ReceivedRecord]


class CliPeer(ABC):
    """Base for the three peers: builds the shared command line and runs it."""

    #: short name used in group names and messages ("java", "node", "cpp")
    name: str = "peer"

    def __init__(self, namesrv_addr: str) -> None:
        self.namesrv_addr = namesrv_addr
        # Each peer gets its own HOME / user.home: client logs and local offsets land there.
        self.home = tempfile.mkdtemp(prefix=f"rmqwire-{self.name}-peer-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.home, True)

    def close(self) -> None:
        self._cleanup()

    def __enter__(self) -> CliPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def command(self, args: Sequence[str]) -> list[str]:
        """The full argv that runs the peer CLI with ``args``."""

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HOME"] = self.home
        return env

    def spawn(self, args: Sequence[str], record_type: Callable[[dict[str, Any]], R],
              deadline_s: float) -> PeerProcess[R]:
        return PeerProcess(self.command(args), env=self.environment(), cwd=self.home,
                           record_type=record_type, deadline_s=deadline_s)

    # -- produce

    def produce_args(self, topic: str, count: int, *, mode: str = "sync", tag: str | None = None,
                     keys: str | None = None, props: Mapping[str, str] | None = None,
                     body: str | None = None, body_size: int | None = None, compress: bool = False,
                     group: str | None = None, extra: Iterable[str] = ()) -> list[str]:
        if body is not None and body_size is not None:
            raise ValueError("give body or body_size, not both")
        a = ["produce", "--namesrv", self.namesrv_addr, "--topic", topic, "--count", str(count),
             "--mode", mode]
        if tag is not None:
            a += ["--tag", tag]
        if keys is not None:
            a += ["--keys", keys]
        for k, v in (props or {}).items():
            a += ["--prop", f"{k}={v}"]
        if body is not None:
            a += ["--body", body]
        if body_size is not None:
            a += ["--body-size", str(body_size)]
        if compress:
            a.append("--compress")
        if group is not None:
            a += ["--group", group]
        return a + list(extra)

    def produce(self, topic: str, count: int, *, timeout: float = 120.0, **kw: Any) -> list[SentRecord]:
        """Send ``count`` messages and return what the client reported for each, in index order.

        "{i}" inside ``body``, ``keys``, ``tag`` and property values becomes the message index.
        """
        proc = self.spawn(self.produce_args(topic, count, **kw), SentRecord.from_json, timeout)
        recs = proc.finish()
        return sorted(recs, key=lambda r: r.index)

    # -- consume

    def consume_args(self, topic: str, count: int, *, mode: str = "push", model: str = "cluster",
                     orderly: bool = False, group: str | None = None, from_where: str = "first",
                     timeout_ms: int = 60000, sub: str = "*", extra: Iterable[str] = ()) -> list[str]:
        a = ["consume", "--namesrv", self.namesrv_addr, "--topic", topic, "--count", str(count),
             "--mode", mode, "--model", model, "--from", from_where, "--timeout-ms", str(timeout_ms),
             "--sub", sub]
        if orderly:
            a.append("--orderly")
        if group is not None:
            a += ["--group", group]
        return a + list(extra)

    def start_consumer(self, topic: str, count: int, *, timeout_ms: int = 60000,
                       **kw: Any) -> ConsumerHandle:
        """Start a consumer in the background; use ``wait_started``, ``wait_for`` and ``finish``."""
        args = self.consume_args(topic, count, timeout_ms=timeout_ms, **kw)
        return self.spawn(args, ReceivedRecord.from_json, timeout_ms / 1000 + STARTUP_SLACK_S)

    def consume(self, topic: str, count: int, **kw: Any) -> list[ReceivedRecord]:
        """Consume until ``count`` deliveries arrived; PeerTimeoutError (with partial records) if not."""
        return self.start_consumer(topic, count, **kw).finish()
