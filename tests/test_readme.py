"""The README's Python examples run as pasted, in order (the default model installed by the Quick start)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_python_examples_run_as_pasted() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 (our own README)
    tok = namespace["tok"]
    assert tok.encode("Hello world") == [19556, 905] and namespace["text"] == tok.decode(tok.encode("Hello world"))
    assert namespace["ids"][:1] == [1]  # the chat prompt starts with <|im_start|>
