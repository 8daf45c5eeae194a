"""Tokenizer(spec) rejections, the merge loop on a worked example, decoding and streaming rules (no download)."""

from __future__ import annotations

import pytest

from tokenizer import ModelKind, Tokenizer, TokenizerError, TokenizerSpec, TokenType
from tokenizer.spec import Model, Normalizer, PostProcess, PreSplit, SpacePrefix, Vocabulary
from tokenizer.stages.byte_alphabet import BYTE_TO_CHAR

pytestmark = pytest.mark.offline


def byte_vocab(extra: list[str], merges: list[tuple[str, str]]) -> TokenizerSpec:
    """The 256 byte symbols (id = byte), then extra tokens; "<|end|>" is a control token."""
    tokens = [*BYTE_TO_CHAR, *extra]
    types = [TokenType.CONTROL if t.startswith("<|") else TokenType.NORMAL for t in tokens]
    return TokenizerSpec(Vocabulary(tokens, types), Model(ModelKind.BYTE_LEVEL, merges), pre_split=PreSplit("gpt-2"),
                         source="test.gguf")


def test_worked_example_abcab() -> None:
    tok = Tokenizer(byte_vocab(["ab", "abc", "<|end|>"], [("a", "b"), ("ab", "c")]))
    assert tok.encode("abcab") == [257, 256]
    assert tok.decode([257, 256]) == "abcab"
    assert tok.encode("abc<|end|>", parse_special=True) == [257, 258]
    assert tok.encode("abc<|end|>", parse_special=False) == [257, 60, 124, 101, 110, 100, 124, 62]


def test_long_word_uses_heap_and_matches_short_loop() -> None:
    tok = Tokenizer(byte_vocab(["ab", "abc", "<|end|>"], [("a", "b"), ("ab", "c")]))
    assert tok.encode("abc" * 1000) == [257] * 1000


@pytest.mark.parametrize(("part", "change", "message"), [
    ("vocab", dict(tokens=[]), "the vocabulary is empty"),
    ("vocab", dict(types=[TokenType.NORMAL]), "token types list has 1 entries for 258 tokens"),
    ("vocab", dict(bos_id=9999), "bos_id=9999 is out of range"),
    ("vocab", dict(eos_id=-1), "eos_id=-1 is out of range"),
    ("post", dict(add_bos=True), "add_bos is set but there is no BOS token id"),
    ("post", dict(add_eos=True), "add_eos is set but there is no EOS token id"),
    ("post", dict(prefix=(1, 9999)), "special token id 9999 is out of range"),
    ("vocab", dict(extra_eos_ids=(-2,)), "special token id -2 is out of range"),
])
def test_create_rejects(part: str, change: dict, message: str) -> None:
    spec = byte_vocab(["ab", "abc"], [("a", "b")])
    for key, value in change.items():
        setattr(getattr(spec, part), key, value)
    with pytest.raises(TokenizerError, match=message) as info:
        Tokenizer(spec)
    assert str(info.value).startswith("test.gguf: ")


@pytest.mark.parametrize(("merge", "message"), [
    (("a", "zz"), "merge #1 \\('a' 'zz'\\): right half 'zz' is not in the vocabulary"),
    (("q", "b"), "merge #1 \\('q' 'b'\\): result 'qb' is not in the vocabulary"),
    (("xy", "b"), "merge #1 \\('xy' 'b'\\): left half 'xy' is not in the vocabulary"),
])
def test_create_rejects_bad_merges(merge: tuple[str, str], message: str) -> None:
    with pytest.raises(TokenizerError, match=message):
        Tokenizer(byte_vocab(["ab"], [("a", "b"), merge]))


def test_results_in_merge_order_still_check_the_halves() -> None:
    """Results listed at ids 256, 257 in merge order take the lookup-free path for results; halves are
    still looked up, so a missing one is named."""
    with pytest.raises(TokenizerError, match="merge #1 \\('zz' 'b'\\): left half 'zz' is not in the vocabulary"):
        Tokenizer(byte_vocab(["ab", "zzb"], [("a", "b"), ("zz", "b")]))


def test_duplicate_token_text_merges_to_the_later_id() -> None:
    """"abc" at 257 and again at 258: the index (as llama.cpp's) answers 258, and so must the merge table,
    though the results look listed in merge order from id 256 ("ab", "abc")."""
    tok = Tokenizer(byte_vocab(["ab", "abc", "abc"], [("a", "b"), ("ab", "c")]))
    assert tok.encode("abc") == [258]


