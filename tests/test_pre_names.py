"""Every pre-tokenizer name of our table against llama.cpp's own handling of the same name.

One byte-level vocabulary is written once: the first 9,000 merges of llama.cpp's GPT-2 test vocabulary,
plus three words that no merge reaches (so only ``ignore_merges`` emits them whole). For each name only
``tokenizer.ggml.pre`` is rewritten, and our ids must equal llama.cpp's (vocab-only, same file) on a
slice of the corpus and on texts aimed at the patterns' edges: digit grouping, Han, whitespace runs,
case changes, contractions, astral and unassigned code points. ``add_special`` must add what
llama.cpp adds. A wrong pattern, a wrong ``ignore_merges`` or ``add_bos`` flag, or a name mapped to the
wrong row fails here — the names without a test vocabulary of their own included.
"""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import gguf
import pytest
from conftest import corpus, fetch, model_path

import tokenizer
from tokenizer.loaders.gguf import load_gguf
from tokenizer.stages.pretokenizers import PRE_SPLITS

MERGES = 9_000  # 9,260 tokens: under the table cache's threshold, so ~90 files leave no entries behind
UNREACHED = ["Ġzqxjv", "zqxjv", "ĠQzxWv"]
CONTROLS = ["<mask>", "[MASK]", "<|endoftext|>"]  # llama.cpp strips spaces around the masks for some names
SPECIAL_TEXTS = ["a <mask> b", "a  [MASK]  b", "x <|endoftext|> y", " <mask>"]
#: names llama.cpp cannot run on a GPT-2-style vocabulary, and why.
NOT_HERE = {
    "none": "our name for SentencePiece's no-split ('llama' models), not one of llama.cpp's",
    "whitespace": "a raw-UTF-8 split: llama.cpp aborts on a byte-level vocabulary (GGML_ASSERT)",
}
EDGES = [
    "hello zqxjv world", "zqxjv", " QzxWv", "camelCaseWord HTTPServer getHTTPResponse", "I'm we'LL it'S they'Re",
    "x  12", "ab1234 x", "a 1234567 b", "  12  345", "x\t\t99", "1,234,567.89", "١٢٣٤٥ ٦", "Ⅻ½²³ 12½",
    "中文1234文字 𠀀𠀁x 𠀀", "日本語のテキスト 한국어", "a\u0378\u0378b", "\u0378 x", "ҳ\U0002a6e0 \U0002ebe1b",
    "x" + " " * 20 + "y", "tabs\t\t\tand\n\n\nnewlines \r\n end  ", "x    y  z\t\n1", "<sentinel:12> IMGIMGABZ",
    "don't DON'T Don't", "e\u0301t\u00e9 na\u00efve", "emoji 😀👍🏽 ok",
]


def _texts() -> list[str]:
    return corpus()[::8] + EDGES


