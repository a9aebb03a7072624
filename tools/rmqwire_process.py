"""rmqwire's own NameServer as a child process, and official brokers registering with it.

``RmqwireNamesrv`` runs ``python -m rmqwire namesrv -c <file>`` exactly as a user would, reads the
boot line for the port, and stops it with SIGTERM (its exit code tells whether it shut down
cleanly). Like the official JVMs of tools.reference.cluster it gets its own process group and a
parent-death signal, so it cannot outlive the test run.

``BrokersOnNamesrv`` is the reference cluster (tools.reference.cluster.ReferenceCluster) with its
brokers pointed at given NameServers: with ``official_namesrv=False`` no official NameServer is
started and the brokers register with ``namesrv_addrs`` only (the launcher's readiness check then
asks the first of them); with ``official_namesrv=True`` an official NameServer is started too and
comes first in every broker's ``namesrvAddr``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.reference.cluster import BrokerInfo, ReferenceCluster, pdeathsig
from tools.reference.wire import WireError, get_cluster_info

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOT_LINE = re.compile(r"The Name Server boot success\. serializeType=\w+, address (\S+):(\d+)")
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


class NamesrvStartError(RuntimeError):
    pass


class RmqwireNamesrv:
    """``rmqwire namesrv`` on 127.0.0.1 with the given config keys (``listenPort`` 0 = any free)."""

    def __init__(self, props: dict[str, str] | None = None, *, workdir: Path | None = None,
                 python: str = sys.executable, log_level: str = "info",
                 env: dict[str, str] | None = None) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="rmqwire-ns-"))
        self.props = {
            "listenPort": "0",
            "bindAddress": "127.0.0.1",
            "kvConfigPath": str(self.workdir / "kvConfig.json"),
            **(props or {}),
        }
        self.python = python
        self.log_level = log_level
        self.env = env or {}
        self.popen: subprocess.Popen[bytes] | None = None
        self.addr = ""
        self.returncode: int | None = None

    @property
    def config_file(self) -> Path:
        return self.workdir / "namesrv.properties"

    @property
    def output_path(self) -> Path:
        return self.workdir / "namesrv.out"

    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self, timeout: float = START_TIMEOUT) -> RmqwireNamesrv:
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.output_path, "wb") as out:
            self.popen = subprocess.Popen(
                [self.python, "-m", "rmqwire", "namesrv", "-c", str(self.config_file),
                 "--log-level", self.log_level],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                env=env, start_new_session=True, preexec_fn=pdeathsig,
            )
        deadline = time.monotonic() + timeout
        while True:
            m = BOOT_LINE.search(self.output())
            if m:
                self.addr = f"127.0.0.1:{m.group(2)}"
                return self
            if self.popen.poll() is not None:
                raise NamesrvStartError(f"rmqwire namesrv exited with {self.popen.returncode}:\n"
                                        f"{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                self.kill()
                raise NamesrvStartError(f"rmqwire namesrv: no boot line in {timeout:.0f} s:\n"
                                        f"{self.output()[-3000:]}")
            time.sleep(0.05)

    def restart(self, timeout: float = START_TIMEOUT) -> RmqwireNamesrv:
        """Stop (if running) and start again on the same port (clients keep its address)."""
        if self.addr:
            self.props["listenPort"] = self.addr.rsplit(":", 1)[1]
        self.stop()
        self.popen = None
        return self.start(timeout)

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
        if self.popen is not None:
            self._signal(signal.SIGKILL)
            self.popen.wait()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)

    def _signal(self, sig: int) -> None:
        assert self.popen is not None
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> RmqwireNamesrv:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(eq=False)
class BrokersOnNamesrv(ReferenceCluster):
    """Official brokers registering with ``namesrv_addrs`` (and an official NameServer first,
    with ``official_namesrv=True``)."""

    namesrv_addrs: tuple[str, ...] = ()
    official_namesrv: bool = False
    official_namesrv_addr: str = field(init=False, default="")

    def _start_namesrv(self) -> None:
        if not self.namesrv_addrs and not self.official_namesrv:
            raise ValueError("no NameServer for the brokers")
        if self.official_namesrv:
            super()._start_namesrv()
            self.official_namesrv_addr = self.namesrv_addr
        else:
            self.namesrv_addr = self.namesrv_addrs[0]

    @property
    def all_namesrv_addrs(self) -> list[str]:
        first = [self.official_namesrv_addr] if self.official_namesrv else []
        return first + [a for a in self.namesrv_addrs if a not in first]

    def add_broker(self, name: str, conf: dict[str, str] | None = None):  # type: ignore[override]
        merged = {"namesrvAddr": ";".join(self.all_namesrv_addrs), **(conf or {})}
        return super().add_broker(name, merged)

    def add_slave(self, broker_name: str, broker_id: int = 1,
                  conf: dict[str, str] | None = None) -> BrokerInfo:
        """Start a slave of ``broker_name`` (its own directories, the master's broker name)."""
        merged = {
            "namesrvAddr": ";".join(self.all_namesrv_addrs),
            **self.broker_conf,
            "brokerName": broker_name,
            "brokerId": str(broker_id),
            "brokerRole": "SLAVE",
            **(conf or {}),
        }
        return self._start_broker(f"{broker_name}-s{broker_id}", merged)

    def _registered(self, name: str, addr: str) -> bool:
        # Any broker id (slaves too), and with every NameServer the brokers register with.
        for namesrv in self.all_namesrv_addrs:
            try:
                info = get_cluster_info(namesrv, timeout=3)
            except (OSError, WireError):
                return False
            if not any(addr in addrs.values() for addrs in info.broker_addrs.values()):
                return False
        return True

    def pid_of(self, addr: str) -> int:
        """The process id of the broker at ``addr``."""
        for b in self._brokers:
            if b.info.addr == addr:
                return b.proc.pid
        raise KeyError(addr)

    def stop_official_namesrv(self) -> None:
        """Stop the official NameServer alone (brokers and clients keep the other ones)."""
        proc = self._namesrv
        self._namesrv = None
        if proc is not None:
            proc.terminate()