def test_score_based_sentencepiece_needs_scores() -> None:
    spec = TokenizerSpec(Vocabulary(["<unk>", "a"], scores=[0.0]), Model(ModelKind.SENTENCEPIECE), source="spm.gguf")
    with pytest.raises(TokenizerError, match="one score per token: 1 scores for 2 tokens"):
        Tokenizer(spec)


def test_missing_bytes_are_dropped_or_unk() -> None:
    tokens = [ch for ch in BYTE_TO_CHAR if ch not in (BYTE_TO_CHAR[0], BYTE_TO_CHAR[1])] + ["<unk>"]
    types = [TokenType.NORMAL] * (len(tokens) - 1) + [TokenType.UNKNOWN]
    dropping = Tokenizer(TokenizerSpec(Vocabulary(tokens, types), Model(ModelKind.BYTE_LEVEL, []), pre_split=PreSplit("gpt-2")))
    assert dropping.decode(dropping.encode("a\x00b\x01")) == "ab"
    unk = Tokenizer(TokenizerSpec(Vocabulary(tokens, types, unk_id=len(tokens) - 1),
                                  Model(ModelKind.BYTE_LEVEL, [], unk_for_missing_bytes=True), pre_split=PreSplit("gpt-2")))
    assert unk.encode("\x00") == [len(tokens) - 1]


def spm_tokenizer(byte_fallback: bool = True) -> Tokenizer:
    tokens = ["<unk>", "<s>", "</s>", "\u2581", "h", "i", "\u2581h", "\u2581hi", "<0x0A>", "<0xF0>", "<0x9F>",
              "<0x98>", "<0x80>"]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.NORMAL] * 5 + [TokenType.BYTE] * 5
    scores = [0.0, 0.0, 0.0, -1.0, -2.0, -2.0, -1.5, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    return Tokenizer(TokenizerSpec(Vocabulary(tokens, types, scores, bos_id=1, eos_id=2, unk_id=0),
                                   Model(ModelKind.SENTENCEPIECE, byte_fallback=byte_fallback),
                                   normalizer=Normalizer(space_prefix=SpacePrefix.EVERY_FRAGMENT),
                                   post=PostProcess(add_bos=True)))


def test_sentencepiece_prefix_space_byte_fallback_and_decode() -> None:
    tok = spm_tokenizer()
    assert tok.encode("hi") == [7]                      # "▁hi": the prefix space is added
    assert tok.encode("hi\n") == [7, 8]                 # newline falls back to <0x0A>
    assert tok.encode("😀") == [3, 9, 10, 11, 12]       # "▁" then the emoji's four bytes
    assert tok.encode("hi</s>hi", parse_special=True) == [7, 2, 7]  # a space again after a special
    assert tok.encode("hi", add_special=True) == [1, 7]
    assert tok.decode([7, 7]) == "hi hi"                 # the first token loses its prefix space ...
    assert tok.decode([1, 7, 7]) == "<s> hi hi"          # ... only if it is first (llama_detokenize)
    assert tok.decode([1, 7], skip_special=True) == " hi"
    assert tok.decode_bytes([9, 10]) == b"\xf0\x9f"
    assert tok.decode([9, 10]) == "\ufffd"


def test_decode_out_of_range() -> None:
    tok = spm_tokenizer()
    with pytest.raises(TokenizerError, match="token id 13 is out of range"):
        tok.decode([7, 13])
    with pytest.raises(TokenizerError, match="token id -1 is out of range"):
        tok.token_bytes(-1)


def test_lone_surrogates_become_replacement_character() -> None:
    tok = Tokenizer(byte_vocab([], []))
    assert tok.encode("a\ud800b") == tok.encode("a\ufffdb") == [97, 0xEF, 0xBF, 0xBD, 98]


def test_sentencepiece_without_byte_fallback_uses_unk() -> None:
    assert spm_tokenizer(byte_fallback=False).encode("hi\n") == [7, 0]


def test_a_stream_holds_an_unfinished_character_and_skips_control_tokens_on_request() -> None:
    tok = Tokenizer(byte_vocab(["ab", "abc", "<|end|>"], [("a", "b"), ("ab", "c")]))
    wave = list("👋".encode())  # four byte tokens (id = byte)
    stream = tok.stream()
    assert [stream.feed(i) for i in [257, *wave, 258]] == ["abc", "", "", "", "👋", "<|end|>"]
    assert stream.finish() == ""
    stream = tok.stream(skip_special=True)
    assert [stream.feed(i) for i in [258, 97, *wave[:2]]] == ["", "a", "", ""]
    assert stream.finish() == "\ufffd"  # an unfinished character at the end is replaced, never dropped
    assert tok.decode([258, 97, *wave[:2]], skip_special=True) == "a\ufffd"
