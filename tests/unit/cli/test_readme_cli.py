"""The README's CLI examples (its ``sh`` block under "## CLI") run as written, line by line in bash,
with the ``rmqadmin`` console script, against an in-process rmqwire NameServer + Broker (the
example's NAMESRV_ADDR pointed at it) where ``my_group`` is a running consumer of TopicTest."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqwire.testing import RmqwireCluster

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 60


def cli_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = re.split(r"\n## ", text.split("\n## CLI\n", 1)[1], maxsplit=1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line for line in block.splitlines() if line.strip()]


@pytest.fixture
def my_group(rmqwire_cluster: RmqwireCluster) -> Iterator[RmqwireCluster]:
    """TopicTest and a push consumer in my_group (consumerProgress -g my_group needs the group)."""
    from rmqwire import ConsumeResult, PushConsumer

    rmqwire_cluster.create_topic("TopicTest", 4)
    consumer = PushConsumer("my_group", namesrv_addr=rmqwire_cluster.namesrv_addr)
    consumer.subscribe("TopicTest", "*")
    consumer.register_listener(lambda msgs: ConsumeResult.SUCCESS)
    consumer.start()
    try:
        yield rmqwire_cluster
    finally:
        consumer.shutdown()


def test_readme_cli_examples_run_as_written(my_group: RmqwireCluster) -> None:
    lines = cli_lines()
    assert lines[0] == "export NAMESRV_ADDR=127.0.0.1:9876", lines[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NAMESRV_ADDR": my_group.namesrv_addr,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    outputs = {}
    for line in lines[1:]:
        assert line.startswith(("rmqadmin ", "echo hello | rmqadmin ")), line
        if "--watch" in line:
            outputs[line] = watched(line, env)
            continue
        run = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True,
                             timeout=TIMEOUT)
        assert run.returncode == 0 and run.stderr == "", (line, run.stderr)
        outputs[line] = run.stdout
    by_command = {line.split("rmqadmin ", 1)[1].split()[0]: out for line, out in outputs.items()}
    assert re.search(r"^DefaultCluster\s+broker-a\s+0\s", by_command["clusterList"], re.M)
    assert "create topic to" in by_command["updateTopic"]
    assert re.search(r"^DefaultCluster\s+broker-a\s+\{0=\S+\}\s+4\s+4\s+6", by_command["topicRoute"], re.M)
    assert '"topic": "TopicTest"' in by_command["topicStatus"]
    assert by_command["produce"].startswith("sent 1 message(s) to TopicTest")
    assert by_command["tail"] == "hello\n"


def watched(line: str, env: dict[str, Any]) -> str:
    """A ``--watch`` line prints its table again every few seconds until Ctrl-C, which ends it
    cleanly (exit 130, as a shell reports an interrupted command, no traceback)."""
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while sum(s.startswith("#Topic") for s in list(seen)) < 2:  # the table, then again
            assert proc.poll() is None, (line, proc.stderr.read() if proc.stderr else "")
            assert time.monotonic() < deadline, f"{line}: no second table in {TIMEOUT} s"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT) == 130
        reader.join(TIMEOUT)
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return "".join(seen)
