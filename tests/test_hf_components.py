"""tokenizer.json components one by one, against HF ``tokenizers`` itself.

Two trained files of the test data (byte-level ``trained-gpt2``, SentencePiece-style
``trained-spm-bytefallback``) get their normalizer and pre-tokenizer swapped with HF's own API, one
configuration per case: ByteLevel's two options, Split with every behaviour (inverted or not, regex or
string pattern), Digits, each normalizer, Metaspace's three prepend schemes with and without split,
the Prepend/Replace normalizers. Our ids and decoded text must equal HF's on a slice of the corpus.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import corpus, hf_files
from tokenizers import Regex
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import normalizers as nm
from tokenizers import pre_tokenizers as pt
from tokenizers import processors as pp

import tokenizer

BYTES, SPM = "trained-gpt2", "trained-spm-bytefallback"
EDGES = ["  lead", "trail  ", "a  b", "x\n\n y", "Hello World", "ÉCOLE ﬁ Ǆ ① ½", "e\u0301", "1234567 12", "",
         "<|im_start|>x", "a<0xE5>b", "camelCaseWord HTTPServer getHTTPResponse", "𝐀𝐁c 𝐚B ǅb Ǆa", "x١٢٣4 𝟎𝟏𝟐 1234567"]
#: the letter-case regex of o200k / Llama 4 / Tekken-style files (HF's \p{Lu} is an upper-case letter)
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
Make = Callable[[], object]


def _byte_level(first: Make) -> Make:
    return lambda: pt.Sequence([first(), pt.ByteLevel(add_prefix_space=False, use_regex=False)])


CASES: dict[str, tuple[str, Make | None, Make | None]] = {
    **{f"bytelevel-prefix{aps}-regex{regex}": (BYTES, None, lambda a=aps, r=regex: pt.ByteLevel(add_prefix_space=a, use_regex=r))
       for aps in (False, True) for regex in (True, False)},
    **{f"split-{behavior}-invert{invert}":
       (BYTES, None, _byte_level(lambda b=behavior, i=invert: pt.Split(Regex(r"\s+"), b, invert=i)))
       for behavior in ("isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous")
       for invert in (False, True)},
    **{f"split-string-{behavior}": (BYTES, None, _byte_level(lambda b=behavior: pt.Split(" ", b)))
       for behavior in ("isolated", "merged_with_previous", "merged_with_next")},
    "split-o200k-letter-case": (BYTES, None, _byte_level(lambda: pt.Split(Regex(O200K), "isolated"))),
    "split-digit-groups": (BYTES, None, _byte_level(lambda: pt.Split(Regex(r"\d{1,3}(?=(?:\d{3})*\b)"), "isolated"))),
    "split-letters-merged": (BYTES, None, _byte_level(lambda: pt.Split(Regex(r"\p{Lu}\p{L}*"), "merged_with_next"))),
    **{f"digits-individual{ind}": (BYTES, None, _byte_level(lambda i=ind: pt.Digits(individual_digits=i)))
       for ind in (True, False)},
    **{f"normalizer-{name}": (BYTES, make, lambda: pt.ByteLevel(add_prefix_space=False))
       for name, make in (("NFC", nm.NFC), ("NFKC", nm.NFKC), ("NFD", nm.NFD), ("NFKD", nm.NFKD), ("Lowercase", nm.Lowercase),
                          ("NFKC+Lowercase", lambda: nm.Sequence([nm.NFKC(), nm.Lowercase()])))},
    **{f"metaspace-{scheme}-split{split}": (SPM, None, lambda s=scheme, p=split: pt.Metaspace(prepend_scheme=s, split=p))
       for scheme in ("always", "first", "never") for split in (False, True)},
    "prepend-replace": (SPM, lambda: nm.Sequence([nm.Prepend("\u2581"), nm.Replace(" ", "\u2581")]), None),
    "replace-only": (SPM, lambda: nm.Replace(" ", "\u2581"), None),
    "metaspace-NFKC": (SPM, nm.NFKC, lambda: pt.Metaspace(prepend_scheme="first", split=False)),
}


def variant(base: str, normalizer: Make | None, pre_tokenizer: Make | None, target: Path,
            byte_tokens_added: bool = False) -> HFTokenizer:
    hf = HFTokenizer.from_file(str(hf_files.out_dir() / base / "tokenizer.json"))
    hf.normalizer = normalizer() if normalizer else None
    hf.pre_tokenizer = pre_tokenizer() if pre_tokenizer else None
    if byte_tokens_added:  # as a file trained with BpeTrainer(special_tokens=[<0x00> …]) has them
        hf.add_special_tokens([f"<0x{b:02X}>" for b in range(256)])
    hf.save(str(target))
    return HFTokenizer.from_file(str(target))


def assert_same_as_hf(path: Path, hf: HFTokenizer) -> None:
    ours = tokenizer.load(path)
    for text in corpus()[::6] + EDGES:
        want = hf.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, parse_special=True) == want, text
        assert ours.decode(want) == hf.decode(want, skip_special_tokens=False), text


@pytest.mark.parametrize("case", sorted(CASES))
def test_component_matches_hf(case: str, tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    assert_same_as_hf(path, variant(*CASES[case], path))


def test_byte_tokens_that_are_also_added_tokens(tmp_path: Path) -> None:
    """<0xXX> tokens listed as special added tokens: HF cuts their text out of the input and its
    ByteFallback decoder still turns them into bytes; the chat app prints them as bytes too."""
    path = tmp_path / "tokenizer.json"
    hf = variant(SPM, nm.NFKC, lambda: pt.Metaspace(prepend_scheme="first", split=False), path, byte_tokens_added=True)
    assert_same_as_hf(path, hf)
    ours = tokenizer.load(path)
    ids = ours.encode("½")  # NFKC: "1⁄2"; "⁄" is not in the vocabulary -> three byte tokens
    assert [ours.token_type(i) for i in ids].count(tokenizer.TokenType.BYTE) == 3
    # by design: HF's skip_special_tokens drops those bytes ("12"); ours keeps the text
    assert ours.decode(ids, skip_special=True) == "1⁄2" != hf.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("fuse_unk", [False, True])
@pytest.mark.parametrize("byte_fallback", [False, True])
def test_unknown_characters_unk_and_fuse_unk(byte_fallback: bool, fuse_unk: bool, tmp_path: Path) -> None:
    """Characters the vocabulary lacks: with byte fallback, their <0xXX> tokens only when all of them
    exist (<0xF0> is removed here, so a 4-byte emoji is one unk); else one unk each, or one per run
    with fuse_unk."""
    data = json.loads((hf_files.out_dir() / SPM / "tokenizer.json").read_text(encoding="utf-8"))
    model = data["model"]
    model["vocab"]["<0xF0>x"] = model["vocab"].pop("<0xF0>")
    model.update(byte_fallback=byte_fallback, fuse_unk=fuse_unk)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    hf = HFTokenizer.from_file(str(path))
    texts = ["x\U0001F9FF\U0001FA80 y", "\U00020000\U00020001a\U0001FA80", "😀é😀", "ab\u0378\u0379 \u0378"]
    ours = tokenizer.load(path)
    for text in texts + corpus()[::12]:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, text


_BEHAVIORS = {"isolated": "Isolated", "removed": "Removed", "merged_with_previous": "MergedWithPrevious",
              "merged_with_next": "MergedWithNext", "contiguous": "Contiguous"}


@pytest.mark.offline
@pytest.mark.parametrize("behavior", sorted(_BEHAVIORS))
def test_split_pieces_equal_hf_for_every_behavior(behavior: str) -> None:
    """The splitter alone, piece for piece against HF's Split: empty matches (HF's engine finds them
    its own way), inverted splits, Contiguous runs of either kind."""
    from tokenizer.stages.pretokenizers import compile_split

    texts = ["ab cd bb", "  a  b ", "xxbx", "", "b", "aab a", "abab  ab", "1️⃣ ١٢٣4 x"]
    for pattern in [r"\b", r"(?=b)", r"b*", " ", r"\s*", "x?", "(?<=a)", r"\B|b", r"\s+", r"a|\b", "(?:ab)*"]:
        for invert in (False, True):
            ours = compile_split((pattern,), ((_BEHAVIORS[behavior], invert),))
            hf = pt.Split(Regex(pattern), behavior, invert=invert)
            for text in texts:
                assert ours(text) == [p for p, _ in hf.pre_tokenize_str(text)], (pattern, invert, text)


@pytest.mark.offline
def test_hf_classes_equal_hf_on_random_text() -> None:
    """HF's classes, not llama.cpp's: \\p{Lu} upper-case only, \\d any decimal digit, \\w with marks,
    letter numbers and circled letters — astral ones included (they go through stand-ins)."""
    import random

    from tokenizer.stages.pretokenizers import compile_split

    rng = random.Random(7)
    alphabet = [*"aAzZ09 _-.\t'", "\u0301", "\u20e3", "\u00b2", "\u2460", "\u2167", "\u0663", "\U0001d7ce",
                "\U0001d400", "\U0001d41a", "\u01c5", "\u02b0", "\u24b6", "\U0001f130", "\U00010400", "\U00010428",
                "\U00020000", "\u4e00", "\u0378", "😀"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(500)]
    for pattern in [r"\w+", r"\W+", r"\b", r"\B", r"\d+", r"\d{1,3}(?=(?:\d{3})*\b)", r"\p{Lu}+", r"\p{Ll}+",
                    r"\p{Lt}|\p{Lm}+", r"\p{Lo}+", r"\p{N}+", r"[^\s\p{L}\p{N}]+", O200K]:
        ours = compile_split((pattern,))
        hf = pt.Split(Regex(pattern), "isolated")
        for text in texts:
            assert ours(text) == [p for p, _ in hf.pre_tokenize_str(text)], (pattern, text)


_SPECIALS = [("<|endoftext|>", 0), ("<|im_start|>", 1), ("<|im_end|>", 2)]
POST_PROCESSORS = {
    "bos": lambda: pp.TemplateProcessing(single="<|im_start|> $A", special_tokens=_SPECIALS[1:2]),
    "eos": lambda: pp.TemplateProcessing(single="$A <|endoftext|>", special_tokens=_SPECIALS[:1]),
    "two-before": lambda: pp.TemplateProcessing(single="<|im_start|> <|endoftext|> $A", special_tokens=_SPECIALS[:2]),
    "two-after": lambda: pp.TemplateProcessing(single="<|im_start|> $A <|im_end|> <|endoftext|>", special_tokens=_SPECIALS),
    "roberta": lambda: pp.RobertaProcessing(("<|im_end|>", 2), ("<|im_start|>", 1)),
    "bert": lambda: pp.BertProcessing(("<|im_end|>", 2), ("<|im_start|>", 1)),
    "sequence": lambda: pp.Sequence([pp.ByteLevel(trim_offsets=False),
                                     pp.TemplateProcessing(single="<|im_start|> $A", special_tokens=_SPECIALS[1:2])]),
    "none": lambda: None,
}


@pytest.mark.parametrize("name", sorted(POST_PROCESSORS))
def test_add_special_adds_what_the_post_processor_adds(name: str, tmp_path: Path) -> None:
    hf = HFTokenizer.from_file(str(hf_files.out_dir() / BYTES / "tokenizer.json"))
    hf.post_processor = POST_PROCESSORS[name]()
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    ours = tokenizer.load(path)
    for text in ["hello world", "", " x", "<|im_end|> y"]:
        assert ours.encode(text, add_special=True, parse_special=True) == hf.encode(text, add_special_tokens=True).ids, text


@pytest.mark.parametrize("name", [BYTES, SPM, "trained-spm-legacy", "llama-spm"])
def test_decoding_any_ids_equals_hf(name: str) -> None:
    """Random id sequences, not only ones an encoder makes: broken UTF-8 (a run of byte tokens that is
    not valid text gives one U+FFFD per token, HF's ByteFallback rule), control tokens, skip_special."""
    import random

    folder = hf_files.out_dir() / name
    ours, hf = tokenizer.load(folder), HFTokenizer.from_file(str(folder / "tokenizer.json"))
    rng = random.Random(name)
    for _ in range(1500):
        ids = [rng.randrange(ours.vocab_size) for _ in range(rng.randint(1, 6))]
        for skip in (False, True):
            assert ours.decode(ids, skip_special=skip) == hf.decode(ids, skip_special_tokens=skip), (ids, skip)
