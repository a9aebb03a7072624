"""Dependencies point one way: codec <- remoting <- client/server <- cli/metrics/spark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "rmqwire"

# layer -> the rmqwire packages it may import (besides itself)
ALLOWED = {
    "codec": {"errors", "model"},
    "remoting": {"codec", "errors", "model"},
    "client": {"remoting", "codec", "errors", "model"},
    "server": {"remoting", "codec", "errors", "model"},
}


def _rmqwire_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "rmqwire" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_lower_layers(layer):
    bad = {}
    for path in (PKG / layer).rglob("*.py"):
        extra = _rmqwire_imports(path) - ALLOWED[layer] - {layer}
        if extra:
            bad[str(path.relative_to(PKG))] = sorted(extra)
    assert bad == {}


def test_codec_imports_no_twisted():
    code = "import sys, rmqwire.codec, rmqwire.codec.commands; print('twisted' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
