"""The README's consumer examples run as written, each in its own interpreter, against an
in-process NameServer and consumer broker (holding TopicTest messages) in a server process."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from readme_examples import readme_blocks as readme_section_blocks

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
WAIT = 60
#: The push example waits this long for its first message; a busy machine (load 15+ seen) can need
#: more than the README's 30 s to start a consumer in a fresh interpreter and rebalance.
EXAMPLE_WAIT = 150


def readme_blocks() -> list[str]:
    return readme_section_blocks('Consuming messages')


@pytest.fixture(scope="module")
def namesrv_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = tmp_path_factory.mktemp("readme") / "serve.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(ROOT)!r}, {str(HERE)!r}]
        from rmqwire.client import blocking
        from test_consumer_blocking import LoopbackConsumerCluster
        c = blocking.call(LoopbackConsumerCluster, blocking.ensure_reactor(), timeout=30)
        blocking.call(c.add_topic, "TopicTest", timeout=30)
        for i, tag in enumerate(["TagA", "TagB", "TagC"]):
            blocking.call(c.broker.put, "TopicTest", i, f"hello-{{i}}".encode(), tags=tag, timeout=30)
        print(c.namesrv_addr, flush=True)
        sys.stdin.read()  # serve until the test closes our stdin
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        addr = proc.stdout.readline().strip()
        assert re.fullmatch(r"127\.0\.0\.1:\d+", addr), addr
        yield addr
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_example(code: str, namesrv_addr: str, tmp_path: Path, timeout: float = WAIT) -> str:
    assert "127.0.0.1:9876" in code
    script = tmp_path / "example.py"
    script.write_text(code.replace("127.0.0.1:9876", namesrv_addr))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_push_consumer_example(namesrv_addr: str, tmp_path: Path) -> None:
    push, _pull = readme_blocks()
    assert "done.wait(30)" in push
    # The example must not end before its listener ran: wait for the event, and say so if it never came.
    push = push.replace("done.wait(30)", f"assert done.wait({EXAMPLE_WAIT}), 'no message consumed'")
    out = run_example(push, namesrv_addr, tmp_path, timeout=EXAMPLE_WAIT + WAIT)
    # Consume threads print concurrently, so their lines may interleave: look for the parts.
    assert "TopicTest" in out and re.search(r"\bTag[AB]\b", out) and "b'hello-" in out, out
    assert "TagC" not in out  # filtered by the subscription


def test_pull_consumer_example(namesrv_addr: str, tmp_path: Path) -> None:
    _push, pull = readme_blocks()
    out = run_example(pull, namesrv_addr, tmp_path)
    count, bodies = out.strip().split(" ", 1)
    assert int(count) >= 1 and "b'hello-" in bodies
