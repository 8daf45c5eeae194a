"""Added-token options of tokenizer.json, id-exact with HF tokenizers: single_word, lstrip/rstrip (Unicode
spaces) and normalized (matched on the normalized text), on files made with HF's own API."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import corpus, hf_files
from tokenizers import AddedToken, normalizers
from tokenizers import Tokenizer as HFTokenizer

import tokenizer
from tokenizer.stages.specials import is_word_char

#: the cases of HF's own added_vocabulary tests, and more at the edges.
TEXTS = [
    "<mask> My name <mask> A<mask> <mask>ony <mask>",
    "<mask>, <mask>- \u25cc\u0330<mask>",
    "Hi <mask> there\t<mask>\t<mask>\u2000",
    "\u3000<mask>\u00a0x <mask>_ _<mask> 9<mask> \u2167<mask> \u00b2<mask>",
    "I say HELLO and Hello, hello! hellohello",
    "ZEBRA Zebra zebra Zebras",
    "e\u0301cole, \u00e9cole, \u00c9COLE, Ecole",
    "[SEP]x [SEP] x[SEP] [SEP]",
    "<MASK> <Mask> <mask>",
    "",
    " ",
    "<mask>",
]
ADDED = [AddedToken("<mask>", single_word=True, lstrip=True, rstrip=True, normalized=False),
         AddedToken("hello", normalized=True), AddedToken("Zebra", normalized=False),
         AddedToken("\u00e9cole", normalized=True), AddedToken("ony", single_word=True, normalized=True)]


@pytest.fixture(scope="module", params=["trained-qwen2", "trained-spm-bytefallback"])
def pair(request, tmp_path_factory: pytest.TempPathFactory):
    hf = HFTokenizer.from_file(str(hf_files.out_dir() / request.param / "tokenizer.json"))
    hf.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    hf.add_tokens(ADDED)
    hf.add_special_tokens([AddedToken("[SEP]", single_word=True, special=True)])
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    hf.save(str(path))
    return tokenizer.load(path), hf


def test_the_options_are_read(pair) -> None:
    mine, hf = pair
    ids = {text: mine.token_to_id(text) for text in ("<mask>", "hello", "Zebra", "\u00e9cole", "ony", "[SEP]")}
    assert mine.spec.added.single_word_ids == {ids["<mask>"], ids["ony"], ids["[SEP]"]}
    assert mine.spec.added.normalized_ids == {ids["hello"], ids["\u00e9cole"], ids["ony"]}
    assert mine.spec.added.lstrip_ids == mine.spec.added.rstrip_ids == {ids["<mask>"]}
    assert mine.spec.normalizer.forms == ("NFC", "lowercase")


@pytest.mark.parametrize("text", TEXTS)
def test_options_equal_hf_tokenizers(pair, text: str) -> None:
    mine, hf = pair
    assert mine.encode(text, parse_special=True) == hf.encode(text, add_special_tokens=False).ids


def test_options_equal_hf_tokenizers_inside_the_corpus(pair) -> None:
    mine, hf = pair
    rng = random.Random(7)
    pieces = ["<mask>", " <mask> ", "hello", "HELLO", "Zebra", "zebra", "\u00e9cole", "E\u0301COLE", "ony", "[SEP]", " [SEP] "]
    for text in corpus()[::5]:
        cut = rng.randrange(len(text) + 1)
        text = text[:cut] + rng.choice(pieces) + text[cut:]
        assert mine.encode(text, parse_special=True) == hf.encode(text, add_special_tokens=False).ids, text


@pytest.mark.stages  # the literal encoder is the chat package's one call into the tokenizer's insides
def test_normalized_tokens_are_cut_in_literal_chat_text_unless_protected(pair) -> None:
    mine, _ = pair
    hello = mine.token_to_id("hello")
    assert hello in mine._literal_encoder(())("Say HELLO")
    assert hello not in mine._literal_encoder({hello})("Say HELLO")


@pytest.mark.parametrize(("ch", "word"), [("a", True), ("\u00e9", True), ("\u0330", True), ("_", True), ("9", True),
                                          ("\u2167", True), ("\u00b2", False), ("-", False), (" ", False),
                                          ("\u200d", True), ("\u3000", False)])
def test_word_characters_are_rust_regex_word_characters(ch: str, word: bool) -> None:
    assert is_word_char(ch) is word


def test_gguf_specials_keep_llama_cpp_rules(tmp_path: Path) -> None:
    """The GGUF path strips only C isspace() around lstrip/rstrip tokens and has no single_word."""
    from conftest import ours

    phi3 = ours("phi-3")
    assert not phi3.spec.added.unicode_strip and not phi3.spec.added.single_word_ids and not phi3.spec.added.normalized_ids
    assert phi3.encode("<|end|>\u3000x", parse_special=True) != phi3.encode("<|end|>x", parse_special=True)
    assert phi3.encode("<|end|>\t x", parse_special=True) == phi3.encode("<|end|>x", parse_special=True)


def test_plain_cutter_cuts_as_the_general_walk() -> None:
    """A cutter whose tokens strip nothing cuts by one regex split; it must cut exactly as the general
    walk does (longest match first: "\n\n" before "\n")."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tokenizer.stages.specials import SpecialCutter

    specials = [("\n", 5), ("\n\n", 6), ("<s>", 1), ("  ", 7)]
    cutter = SpecialCutter(specials, frozenset(), frozenset())
    walk = SpecialCutter(specials, frozenset(), frozenset())
    walk.__dict__["plain"] = False  # the general walk, as for tokens with lstrip/rstrip/single_word
    assert cutter.plain
    assert list(cutter.split("a\n\n\nb<s>")) == [("a", None), ("\n\n", 6), ("\n", 5), ("b", None), ("<s>", 1)]
    assert not SpecialCutter([("<s>", 1)], frozenset({1}), frozenset()).plain

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet="ab \n<s>", max_size=30))
    def same(text: str) -> None:
        assert list(cutter.split(text)) == list(walk.split(text))

    same()
