"""Mutated tokenizer.json files: a TokenizerError naming the file, or a working tokenizer.
A bounded slice of scripts/fuzz.py (run that with --iterations 10000 for the long run)."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import fuzz  # noqa: E402
import pytest

pytestmark = pytest.mark.offline


def test_600_random_mutations_of_small_tokenizer_json_files() -> None:
    outcomes = fuzz.run("json", 600, seed=2, report=lambda _: None)
    assert outcomes["ESCAPE"] == 0 and outcomes["error"] > 400 and outcomes["valid"] > 0
