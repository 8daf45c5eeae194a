"""Mutated GGUF files: a TokenizerError naming the file, or a working tokenizer — nothing else.
A bounded slice of scripts/fuzz.py (run that with --iterations 10000 for the long run)."""

from __future__ import annotations

import random

import pytest
from conftest import ROOT, model_path, read_in_bulk
from test_fuzz_json import fuzz

import tokenizer
from tokenizer import TokenizerError

#: the plain string reader, and the numpy one (``tokenizer.accel.bulk``) made to read even these small arrays
READERS = pytest.mark.parametrize("bulk_min", [10**9, 1], ids=["plain", "bulk"])


@READERS
def test_every_boundary_truncation_and_400_random_mutations_of_small_ggufs(tmp_path, monkeypatch, bulk_min) -> None:
    read_in_bulk(monkeypatch, bulk_min)
    outcomes = fuzz.run("gguf", 400, seed=1, report=lambda _: None)
    assert outcomes["ESCAPE"] == 0 and outcomes["error"] > 300 and outcomes["valid"] > 0


@READERS
def test_the_real_smollm2_header_truncated_at_every_section_boundary(tmp_path, monkeypatch, bulk_min) -> None:
    read_in_bulk(monkeypatch, bulk_min)
    data = model_path("smollm2").read_bytes()[:4_000_000]
    boundaries = sorted(set(fuzz.gguf_fields(data)["boundary"]))
    assert len(boundaries) > 40
    target = tmp_path / "cut.gguf"
    for at in boundaries[:-1]:
        target.write_bytes(data[:at])
        with pytest.raises(TokenizerError, match="cut.gguf"):
            tokenizer.load(target)
    target.write_bytes(data[:boundaries[-1]])  # the whole metadata section: the tokenizer is all there
    assert tokenizer.load(target).encode("Hello") == tokenizer.load(model_path("smollm2")).encode("Hello")


def test_wrong_value_types_for_each_tokenizer_key_are_errors_naming_the_key(tmp_path) -> None:
    entries = fuzz.byte_level_entries()
    rng = random.Random(0)
    for i, (key, _kind, _value) in enumerate(entries):
        if not key.startswith("tokenizer.ggml."):
            continue
        wrong = list(entries)
        wrong[i] = (key, fuzz.F32, rng.random()) if _kind != fuzz.F32 else (key, fuzz.STRING, "x")
        path = tmp_path / "wrong.gguf"
        path.write_bytes(fuzz.write_gguf(wrong))
        with pytest.raises(TokenizerError, match=f"wrong.gguf.*{key}"):
            tokenizer.load(path)
    assert (ROOT / "scripts" / "fuzz.py").exists()
