"""``rmqwire standalone`` and ``rmqwire broker`` as processes: the main job starts, says where it
listens and stores, serves the README's producer example, and stops cleanly on SIGTERM (the store
left without its abort marker); ``rmqwire broker -p`` prints the official config keys."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "client"))
from test_readme_producer import readme_blocks  # noqa: E402

READY = re.compile(r"rmqwire standalone: NameServer (\S+), broker (\S+) \(cluster (\S+)\), store (.+)")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rmqwire", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def wait_line(proc: subprocess.Popen[str], pattern: re.Pattern[str], timeout: float = 60) -> re.Match[str]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = pattern.search(line)
        if m:
            return m
    raise AssertionError(f"no line matching {pattern.pattern}; output: {''.join(seen)[-3000:]}")


def test_standalone_serves_the_readme_producer_and_stops_cleanly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmqwire", "standalone", "--namesrv-port", "0", "--broker-port", "0",
         "--store-dir", str(store), "--log-level", "warn"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        m = wait_line(proc, READY)
        namesrv, broker, cluster, where = m.groups()
        assert namesrv.startswith("127.0.0.1:") and broker.startswith("127.0.0.1:")
        assert cluster == "DefaultCluster" and Path(where) == store
        assert (store / "abort").exists()
        code = readme_blocks()[0].replace("127.0.0.1:9876", namesrv)
        (tmp_path / "example.py").write_text(code)
        out = subprocess.run([sys.executable, str(tmp_path / "example.py")], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("SendStatus.SEND_OK ")
        assert "MessageQueue [topic=TopicTest, brokerName=broker-a" in out.stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (store / "abort").exists()  # a clean shutdown
    assert (store / "config" / "topics.json").exists()
    assert "TopicTest" in (store / "config" / "topics.json").read_text()


def test_standalone_refuses_a_store_in_use(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = subprocess.Popen(
        [sys.executable, "-m", "rmqwire", "standalone", "--namesrv-port", "0", "--broker-port", "0",
         "--store-dir", str(store), "--log-level", "warn"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_line(first, READY)
        second = run_cli("standalone", "--namesrv-port", "0", "--broker-port", "0", "--store-dir", str(store),
                         "--log-level", "warn")
        assert second.returncode == 1
        assert "did not start" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0


def test_broker_print_config(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=Cx\nbrokerName=b-x\nlistenPort=12911\nflushDiskType=SYNC_FLUSH\n"
                    f"storePathRootDir={tmp_path / 'store'}\nautoCreateTopicEnable=false\nbogus=1\n")
    out = run_cli("broker", "-c", str(conf), "-p")
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" - ", 1)[1].split("=", 1) for line in out.stdout.splitlines() if " - " in line)
    assert lines["brokerClusterName"] == "Cx" and lines["brokerName"] == "b-x"
    assert lines["listenPort"] == "12911" and lines["haListenPort"] == "12912"
    assert lines["flushDiskType"] == "SYNC_FLUSH" and lines["autoCreateTopicEnable"] == "false"
    assert lines["storePathRootDir"] == str(tmp_path / "store")
    assert lines["enableUpdateBrokerConfig"] == "false"
    defaults = dict(line.split(" - ", 1)[1].split("=", 1) for line in run_cli("broker", "-p").stdout.splitlines())
    assert defaults["listenPort"] == "10911" and defaults["brokerClusterName"] == "DefaultCluster"
    assert defaults["defaultTopicQueueNums"] == "8" and defaults["mappedFileSizeCommitLog"] == str(1 << 30)
