"""The README's python code blocks under one heading (shared by the README example tests)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def readme_blocks(heading: str) -> list[str]:
    """The ```python blocks of the README section ``## <heading>``, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {heading}", 1)[1]
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)
