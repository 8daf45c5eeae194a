"""White-box, accelerator: the merge loops in C (tokenizer/accel/_cmerge*.c) against the reference loops of
stages/bpe.py, which define them.

Every other test runs the C loops (pip install builds them); these hold them to the Python ones id for id:
whole tokenizers on the committed corpus, and the two C types alone on generated vocabularies, scores
(NaN and infinities too) and merge tables, plus every way of calling them wrong.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import replace

import pytest
from conftest import VOCABS, corpus, hf_files, model_path
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer
from tokenizer.accel import native
from tokenizer.core import Tokenizer
from tokenizer.speedups import REFERENCE
from tokenizer.stages import bpe

pytestmark = pytest.mark.accel

#: beyond the corpus: long chunks (the Python heap loop takes them), characters no vocabulary has, byte fallback
EXTRA = ["a" * 127, "a" * 128, "a" * 129, "x" * 5000, "\U0001f600\U0001f9ea\u0fff\ufffd", "\ud800 lone surrogate",
         "\t\n\r\x00\x7f", "".join(map(chr, range(0x2500, 0x2600))), "▁▁▁ ▁" * 40]


def _python_twin(tok: Tokenizer) -> Tokenizer:
    """The same tokenizer on the reference path alone: its texts a list, its index a dict, every word
    through stages/bpe.py's loops."""
    vocab = tok.spec.vocab
    plain = replace(vocab, tokens=list(vocab.tokens), types=None if vocab.types is None else list(vocab.types),
                    scores=None if vocab.scores is None else list(vocab.scores))
    twin = Tokenizer(replace(tok.spec, vocab=plain), REFERENCE)
    assert type(twin.spec.vocab.tokens) is list and type(twin.model.index) is dict and twin.model.ranked is None
    return twin


def _assert_alike(tok: Tokenizer) -> None:
    twin = _python_twin(tok)
    for text in [*corpus(), *EXTRA]:
        assert tok.encode(text) == twin.encode(text), text
    native = tok.model.__dict__.get("scored") or tok.model.__dict__.get("ranked")
    assert native is not None, "the C loop did not run"


def test_the_c_loops_are_built() -> None:
    """README's install compiles them. Were that to fail silently, the other tests would pass on the
    Python loops alone, and the speed the README reports would be gone: so this one fails."""
    assert native.ScoredVocab is not None and native.RankedTable is not None and native.TokenTable is not None
    assert native.wanted()


@pytest.mark.parametrize("name", [*VOCABS, "gemma3", "smollm2"])
def test_gguf_vocabularies_encode_alike(name: str) -> None:
    _assert_alike(tokenizer.load(model_path(name)))


@pytest.mark.parametrize("name", hf_files.NAMES)
def test_tokenizer_json_files_encode_alike(name: str) -> None:
    _assert_alike(tokenizer.load(hf_files.out_dir() / name / "tokenizer.json"))


def test_turned_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RML_CHAT_NATIVE", "off")
    assert native.scored_vocab(["a"], [0.0]) is None
    assert native.ranked_table({}, 2, {"a": 0}) is None
    monkeypatch.delenv("RML_CHAT_NATIVE")
    assert native.scored_vocab(["a"], [0.0]) is not None


# ----- ScoredVocab alone ---------------------------------------------------------------------------

_SCORES = st.one_of(st.floats(-50, 50), st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0]))
_TEXTS = st.text(alphabet="ab▁é\U0001f600\ud800", min_size=1, max_size=4)


def _scored_in_python(tokens: list[str], scores: list[float], chunk: str) -> list[int]:
    vocab = dict(zip(tokens, range(len(tokens))))
    pieces = bpe.merge_scored(list(chunk), dict(zip(tokens, scores)))
    return [vocab.get(piece, -1 - ord(piece[0])) for piece in pieces]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_TEXTS, _SCORES), min_size=1, max_size=40),
       st.text(alphabet="ab▁é\U0001f600\ud800c", max_size=60))
def test_scored_vocab_merges_as_python(entries: list[tuple[str, float]], chunk: str) -> None:
    """Duplicated texts (the later wins), NaN and infinite scores, characters that are no token."""
    tokens, scores = [t for t, _ in entries], [s for _, s in entries]
    scored = native.ScoredVocab(native.TokenTable(tokens), scores)
    assert scored.encode(chunk) == _scored_in_python(tokens, scores, chunk)
    prices = dict(zip(tokens, scores))  # get(): merge_scored's table for long chunks
    for text in {*tokens, chunk, chunk[:2]}:
        assert _same_float(scored.get(text, -math.inf), prices.get(text, -math.inf)), text


