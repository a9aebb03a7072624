"""The flush helper process with timestamps (``sync_trace`` points the store at this script).

Per round: the first read's return, ``fdatasync`` start and end, the answer sent, the target; all
``perf_counter_ns`` (CLOCK_MONOTONIC: comparable with the broker's stamps). Written as JSON lines
to ``$RMQWIRE_FLUSH_CHILD_TRACE`` when the broker closes the socket.
"""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "rmqwire" / "server" / "store"))

import _flush_child  # noqa: E402

now = time.perf_counter_ns
rounds: list[list[int]] = []
_real_sync = os.fdatasync


class _Sock:
    """The helper's socket, stamping the reads that start a round and the answers."""

    def __init__(self, sock):
        self._sock = sock
        self._waiting = True

    def recvmsg(self, *args):
        r = self._sock.recvmsg(*args)
        if self._waiting and r[0]:
            rounds.append([now(), 0, 0, 0, 0])
            self._waiting = False
        return r

    def sendall(self, data):
        self._sock.sendall(data)
        if rounds:
            rounds[-1][3] = now()
            rounds[-1][4] = int.from_bytes(data[1:9], "big", signed=True)
        self._waiting = True

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _timed_sync(fd):
    start = now()
    _real_sync(fd)
    if rounds and not rounds[-1][1]:
        rounds[-1][1] = start
    if rounds:
        rounds[-1][2] = now()


def main():
    import signal
    import socket

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _flush_child.os.fdatasync = _timed_sync
    sock = _Sock(socket.socket(fileno=int(sys.argv[1])))
    try:
        _flush_child.serve(sock, int(sys.argv[2]))
    finally:
        out = os.environ.get("RMQWIRE_FLUSH_CHILD_TRACE")
        if out:
            with open(out, "a") as f:
                for r in rounds:
                    f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
