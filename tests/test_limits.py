"""Hostile sizes: a 1 MB word with no split point, 100k emoji, a long run of special-token texts.
They must come out right (round trip, ids in range); scripts/limits.py measures their scaling."""

from __future__ import annotations

import random

from conftest import ours


def test_a_one_megabyte_word_with_no_split_point() -> None:
    rng = random.Random(0)
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1_000_000))
    tok = ours("llama-bpe")
    ids = tok.encode(word)
    assert tok.decode(ids) == word and len(ids) < len(word) // 1.5


def test_100k_emoji_and_their_sentencepiece_twin() -> None:
    text = "👋🏽" * 100_000
    for name in ("qwen2", "gemma3"):
        tok = ours(name)
        ids = tok.encode(text)
        assert tok.decode(ids) == text


def test_a_long_run_of_special_token_texts_is_cut_in_one_pass() -> None:
    tok = ours("smollm2")
    end = tok.token_to_id("<|im_end|>")
    ids = tok.encode("<|im_end|>x" * 50_000, parse_special=True)
    assert ids.count(end) == 50_000 and len(ids) == 100_000
