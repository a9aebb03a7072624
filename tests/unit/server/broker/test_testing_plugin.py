"""The pytest plugin shipped with the package: ``rmqwire_cluster`` in a user's test session (a
separate pytest process that finds the plugin through its ``pytest11`` entry point), and the
README's example test run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

USER_TESTS = '''
import threading

from rmqwire import Message, Producer, PushConsumer


def test_fresh_cluster_each_time(rmqwire_cluster):
    assert rmqwire_cluster.namesrv_addr.startswith("127.0.0.1:")
    assert rmqwire_cluster.broker_addr.startswith("127.0.0.1:")
    assert (rmqwire_cluster.store_dir / "abort").exists()  # the store is open


def test_send_and_consume(rmqwire_cluster):
    rmqwire_cluster.create_topic("Orders", queues=2)
    got, done = [], threading.Event()

    def listener(msgs, context=None):
        got.extend(msgs)
        if len(got) >= 3:
            done.set()
        return "CONSUME_SUCCESS"

    consumer = PushConsumer("cg", namesrv_addr=rmqwire_cluster.namesrv_addr, consume_from_where="FIRST_OFFSET")
    consumer.subscribe("Orders", "*")
    consumer.register_listener(listener)
    consumer.start()
    try:
        with Producer("pg", namesrv_addr=rmqwire_cluster.namesrv_addr) as p:
            for i in range(3):
                p.send(Message("Orders", b"order-%d" % i, tags="TagA"))
        assert done.wait(60)
    finally:
        consumer.shutdown()
    assert sorted(m.body for m in got) == [b"order-0", b"order-1", b"order-2"]
'''


def readme_test() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Testing with an in-process broker", 1)[1]
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def run_pytest(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_plugin_is_registered_as_pytest11_entry_point() -> None:
    found = [e for e in entry_points(group="pytest11") if e.name == "rmqwire"]
    assert [e.value for e in found] == ["rmqwire.testing"], \
        "reinstall the package (pip install -e .) to register the pytest11 entry point"


def test_user_tests_get_an_in_process_cluster(tmp_path: Path) -> None:
    out = run_pytest(tmp_path, USER_TESTS)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 passed" in out.stdout


def test_readme_example_runs_as_written(tmp_path: Path) -> None:
    block = readme_test()
    assert len(block.strip().splitlines()) <= 6
    out = run_pytest(tmp_path, block)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 passed" in out.stdout
