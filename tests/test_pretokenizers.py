"""Pre-split shortcuts must split exactly like the plain rules they stand for."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenizer.stages import llama_regex as lr
from tokenizer.stages import pretokenizers as pt

pytestmark = pytest.mark.offline

TEXT = st.text(alphabet=st.sampled_from(list("ab Z'1 2\t\n\r.,!é中😀\u3000\u00a0") + ["\U0001d400", "\u0301"]), max_size=60)


@pytest.mark.stages
@settings(max_examples=400, deadline=None)
@given(st.text(max_size=30))
def test_astral_check_by_size_equals_max(text: str) -> None:
    assert lr._wide_by_size(text) == lr._wide_by_max(text)


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_fused_starcoder_split_equals_the_sequence(text: str) -> None:
    row = pt.PRE_SPLITS["starcoder"]
    assert pt.splitter_for(row)(text) == pt.compile_split(row.patterns)(text)


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_tiled_class_patterns_equal_the_gap_aware_split(text: str) -> None:
    for pattern in (r"\p{N}", r"\p{N}+", r"[\r\n]", r"[\p{P}\$\+<=>\^~\|]+"):
        plain = lr.split_one(re.compile(lr.translate(pattern)), lr.text_rewrite(pattern))
        assert pt.compile_split((pattern,))(text) == plain(text)
        assert "".join(plain(text)) == text


def test_tiling_only_touches_single_class_patterns() -> None:
    assert lr.tiled(r"\p{N}") == r"\p{N}|[^\p{N}]+"
    assert lr.tiled(r"[\r\n]") == r"[\r\n]|[^\r\n]+"
    assert lr.tiled("[0-9][0-9][0-9]") == "[0-9][0-9][0-9]"
    assert lr.tiled(r"[^\n]+|[\n]+") == r"[^\n]+|[\n]+"


def test_gpt2_example() -> None:
    assert pt.compile_split(pt.PRE_SPLITS["gpt-2"].patterns)("I'm 42!") == ["I", "'m", " 42", "!"]


def _twinned_patterns() -> list[str]:
    """Every table pattern that has at least one alternative with a possessive twin."""
    patterns = {p for row in pt.PRE_SPLITS.values() for p in row.patterns + ((row.fused,) if row.fused else ())}
    return sorted(p for p in patterns if pt.with_possessive_twins(p) != p)


@pytest.mark.whitebox
def test_possessive_twins_reach_the_busy_families() -> None:
    twinned = _twinned_patterns()
    if not pt._POSSESSIVE_TWINS:  # Python 3.10: no possessive quantifiers, nothing is rewritten
        assert twinned == []
        return
    for name in ("gpt-2", "llama-bpe", "qwen2", "starcoder"):
        row = pt.PRE_SPLITS[name]
        assert ((row.fused,) if row.fused else row.patterns)[0] in twinned, name
    assert pt.with_possessive_twins(r"'s| ?\p{L}+|\s+") == r"'s| ?+\p{L}++|\s+"
    # only whole top-level alternatives: inside a group, or followed by more pattern, nothing changes
    assert pt.with_possessive_twins(r"(?: ?\p{L}+)|x") == r"(?: ?\p{L}+)|x"
    assert pt.with_possessive_twins(r" ?\p{L}+a|x") == r" ?\p{L}+a|x"


def test_top_level_alternatives() -> None:
    assert pt.top_level_alternatives(r"(?:a|b)c|[|]d|\|e") == ["(?:a|b)c", "[|]d", r"\|e"]
    assert pt.top_level_alternatives("a||b") is None  # an empty alternative
    assert pt.top_level_alternatives("(a(b)|c)") is None  # nested groups: not parsed


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_possessive_twins_match_exactly_what_the_plain_patterns_match(text: str) -> None:
    for pattern in _twinned_patterns():
        plain = re.compile(lr.translate(pattern)).findall(text)
        assert re.compile(lr.translate(pt.with_possessive_twins(pattern))).findall(text) == plain, pattern


def _chunks_by_rule(text: str, blocked: set[str]) -> list[str]:
    """The SentencePiece chunk rule, spelled out: cut before each "▁" that follows a character that is
    neither "▁" nor blocked."""
    chunks, start = [], 0
    for at in range(1, len(text)):
        if text[at] == "\u2581" and text[at - 1] != "\u2581" and text[at - 1] not in blocked:
            chunks.append(text[start:at])
            start = at
    return chunks + [text[start:]] if text else chunks


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab\u2581\u2581]^\\-c\u4e2d\U0001F600")), max_size=40))
def test_sentencepiece_chunks_follow_the_rule(text: str) -> None:
    vocabularies = {  # tokens -> the characters they block (a token holding "x▁" past its start)
        ("\u2581a", "b", "\u2581\u2581"): set(),
        ("a\u2581b", "\u2581\u2581", "x"): {"a"},
        ("]\u2581", "^\u2581\u2581", "\\\u2581", "-\u2581", "\u4e2d\u2581"): set("]^\\-\u4e2d"),
    }
    for tokens, blocked in vocabularies.items():
        assert pt.sentencepiece_splitter(list(tokens), None)(text) == _chunks_by_rule(text, blocked), tokens
