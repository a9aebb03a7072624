"""rocketmq-client-cpp, through PyPI ``rocketmq==0.4.4`` (ctypes, bundled librocketmq.so), as a peer.

    ensure_cpp_venv()                # python -m venv .venv-cpp && pip install rocketmq==0.4.4 (once)
    peer = CppPeer("127.0.0.1:9876")
    peer.produce("TopicA", 10, tag="TagA", keys="k{i}", props={"p": "v{i}"})
    peer.consume("TopicA", 10, group="g1", extra=["--prop-names", "p"])

The wheel is x86-64 Linux only and its package name clashes with other RocketMQ bindings, so it
lives in its own venv (``.venv-cpp`` at the repository root). The native client logs under
``$HOME/logs/rocketmq-cpp``; each peer points HOME at its own temporary directory.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.peers.process import CliPeer

REPO_ROOT = Path(__file__).resolve().parents[2]
CPP_VENV = Path(os.environ.get("RMQWIRE_CPP_VENV", REPO_ROOT / ".venv-cpp"))
PEER_PY = Path(__file__).resolve().parent / "cpp" / "peer.py"
ROCKETMQ_WHEEL_VERSION = "0.4.4"


class CppPeerUnavailable(RuntimeError):
    """The C++ client wheel cannot be installed or loaded on this machine."""


def _venv_python() -> Path:
    return CPP_VENV / "bin" / "python"


def ensure_cpp_venv() -> Path:
    """Create the dedicated venv and install the pinned wheel; return its python."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        raise CppPeerUnavailable("rocketmq 0.4.4 ships a librocketmq.so for x86-64 Linux only")
    py = _venv_python()
    check = [str(py), "-c", "import rocketmq.client, importlib.metadata as m; "
             f"assert m.version('rocketmq') == '{ROCKETMQ_WHEEL_VERSION}'"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return py
    steps = [
        [sys.executable, "-m", "venv", str(CPP_VENV)],
        [str(py), "-m", "pip", "install", "-q", f"rocketmq=={ROCKETMQ_WHEEL_VERSION}"],
        check,
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise CppPeerUnavailable(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return py


class CppPeer(CliPeer):
    name = "cpp"

    def __init__(self, namesrv_addr: str) -> None:
        super().__init__(namesrv_addr)
        self.python = ensure_cpp_venv()

    def command(self, args: Sequence[str]) -> list[str]:
        return [str(self.python), str(PEER_PY), *args]
