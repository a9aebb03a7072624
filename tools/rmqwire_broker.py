"""rmqwire's Broker as a child process (``python -m rmqwire broker -c <file>``), as a user runs it.

``RmqwireBroker`` writes a ``broker.conf`` with the official keys, starts the broker, waits for
its boot line and its first registration, and stops it with SIGTERM (exit code 0 = clean) or
SIGKILL (a crash: the store keeps its ``abort`` marker). Like the official JVMs of
tools.reference.cluster it gets its own process group and a parent-death signal, so it cannot
outlive the test run. Ports: ``listenPort`` (fast port = listenPort - 2, HA port + 1) are picked
free once and kept across restarts, so clients keep the broker's address.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.reference.cluster import LOOPBACK, pdeathsig, pick_ports
from tools.reference.wire import WireError, get_cluster_info

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOT_LINE = re.compile(r"The broker\[(?P<name>[^,\]]+), (?P<addr>[^\]]+)\] boot success")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class BrokerStartError(RuntimeError):
    pass


class RmqwireBroker:
    """``rmqwire broker`` on 127.0.0.1 registering with ``namesrv_addr`` (None: no NameServer)."""

    def __init__(self, namesrv_addr: str | None, props: dict[str, str] | None = None, *,
                 workdir: Path | None = None, name: str = "rmqwire-a", python: str = sys.executable,
                 log_level: str = "warn", env: dict[str, str] | None = None) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="rmqwire-broker-"))
        self.port = pick_ports((-2, 0, 1))
        self.name = name
        self.namesrv_addr = namesrv_addr
        self.props = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": name,
            "brokerIP1": LOOPBACK,
            "bindAddress": LOOPBACK,
            "listenPort": str(self.port),
            "storePathRootDir": str(self.store_dir),
            "storePathCommitLog": str(self.store_dir / "commitlog"),
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            "mappedFileSizeConsumeQueue": str(30_000 * 20),
            "autoCreateTopicEnable": "true",
            **({"namesrvAddr": namesrv_addr} if namesrv_addr else {}),
            **(props or {}),
        }
        self.python = python
        #: Interpreter options before ``-m rmqwire`` (e.g. ``-m cProfile -o out``).
        self.python_args: list[str] = []
        self.log_level = log_level
        self.env = env or {}
        self.popen: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.starts = 0

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def store_dir(self) -> Path:
        return self.workdir / "store"

    @property
    def config_file(self) -> Path:
        return self.workdir / "broker.conf"

    @property
    def output_path(self) -> Path:
        return self.workdir / f"broker-{self.starts}.out"

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self, timeout: float = START_TIMEOUT) -> RmqwireBroker:
        self.starts += 1
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.output_path, "wb") as out:
            self.popen = subprocess.Popen(
                [self.python, *self.python_args, "-m", "rmqwire", "broker", "-c", str(self.config_file),
                 "--log-level", self.log_level],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                env=env, start_new_session=True, preexec_fn=pdeathsig,
            )
        deadline = time.monotonic() + timeout
        while not BOOT_LINE.search(self.output()):
            self._check_alive(deadline, "boot line")
            time.sleep(0.05)
        if self.namesrv_addr:
            while not self._registered():
                self._check_alive(deadline, f"registration with {self.namesrv_addr}")
                time.sleep(0.1)
        return self

    def _check_alive(self, deadline: float, what: str) -> None:
        assert self.popen is not None
        if self.popen.poll() is not None:
            raise BrokerStartError(f"rmqwire broker exited with {self.popen.returncode} before its "
                                   f"{what}:\n{self.output()[-3000:]}")
        if time.monotonic() > deadline:
            self.kill()
            raise BrokerStartError(f"rmqwire broker: no {what}:\n{self.output()[-3000:]}")

    def _registered(self) -> bool:
        assert self.namesrv_addr
        try:
            info = get_cluster_info(self.namesrv_addr.split(";")[0], timeout=3)
        except (OSError, WireError):
            return False
        return any(self.addr in addrs.values() for addrs in info.broker_addrs.values())

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait; SIGKILL after ``timeout``. Returns the exit code (0 = clean)."""
        if self.popen is None:
            return self.returncode
        if self.popen.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.returncode = self.popen.wait()
        return self.returncode

    def kill(self) -> None:
        """SIGKILL, as a crash: no flush, no unregistration, the abort marker stays."""
        if self.popen is not None:
            self._signal(signal.SIGKILL)
            self.returncode = self.popen.wait()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _signal(self, sig: int) -> None:
        assert self.popen is not None
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def cpu_seconds(self) -> float:
        """User + system CPU time of the broker process so far (from /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def __enter__(self) -> RmqwireBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