def _same_float(a: float | None, b: float | None) -> bool:
    return a == b or (a != a and b != b)  # NaN is itself


def test_scored_vocab_on_a_real_vocabulary_and_limits() -> None:
    tok = tokenizer.load(model_path("llama-spm"))
    scored = native.ScoredVocab(tok.spec.vocab.tokens, tok.spec.vocab.scores)  # packed, and an array('d')
    tokens, scores = list(tok.spec.vocab.tokens), list(tok.spec.vocab.scores)
    for chunk in ["▁hello▁world", "▁" * 128, "▁ÿ日本語\U0001f600", ""]:
        assert scored.encode(chunk) == _scored_in_python(tokens, scores, chunk)
    assert scored.encode("▁" * 129) is None  # the Python heap loop's
    assert scored.encode("▁hello") == [tok.token_to_id("▁hello")]


def test_scored_vocab_refuses_bad_input() -> None:
    with pytest.raises(TypeError):
        native.TokenTable(["a", 1])
    with pytest.raises(TypeError):
        native.ScoredVocab(["a", "b"], [0.0, 0.0])  # a TokenTable, not a list
    table = native.TokenTable(["a", "b"])
    for scores in ([0.0], array("d", [0.0]), array("d", [0.0] * 3)):
        with pytest.raises(ValueError, match="one score per token"):
            native.ScoredVocab(table, scores)
    for score in ("1.5", 1, True):  # exact floats only: no __float__ runs while the table is filled
        with pytest.raises(TypeError, match="floats"):
            native.ScoredVocab(native.TokenTable(["a"]), [score])
    with pytest.raises(TypeError, match="doubles"):
        native.ScoredVocab(table, array("f", [0.0, 0.0]))
    assert native.scored_vocab(["a"], ["1.5"]) is None  # the Python loop takes such scores (float("1.5"))
    assert native.scored_vocab(("a",), [0.0]) is None
    with pytest.raises(TypeError):
        native.ScoredVocab(native.TokenTable(["a"]), [0.0]).encode(b"a")
    with pytest.raises(TypeError):
        native.ScoredVocab.__new__(native.ScoredVocab).encode("a")  # never initialised: an error, not a crash
    assert native.TokenTable.__new__(native.TokenTable).get("a") is None  # an empty table, not a crash


# ----- RankedTable alone ---------------------------------------------------------------------------

WIDTH = 9  # ids 0..7 are tokens, 8 (= width - 1) is the missing unit


@st.composite
def _tables(draw) -> dict[int, int]:
    pairs = draw(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 7)), max_size=30))
    table: dict[int, int] = {}
    for rank, (left, right, merged) in enumerate(pairs):
        table.setdefault(left * WIDTH + right, rank * WIDTH + merged)
    return table


@settings(max_examples=400, deadline=None)
@given(_tables(), st.lists(st.integers(0, 8), max_size=140))
def test_ranked_table_merges_as_python(table: dict[int, int], ids: list[int]) -> None:
    merged = native.RankedTable(table, WIDTH).merge(list(ids))
    if len(ids) > bpe.SHORT_WORD:
        assert merged is None
    else:
        assert merged == bpe.merge_ranked(list(ids), table, WIDTH)


@settings(max_examples=300, deadline=None)
@given(_tables(), st.text(alphabet="abcdefgz\U0001f600\ud800", max_size=60))
def test_ranked_table_encodes_as_python(table: dict[int, int], chunk: str) -> None:
    """Characters a..g are tokens 0..6 (7 is a token no character spells); z, emoji and surrogate are none."""
    vocab = {ch: i for i, ch in enumerate("abcdefg")} | {"ab": 7}
    units = [vocab.get(ch, WIDTH - 1) for ch in chunk]
    expected = bpe.merge_ranked(list(units), table, WIDTH)
    lone = iter([ch for ch, unit in zip(chunk, units) if unit == WIDTH - 1])
    expected = [-1 - ord(next(lone)) if i == WIDTH - 1 else i for i in expected]
    assert native.RankedTable(table, WIDTH, vocab).encode(chunk) == expected
    packed = native.TokenTable([*"abcdefg", "ab"]).index()  # the packed index reads the same
    assert native.RankedTable(table, WIDTH, packed).encode(chunk) == expected


def test_ranked_table_cache_fills_and_starts_again() -> None:
    """Each pair is asked of the dict once and kept; past 2M pairs the cache starts again empty. A merge
    after that still finds its pair."""
    width = 1 << 22
    table = {5 * width + 6: 0 * width + 7}
    ranked = native.RankedTable(table, width)
    for start in range(0, 2_200_000, 120):  # 2.2M pairs, each new: one start-again on the way
        assert ranked.merge(list(range(start + 10, start + 131))) == list(range(start + 10, start + 131))
        assert ranked.merge([5, 6]) == [7]


