"""Round trips: decode(encode(s)) == s for byte-level vocabularies, on the corpus and on generated text."""

from __future__ import annotations

import pytest
from conftest import BYTE_LEVEL_VOCABS, corpus, ours
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize("name", BYTE_LEVEL_VOCABS)
def test_corpus_round_trip(name: str) -> None:
    tok = ours(name)
    bad = [s for s in corpus() if tok.decode(tok.encode(s)) != s]
    assert not bad, f"{name}: {len(bad)} strings do not round-trip, first {bad[0]!r}"


def test_smollm2_round_trip_drops_only_missing_control_bytes() -> None:
    """SmolLM2's vocabulary has no tokens for most control bytes; llama.cpp drops them, so do we."""
    tok = ours("smollm2")
    for s in corpus():
        kept = "".join(ch for ch in s if tok.token_to_id(chr(ord(ch) + 0x100)) is not None or ord(ch) > 0x20
                       or ch in "\t\n\r ")
        assert tok.decode(tok.encode(s)) == kept, s


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_generated_round_trip(text: str) -> None:
    for name in ("gpt-2", "llama-bpe", "qwen2"):
        tok = ours(name)
        assert tok.decode(tok.encode(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.booleans())
def test_encode_never_raises_and_ids_in_range(text: str, parse_special: bool) -> None:
    for name in ("llama-spm", "gpt-2", "gemma-4"):
        tok = ours(name)
        ids = tok.encode(text, parse_special=parse_special)
        assert all(0 <= i < tok.vocab_size for i in ids)
        tok.decode(ids)
