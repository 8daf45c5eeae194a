"""Round trips: decode(encode(s)) == s for byte-level vocabularies, on the corpus and on generated text."""

from __future__ import annotations

import functools

import pytest
from conftest import BYTE_LEVEL_VOCABS, corpus, ours
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenizer import ModelKind


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


def _every_loader_kind():
    """GGUF byte-level and SentencePiece, tokenizer.json byte-level and SentencePiece style."""
    from conftest import hf_files

    import tokenizer

    return [ours("qwen2"), ours("gemma3"), tokenizer.load(hf_files.out_dir() / "trained-llama3"),
            tokenizer.load(hf_files.out_dir() / "trained-spm-bytefallback")]


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60), st.booleans(), st.booleans())
def test_every_loader_kind_encodes_any_str_lone_surrogates_included(text: str, add: bool, parse: bool) -> None:
    for tok in _LOADERS():
        ids = tok.encode(text, add_special=add, parse_special=parse)
        assert all(0 <= i < tok.vocab_size for i in ids)
        if tok.kind is ModelKind.BYTE_LEVEL and not parse and not add:
            # lone surrogates (not Unicode) are encoded as U+FFFD: documented
            assert tok.decode(ids) == "".join("\ufffd" if 0xD800 <= ord(c) < 0xE000 else c for c in text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**9), max_size=40), st.booleans())
def test_decoding_any_ids_in_range_never_raises(raw: list[int], skip: bool) -> None:
    for tok in _LOADERS():
        ids = [i % tok.vocab_size for i in raw]
        assert isinstance(tok.decode(ids, skip_special=skip), str)
        assert isinstance(tok.decode_bytes(ids), bytes)


_LOADERS = functools.lru_cache(maxsize=1)(_every_loader_kind)


def _stream_kinds():
    """Every decode rule a stream must keep: byte-level, llama.cpp's first-space rule (SentencePiece GGUF),
    HF's Strip and ByteFallback decoders (tokenizer.json)."""
    from conftest import hf_files

    import tokenizer

    return [*_LOADERS(), ours("llama-spm"), tokenizer.load(hf_files.out_dir() / "llama-spm")]


_STREAM_KINDS = functools.lru_cache(maxsize=1)(_stream_kinds)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**9), max_size=40), st.booleans())
def test_a_stream_gives_exactly_the_decode_of_what_it_was_fed(raw: list[int], skip: bool) -> None:
    for tok in _STREAM_KINDS():
        ids = [i % tok.vocab_size for i in raw]
        stream = tok.stream(skip_special=skip)
        pieces = [stream.feed(i) for i in ids]
        assert "".join(pieces) + stream.finish() == tok.decode(ids, skip_special=skip), (tok.spec.source, ids)


def test_a_stream_holds_a_character_until_it_is_whole() -> None:
    tok = ours("llama-spm")  # "👋" is four byte tokens here
    ids = tok.encode("Hi 👋!")
    stream = tok.stream()
    out = [stream.feed(i) for i in ids]
    assert "".join(out) == "Hi 👋!" and "👋" in out and not any("\ufffd" in piece for piece in out)
