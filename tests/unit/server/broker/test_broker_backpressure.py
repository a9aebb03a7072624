"""A client that sends requests but never reads the answers: the broker stops reading from it
once the unread answers fill its write buffer, instead of buffering answers without bound."""

from __future__ import annotations

import select
import socket
import time
from pathlib import Path

from rmqwire.codec import LanguageCode, RemotingCommand, RequestCode, encode_frame
from rmqwire.testing import start_cluster


def test_broker_stops_reading_a_client_that_does_not_read(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "store")
    try:
        host, port = cluster.broker_addr.rsplit(":", 1)
        # Each answer (the runtime info table) is about 100 times the request's size.
        request = encode_frame(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, None, None,
                                                       language=LanguageCode.JAVA))
        budget = 40 * 1024 * 1024  # unthrottled, the answers to this much would be ~4 GB
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        chunk = request * 1000
        sent = 0
        try:
            while sent < budget:
                _, writable, _ = select.select([], [sock], [], 10.0)
                if not writable:
                    break  # the broker has not read anything for 10 s: it stopped reading us
                try:
                    sent += sock.send(chunk)
                except BlockingIOError:
                    time.sleep(0.01)
        finally:
            sock.close()
        assert sent < budget, "the broker kept reading requests whose answers nobody read"
    finally:
        cluster.stop()
