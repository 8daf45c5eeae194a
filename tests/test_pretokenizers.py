"""Pre-split shortcuts must split exactly like the plain rules they stand for."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenizer import llama_regex as lr
from tokenizer import pretokenizers as pt

TEXT = st.text(alphabet=st.sampled_from(list("ab Z'1 2\t\n\r.,!é中😀\u3000\u00a0") + ["\U0001d400", "\u0301"]), max_size=60)


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
