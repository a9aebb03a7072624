"""The README's producer examples run as written (blocking, and the Twisted core under asyncio),
each in its own interpreter, against an in-process NameServer and broker in a server process."""

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


def readme_blocks() -> list[str]:
    return readme_section_blocks('Producing messages')


@pytest.fixture(scope="module")
def namesrv_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = tmp_path_factory.mktemp("readme") / "serve.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(ROOT)!r}, {str(HERE)!r}]
        from rmqwire.client import blocking
        from test_producer_blocking import LoopbackCluster
        c = blocking.call(LoopbackCluster, blocking.ensure_reactor(), timeout=30)
        blocking.call(c.add_topic, "TopicTest", timeout=30)
        print(c.namesrv_addr, flush=True)
        sys.stdin.read()  # serve until the test closes our stdin
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
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


def run_example(code: str, namesrv_addr: str, tmp_path: Path) -> str:
    assert "127.0.0.1:9876" in code
    script = tmp_path / "example.py"
    script.write_text(code.replace("127.0.0.1:9876", namesrv_addr))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=WAIT, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_there_are_two_examples() -> None:
    assert len(readme_blocks()) == 2


def test_blocking_example(namesrv_addr: str, tmp_path: Path) -> None:
    out = run_example(readme_blocks()[0], namesrv_addr, tmp_path)
    assert out.startswith("SendStatus.SEND_OK ") and "MessageQueue [topic=TopicTest, brokerName=broker-a" in out


def test_asyncio_example(namesrv_addr: str, tmp_path: Path) -> None:
    out = run_example(readme_blocks()[1], namesrv_addr, tmp_path)
    assert out.strip() == "SendStatus.SEND_OK"
