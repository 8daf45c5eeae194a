"""Differential test: our ids == llama.cpp's own tokenizer, on the whole committed corpus.

llama.cpp runs vocab-only on the same GGUF (``Llama.tokenize(add_bos=False, special=...)``), for every
test vocabulary plus the two real models (SmolLM2, Gemma 3). 100 % exact is required.
"""

from __future__ import annotations

import pytest
from conftest import VOCABS, corpus, oracle, ours

import tokenizer
from tokenizer.spec import SpacePrefix

MODELS = [*VOCABS, "smollm2", "gemma3"]


def _differences(name: str, parse_special: bool) -> list[tuple[str, list[int], list[int]]]:
    tok, ref = ours(name), oracle(name)
    out = []
    for text in corpus():
        expected = ref.tokenize(text.encode("utf-8"), add_bos=False, special=parse_special)
        got = tok.encode(text, parse_special=parse_special)
        if got != expected:
            out.append((text, got, expected))
    return out


@pytest.mark.parametrize("name", MODELS)
def test_corpus_matches_llama_cpp(name: str) -> None:
    for parse_special in (False, True):
        diffs = _differences(name, parse_special)
        assert not diffs, (f"{name} parse_special={parse_special}: {len(diffs)} of {len(corpus())} differ; "
                           f"first: {diffs[0]!r}")


@pytest.mark.parametrize("name", ["smollm2", "gemma3", "llama-spm", "llama-bpe"])
def test_add_special_matches_llama_cpp(name: str) -> None:
    tok, ref = ours(name), oracle(name)
    for text in ["Hello world", "", " leading space", "<|im_start|>user\nhi<|im_end|>", "<start_of_turn>x"]:
        assert tok.encode(text, add_special=True, parse_special=True) == ref.tokenize(
            text.encode(), add_bos=True, special=True), text


@pytest.mark.parametrize("name", ["smollm2", "gemma3", "llama-spm", "gpt-2", "qwen2"])
def test_decode_matches_llama_cpp_detokenize(name: str) -> None:
    """Token bytes equal llama-cpp-python's piece-by-piece detokenize. That wrapper keeps the
    SentencePiece prefix space of the first token; llama.cpp's llama_detokenize (and we) drop it."""
    tok, ref = ours(name), oracle(name)
    drops_prefix = tok.spec.normalizer.space_prefix is SpacePrefix.EVERY_FRAGMENT
    for text in corpus()[:400]:
        ids = tok.encode(text)
        expected = ref.detokenize(ids, special=True)
        if drops_prefix and expected.startswith(b" "):
            expected = expected[1:]
        assert tok.decode_bytes(ids) == expected, text
        assert tok.decode(ids, skip_special=True) == expected.decode("utf-8", "replace"), text


@pytest.mark.parametrize("name", MODELS)
def test_end_of_generation_and_control_tokens_match_llama_cpp(name: str) -> None:
    """eos_ids is llama.cpp's end-of-generation set (EOS, EOT, EOM, the EOG texts, FIM pad/repo/sep);
    control tokens are the ones llama.cpp marks control (types from the file plus those it forces)."""
    import llama_cpp

    tok, ref = ours(name), oracle(name)
    vocab = llama_cpp.llama_model_get_vocab(ref.model)  # type: ignore[attr-defined]
    ids = range(tok.vocab_size)
    assert set(tok.eos_ids) == {i for i in ids if llama_cpp.llama_vocab_is_eog(vocab, i)}
    assert {i for i in ids if tok.token_type(i) == tokenizer.TokenType.CONTROL} == {
        i for i in ids if llama_cpp.llama_vocab_is_control(vocab, i)}


@pytest.mark.parametrize("name", ["llama-spm", "phi-3", "gemma3", "qwen2", "smollm2", "falcon", "deepseek-coder"])
def test_decoding_any_ids_equals_llama_detokenize(name: str) -> None:
    """Random id sequences (control tokens first, byte tokens, broken UTF-8) against llama_detokenize:
    skip_special=False renders control tokens as text (unparse_special), True leaves them out. Only a
    SentencePiece first token loses its prefix space, whatever follows. (Vocabularies whose llama.cpp
    decoding also cleans spaces before punctuation are left out: decode is the tokens' bytes, so that
    decode(encode(s)) == s.)"""
    import ctypes
    import random

    import llama_cpp

    tok, ref = ours(name), oracle(name)
    vocab = llama_cpp.llama_model_get_vocab(ref.model)  # type: ignore[attr-defined]
    buffer = ctypes.create_string_buffer(1 << 16)
    rng = random.Random(name)
    odd = [i for i in range(tok.vocab_size) if tok.token_type(i) != tokenizer.TokenType.NORMAL]  # control, byte ...
    for _ in range(1000):
        ids = [rng.choice(odd) if rng.random() < 0.3 else rng.randrange(tok.vocab_size) for _ in range(rng.randint(1, 5))]
        tokens = (llama_cpp.llama_token * len(ids))(*ids)
        for skip in (False, True):
            size = llama_cpp.llama_detokenize(vocab, tokens, len(ids), buffer, len(buffer), False, not skip)
            assert tok.decode_bytes(ids, skip_special=skip) == buffer.raw[:size], (ids, skip)


@pytest.mark.parametrize("name", MODELS)
def test_random_texts_with_special_tokens_match_llama_cpp(name: str) -> None:
    """Seeded random texts mixing special-token texts with spaces, no-break spaces, a literal "▁",
    newlines and emoji — where cutting special tokens, lstrip/rstrip and the SentencePiece prefix meet."""
    import random

    tok, ref = ours(name), oracle(name)
    specials = [t for t in tok.special_texts() if t][:40]
    alphabet = [*"ab ü\n\t  .1", "  ", "\u00a0", "😀", "é", "\u2581", "\u2581\u2581"]
    rng = random.Random(name)
    for _ in range(600):
        text = "".join(rng.choice(specials) if rng.random() < 0.3 else rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        for parse_special in (False, True):
            assert tok.encode(text, parse_special=parse_special) == ref.tokenize(
                text.encode(), add_bos=False, special=parse_special), (text, parse_special)
