"""The peer harness: a failed peer's error carries the warnings of the client's own log."""

from __future__ import annotations

import sys

import pytest

from tools.peers.process import PeerError, PeerProcess
from tools.peers.records import SentRecord

# Writes like the C++ client (HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.0), then fails.
FAILING_PEER = """
import os, sys
d = os.path.join("logs", "rocketmq-cpp"); os.makedirs(d)
with open(os.path.join(d, "1_rocketmq-cpp.log.0"), "w") as f:
    f.write("[t](info):updateTopicRouteInfoFromNameServer start:T\\n")
    f.write("".join(f"[t](warning):retry {i} " + "x" * 200 + "\\n" for i in range(100)))
    f.write("[t](warning):send failed of times:1\\n[t](error):broker busy\\n")
sys.stderr.write("Traceback: ProducerSendSyncFailed\\n" + "  at frame\\n" * 250)
sys.exit(2)
"""


def test_failed_peer_error_shows_client_log_warnings(tmp_path):
    proc = PeerProcess([sys.executable, "-c", FAILING_PEER], env={}, cwd=str(tmp_path),
                       record_type=SentRecord.from_json, deadline_s=60)
    with pytest.raises(PeerError) as e:
        proc.finish()
    stderr, _, warnings = str(e.value).partition("--- peer stderr (tail) ---")[2].partition(
        "--- client log warnings (tail) ---")
    assert "ProducerSendSyncFailed" in stderr  # the cause stays, however long the client log
    assert "1_rocketmq-cpp.log.0: [t](warning):send failed of times:1" in warnings
    assert "1_rocketmq-cpp.log.0: [t](error):broker busy" in warnings
    assert "updateTopicRouteInfoFromNameServer" not in warnings  # info lines stay out
