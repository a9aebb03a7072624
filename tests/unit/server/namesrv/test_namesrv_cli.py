"""``rmqwire namesrv`` as a process: -p, -c, a broker registering over loopback, and a clean exit
on SIGTERM and SIGINT (the unregistration path a supervisor relies on)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqwire.codec import FrameDecoder, ResponseCode, encode_frame
from rmqwire.codec.commands.namesrv import GetKVConfig, PutKVConfig, RegisterBroker
from rmqwire.codec.commands.route import GetRouteInfo
from tools.reference import wire
from tools.rmqwire_process import RmqwireNamesrv

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(Path(__file__).parent))
from namesrv_helpers import register_body  # noqa: E402


class Conn:
    """One blocking connection kept open (a broker's registration lives as long as its channel)."""

    def __init__(self, addr: str) -> None:
        self.sock = socket.create_connection(wire.split_addr(addr), timeout=10)
        self.decoder = FrameDecoder()
        self.opaque = 0

    def call(self, command, **kw):
        self.opaque += 1
        body = kw.pop("body", None)
        self.sock.sendall(encode_frame(command.request(body=body, **kw).with_opaque(self.opaque)))
        while True:
            for reply in self.decoder.feed(self.sock.recv(65536)):
                if reply.opaque == self.opaque:
                    return command.parse_response(reply)

    def close(self) -> None:
        self.sock.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rmqwire", "namesrv", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def _wait_until(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_print_config_with_a_file(tmp_path):
    conf = tmp_path / "ns.properties"
    conf.write_text("listenPort=19999\norderMessageEnable=true\n")
    out = run_cli("-c", str(conf), "-p")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"load config properties file OK, {conf}"
    assert any(line.endswith(" INFO main - listenPort=19999") for line in lines)
    assert any(line.endswith(" INFO main - orderMessageEnable=true") for line in lines)
    assert any(line.endswith(f" INFO main - configStorePath={conf}") for line in lines)


def test_missing_config_file_fails(tmp_path):
    out = run_cli("-c", str(tmp_path / "nope.properties"))
    assert out.returncode != 0 and "nope.properties" in out.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_and_stops_cleanly(tmp_path, sig):
    ns = RmqwireNamesrv({"kvConfigPath": str(tmp_path / "kv.json")}, workdir=tmp_path)
    ns.start()
    try:
        body = register_body("T1", "T2").encode(standard=False)
        broker = Conn(ns.addr)
        broker.call(RegisterBroker, body=body, broker_name="b", broker_addr="127.0.0.1:1",
                    cluster_name="C", ha_server_addr="127.0.0.1:2", broker_id=0,
                    enable_acting_master=False, compressed=False)
        route = wire.call(ns.addr, GetRouteInfo, topic="T1").body
        assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:1"}
        wire.call(ns.addr, PutKVConfig, namespace="NS", key="k", value="v")
        broker.close()  # the broker's connection closes: it leaves the routes at once
        assert _wait_until(lambda: wire.get_route_info(ns.addr, "T1") is None)
    finally:
        ns._signal(sig)
        ns.popen.wait(30)
    assert ns.popen.returncode == 0, ns.output()
    # the KV table survives a restart on the same file
    again = RmqwireNamesrv({"kvConfigPath": str(tmp_path / "kv.json")}, workdir=tmp_path)
    with again:
        assert wire.call(again.addr, GetKVConfig, namespace="NS", key="k").header.value == "v"
        assert wire.get_route_info(again.addr, "T1") is None
    assert again.returncode == 0


def test_port_in_use_fails_fast(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        conf = tmp_path / "ns.properties"
        conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n"
                        f"kvConfigPath={tmp_path / 'kv.json'}\n")
        out = run_cli("-c", str(conf))
    assert out.returncode == 1
    assert "did not start" in out.stderr
    assert ResponseCode.SUCCESS == 0
