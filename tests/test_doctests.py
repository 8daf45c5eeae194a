"""The worked examples in the docstrings run, as doctests: every module of tokenizer/ and rml_chat/ that holds one."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.offline


def _with_examples() -> list[str]:
    names = []
    for path in sorted([*(ROOT / "tokenizer").rglob("*.py"), *(ROOT / "rml_chat").rglob("*.py")]):
        if ">>> " in path.read_text(encoding="utf-8"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _with_examples()


def test_the_modules_with_examples_are_found() -> None:
    assert {"tokenizer.stages.byte_alphabet", "tokenizer.stages.llama_regex", "rml_chat.engines.kv_cache"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