def write_base(path: Path, general_name: str | None = None) -> bytes:
    """The test vocabulary: GPT-2's first merges, the unreached words, and three control tokens."""
    spec, _ = load_gguf(model_path("gpt-2"))
    tokens = [*spec.vocab.tokens[:256 + MERGES], *UNREACHED, *CONTROLS]
    writer = gguf.GGUFWriter(str(path), arch="llama")
    if general_name:
        writer.add_name(general_name)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - len(CONTROLS)) + [3] * len(CONTROLS))
    writer.add_token_merges([f"{a} {b}" for a, b in spec.model.merges[:MERGES]])
    writer.add_bos_token_id(len(tokens) - 1)
    writer.add_eos_token_id(len(tokens) - 1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def base_file(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_base(tmp_path_factory.mktemp("pre") / "base.gguf")


def with_pre(data: bytes, name: str) -> bytes:
    """The same GGUF with tokenizer.ggml.pre rewritten (a string value: u64 length + bytes)."""
    key = b"tokenizer.ggml.pre"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<I", data, at)[0] == 8  # GGUF string type
    (old,) = struct.unpack_from("<Q", data, at + 4)
    new = name.encode()
    return data[:at + 4] + struct.pack("<Q", len(new)) + new + data[at + 12 + old:]


@contextmanager
def both(base_file: bytes, tmp_path: Path, name: str) -> Iterator[tuple[tokenizer.Tokenizer, object]]:
    """Ours and llama.cpp's tokenizer (vocab only) for the base vocabulary under pre name ``name``."""
    import llama_cpp

    path = tmp_path / f"{name}.gguf"
    path.write_bytes(with_pre(base_file, name))
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        yield tokenizer.load(path), ref
    finally:
        ref.close()


@pytest.mark.parametrize("name", sorted(set(PRE_SPLITS) - set(NOT_HERE)))
def test_name_matches_llama_cpp(name: str, base_file: bytes, tmp_path: Path) -> None:
    with both(base_file, tmp_path, name) as (ours, ref):
        diffs = [t for t in _texts() if ours.encode(t) != ref.tokenize(t.encode(), add_bos=False, special=False)]
        assert not diffs, f"{name}: {len(diffs)} of {len(_texts())} texts differ; first: {diffs[0]!r}"
        for text in ("hi", ""):
            assert ours.encode(text, add_special=True) == ref.tokenize(text.encode(), add_bos=True, special=False)
        for text in SPECIAL_TEXTS:
            assert ours.encode(text, parse_special=True) == ref.tokenize(text.encode(), add_bos=False, special=True)


#: characters whose neighbours decide the split somewhere in the table: cases, marks, digits of other
#: scripts (Nd, Nl, No), Han (BMP and astral), Thai, Hangul, kana, unassigned code points, odd spaces.
_ALPHABET = [*"aAbZzé'sStT  \t\n\r1234567890-.,!?/", "\u0301", "\u0663", "\u0664", "Ⅻ", "½", "²", "中", "文",
             "\U00020000", "\U0002a6e0", "\u0378", "ก", "ร", "가", "ア", "\u2028", "\xa0", "\u3000", "😀", "\U0001d7ce"]
#: one name per row of the table (names of a row share its PreSplit)
_ROWS = sorted({id(pre): name for name, pre in sorted(PRE_SPLITS.items(), reverse=True) if name not in NOT_HERE}.values())


@pytest.mark.parametrize("name", _ROWS)
def test_random_text_matches_llama_cpp(name: str, base_file: bytes, tmp_path: Path) -> None:
    """Seeded random strings over the characters above: the splits' corners, beyond the corpus."""
    rng = random.Random(name)
    texts = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 24))) for _ in range(400)]
    with both(base_file, tmp_path, name) as (ours, ref):
        diffs = [t for t in texts if ours.encode(t) != ref.tokenize(t.encode(), add_bos=False, special=False)]
        assert not diffs, f"{name}: {len(diffs)} of {len(texts)} differ; first: {diffs[0]!r}"


def test_the_vocabulary_makes_ignore_merges_visible(base_file: bytes, tmp_path: Path) -> None:
    """llama3 and dbrx share one split; only llama3 sets ignore_merges. An unreached word tells them
    apart, so a row that lost (or gained) the flag fails the test above."""
    ids = {}
    for name in ("llama3", "dbrx"):
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(with_pre(base_file, name))
        ids[name] = tokenizer.load(path).encode(" zqxjv")
    assert len(ids["llama3"]) == 1 and len(ids["dbrx"]) > 1


def test_modernbert_strips_the_space_before_its_mask(tmp_path: Path) -> None:
    """llama.cpp recognises ModernBERT by general.name (Phi-3's rule, also by name, runs on the real
    Phi-3 test vocabulary in test_live_llama; it needs </s> and <unk>, which this vocabulary lacks)."""
    import llama_cpp

    path = tmp_path / "named.gguf"
    write_base(path, "ModernBERT modern-bert base")
    ours = tokenizer.load(path)
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        for text in SPECIAL_TEXTS:
            assert ours.encode(text, parse_special=True) == ref.tokenize(text.encode(), add_bos=False, special=True)
    finally:
        ref.close()
    assert [ours.id_to_token(i) for i in ours.spec.added.lstrip_ids] == ["[MASK]"]


def test_every_name_llama_cpp_knows_is_in_the_table() -> None:
    source = fetch.llama_vocab_source().read_text(encoding="utf-8")
    names = set(re.findall(r'tokenizer_pre == "([^"]+)"', source))
    assert len(names) > 80
    assert sorted(names - set(PRE_SPLITS)) == []