def test_ranked_table_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="width"):
        native.RankedTable({}, 0)
    with pytest.raises(TypeError):
        native.RankedTable([], 3)
    with pytest.raises(TypeError):
        native.RankedTable({}, 3, ["a"])
    with pytest.raises(TypeError):
        native.RankedTable({}, 3, native.TokenTable(["a"]))  # its index(), not the table
    with pytest.raises(ValueError, match="out of range"):
        native.RankedTable({}, 2, native.TokenTable(["x", "y", "a"]).index()).encode("a")
    with pytest.raises(ValueError, match="out of range"):
        native.RankedTable({1: -5}, 3).merge([0, 1])
    with pytest.raises(TypeError):
        native.RankedTable({}, 3).merge([0, "a"])
    with pytest.raises(TypeError, match="ints"):
        native.RankedTable({1: 2.0}, 3).merge([0, 1])
    with pytest.raises(TypeError, match="ints"):
        native.RankedTable({}, 3, {"a": 1.0}).encode("a")
    with pytest.raises(TypeError):
        native.RankedTable({}, 3).encode("ab")  # made without a vocabulary
    with pytest.raises(ValueError, match="out of range"):
        native.RankedTable({}, 3, {"a": 7}).encode("a")
    with pytest.raises(TypeError):
        native.RankedTable.__new__(native.RankedTable).merge([0])  # never initialised: an error, not a crash
    assert native.RankedTable({}, 3).merge([0, 3]) is None  # not an id of this table: the Python loop decides
    assert native.RankedTable({}, 3).merge([-1]) is None
    assert native.ranked_table({}, 3, {"a": 0}) is not None


def test_fallback_ids_are_kept_for_a_bounded_number_of_characters() -> None:
    """Byte-fallback ids are kept per character, up to 4,096 characters (then the store starts again):
    6,000 Hangul syllables, most of them no Llama 2 token, give the Python twin's ids."""
    tok = tokenizer.load(model_path("llama-spm"))
    text = " ".join(chr(c) for c in range(0xAC00, 0xAC00 + 6000))
    assert tok.encode(text) == _python_twin(tok).encode(text)
    assert 0 < len(tok.model.fallback.known) <= 4096


# ----- TokenTable alone ----------------------------------------------------------------------------

_WORDS = st.text(alphabet="ab▁é\U0001f600\ud800\udc80\x00", max_size=5)


@settings(max_examples=400, deadline=None)
@given(st.lists(_WORDS, min_size=0, max_size=60), st.lists(_WORDS, max_size=10))
def test_token_table_reads_as_the_list_and_its_dict(tokens: list[str], others: list[str]) -> None:
    """Duplicates (the later id wins), the empty text, lone surrogates, astral characters, NUL."""
    packed, index = native.packed_tokens(tokens), dict(zip(tokens, range(len(tokens))))
    assert packed == tokens and list(packed) == tokens and len(packed) == len(tokens)
    assert [packed[i] for i in range(-len(tokens), len(tokens))] == tokens + tokens
    assert packed[1:-1:2] == tokens[1:-1:2] and packed[::-1] == tokens[::-1]
    view = packed.index()
    assert len(view) == len(index)
    for text in [*tokens, *others]:
        assert view.get(text) == index.get(text) and view.get(text, -7) == index.get(text, -7)
        assert (text in view) == (text in index) == (text in packed)
        if text in index:
            assert view[text] == index[text]
        else:
            with pytest.raises(KeyError):
                view[text]
    assert view.get(3) is None and 3 not in view  # not a str: never a token
    with pytest.raises(IndexError):
        packed[len(tokens)]


def test_token_table_on_gemma3_and_its_memory() -> None:
    """Gemma 3's 262,144 texts and index: the same as the list and dict they replace, in under 6 MB (the
    list's str objects and the dict took 35 MB: docs/performance.md, "Memory")."""
    tok = tokenizer.load(model_path("gemma3"))
    packed = tok.spec.vocab.tokens
    assert isinstance(packed, native.PackedTokens) and tok.vocab is packed
    plain = list(packed)
    assert len(plain) == 262_144 and native.packed_tokens(plain) == packed
    index = dict(zip(plain, range(len(plain))))
    assert all(tok.token_to_id(text) == i for text, i in index.items())
    assert packed.nbytes() < 6 * 2**20
