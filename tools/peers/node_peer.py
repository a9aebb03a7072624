"""ali-ons (pure Node.js RocketMQ client, npm, pinned in tools/peers/node/package.json) as a peer.

    ensure_node_modules()            # npm ci into tools/peers/node/node_modules (once)
    peer = NodePeer("127.0.0.1:9876")
    peer.produce("TopicA", 10, tag="TagA", keys="k{i}", props={"p": "v{i}"})
    peer.consume("TopicA", 10, group="g1")

ali-ons can only produce in modes sync and async, and only has a concurrent push consumer. It
stamps no UNIQ_KEY, so its msgId is the broker's offset message id on both sides.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tools.peers.process import CliPeer

NODE_DIR = Path(__file__).resolve().parent / "node"
PEER_JS = NODE_DIR / "peer.js"
ALI_ONS_VERSION = "3.12.0"


class NodePeerUnavailable(RuntimeError):
    """node or npm is missing, or the pinned packages cannot be installed."""


def node_bin() -> str:
    node = shutil.which("node")
    if node is None:
        raise NodePeerUnavailable("node is not installed (apt: nodejs)")
    return node


def ensure_node_modules() -> Path:
    """Install the locked packages (npm ci) unless ali-ons is already in node_modules."""
    installed = NODE_DIR / "node_modules" / "ali-ons" / "package.json"
    if installed.exists():
        return NODE_DIR / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        raise NodePeerUnavailable("npm is not installed (apt: npm)")
    proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not installed.exists():
        raise NodePeerUnavailable(f"npm ci failed in {NODE_DIR}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return NODE_DIR / "node_modules"


class NodePeer(CliPeer):
    name = "node"

    def __init__(self, namesrv_addr: str) -> None:
        super().__init__(namesrv_addr)
        self.node = node_bin()
        ensure_node_modules()

    def command(self, args: Sequence[str]) -> list[str]:
        return [self.node, str(PEER_JS), *args]
