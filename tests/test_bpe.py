"""White-box, reference stage: the long-word merge loop (heap) against the short-word loop (scan), which is
the definition, and the merge table's fast paths against the plain lookup."""

from __future__ import annotations

import pytest
from conftest import ours
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenizer.stages import bpe

pytestmark = pytest.mark.stages


def _merged_with(short_word: int, ids: list[int], tok) -> list[int]:
    saved = bpe.SHORT_WORD
    try:
        bpe.SHORT_WORD = short_word
        return bpe.merge_ranked(list(ids), tok.model.table, tok.model.width)
    finally:
        bpe.SHORT_WORD = saved


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(" etaoinshrdlu\n0123456789.,'")), min_size=1, max_size=400))
def test_heap_and_scan_loops_merge_alike(chars: list[str]) -> None:
    tok = ours("llama-bpe")
    ids = [tok.model.byte_tokens[ord(c)] for c in chars]
    assert _merged_with(0, ids, tok) == _merged_with(10**9, ids, tok)


def test_merge_table_paths_agree() -> None:
    """GPT-2 and Qwen2 list merge r's result at id 256 + r (the table skips looking results up); Llama 3 does
    not. Either way the table equals the one built by looking every result up."""
    for name in ("gpt-2", "qwen2", "llama-bpe"):
        tok = ours(name)
        looked_up = bpe.build_merge_table(tok.spec.model.merges, tok.model.index, tok.model.width, "x")
        assert tok.model.table == looked_up
        assert len(looked_up) == len(set(map(tuple, tok.spec.model.merges)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("\u2581etaoinshrdlu\n.,'é日")), min_size=1, max_size=400))
def test_heap_and_scan_loops_merge_alike_by_score(chars: list[str]) -> None:
    """The same for score-based merges (Llama 2's SentencePiece GGUF: highest score first, leftmost on ties)."""
    tok = ours("llama-spm")
    saved = bpe.SHORT_WORD
    try:
        bpe.SHORT_WORD = 0
        by_heap = bpe.merge_scored(list(chars), tok.model.scores)
        bpe.SHORT_WORD = 10**9
        by_scan = bpe.merge_scored(list(chars), tok.model.scores)
    finally:
        bpe.SHORT_WORD = saved
    assert by_heap == by_scan
    assert "".join(by_scan) == "".join(chars)
