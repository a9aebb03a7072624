"""rmqadmin's progress bars: drawn on stderr with ``--progress`` (or on a terminal), never on a
pipe without it, and stdout keeps every line while a bar is drawn (rich would send it to stderr).
``produce`` from a file and ``consumeMessage`` over
a range, against an in-process NameServer and Broker (the package's ``rmqwire_cluster``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 120


def rmqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rmqwire", "admin", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=ROOT)


def test_progress_bars_on_stderr_only_when_asked(rmqwire_cluster: Any, tmp_path: Path) -> None:
    ns = rmqwire_cluster.namesrv_addr
    rmqwire_cluster.create_topic("ProgressTopic", queues=2)
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"".join(b"line-%d\n" % i for i in range(50)))
    size = lines.stat().st_size

    shown = rmqadmin("produce", "--progress", "-t", "ProgressTopic", "-f", str(lines), "-n", ns)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("sent 50 message(s) to ProgressTopic"), shown.stdout
    assert "produce ProgressTopic" in shown.stderr and f"/{size}" in shown.stderr  # the bar, by bytes
    assert "\x1b[" in shown.stderr and "\x1b[" not in shown.stdout

    quiet = rmqadmin("produce", "-t", "ProgressTopic", "-f", str(lines), "-n", ns)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.startswith("sent 50 message(s) to ProgressTopic"), quiet.stdout
    assert quiet.stderr == ""  # stderr is a pipe and --progress was not given: no bar

    consumed = rmqadmin("consumeMessage", "--progress", "-t", "ProgressTopic", "-c", "100", "-n", ns)
    assert consumed.returncode == 0, consumed.stderr
    assert "consumeMessage ProgressTopic" in consumed.stderr
    assert consumed.stdout.count("line-7") == 2 and "\x1b[" not in consumed.stdout  # both runs' copies
