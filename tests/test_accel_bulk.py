"""White-box, accelerator: big string arrays and merge tables read with numpy (``tokenizer.accel.bulk``),
against the plain reader and the plain merge table, on small files made to take the bulk path (``read_in_bulk``) and on every real
vocabulary. (Elsewhere in the suite numpy is imported, so merge lists of 20k+ take the bulk path.)"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conftest import VOCABS, hf_files, model_path, read_in_bulk
from hypothesis import given, settings
from hypothesis import strategies as st
from test_merge_pairs import write_bpe_gguf

import tokenizer
from tokenizer import TokenizerError
from tokenizer.accel import bulk
from tokenizer.accel.hooks import ACCELERATOR
from tokenizer.loaders.gguf import load_gguf
from tokenizer.stages import bpe
from tokenizer.stages.byte_alphabet import BYTE_TO_CHAR

pytestmark = pytest.mark.accel


def _records(strings: list[bytes]) -> bytes:
    return b"".join(struct.pack("<Q", len(s)) + s for s in strings)


def _parse(strings: list[bytes], tail: bytes = b"\x05\x00\x00\x00\x00\x00\x00\x00tail!") -> list[bytes] | None:
    region = _records(strings)
    found = bulk.parse_strings(region + tail, 0, len(region) + len(tail), len(strings))
    if found is None:
        return None
    array, after = found
    assert after == len(region)
    return array.items


def test_records_the_chain_misses_are_read_one_by_one() -> None:
    strings = [b"ab", b"c", b"x" * 300, b"", b"d\x00", b"", b"\x00" * 9, b"e" * 3000, b"f", "é€".encode(), b""]
    assert _parse(strings) == strings
    assert _parse(strings + [b"g" * 70_000]) is None  # past the bounded window (96 bytes a string): the plain loop


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=12), st.binary(min_size=250, max_size=300),
                          st.sampled_from([b"", b"\x00" * 7, b"\x00" * 8, b"a\x00\x00\x00\x00\x00\x00\x00",
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00"])), min_size=1, max_size=40))
def test_parse_strings_reads_exactly_what_the_records_say(strings: list[bytes]) -> None:
    assert _parse(strings) == strings


def test_no_window_is_bigger_than_the_cap(monkeypatch) -> None:
    strings = [b"abc"] * 100  # 1,100 bytes of records
    monkeypatch.setattr(bulk, "_MAX_WINDOW", 1000)
    assert _parse(strings) is None  # left to the plain loop, not read in a bigger window
    monkeypatch.setattr(bulk, "_MAX_WINDOW", 2000)
    assert _parse(strings) == strings


def test_a_truncated_array_is_left_to_the_plain_reader() -> None:
    region = _records([b"ab", b"cd", b"ef"])
    assert bulk.parse_strings(region[:-1], 0, len(region) - 1, 3) is None
    assert bulk.parse_strings(region, 0, len(region), 4) is None


def test_string_array_reads_as_a_list_of_bytes() -> None:
    strings = [b"\xc4\xa0t", b"\xe2\x82", b"ok"]
    region = _records(strings)
    array, _ = bulk.parse_strings(region, 0, len(region), 3)
    assert array[1] == b"\xe2\x82" and array[-1] == b"ok" and array[:2] == strings[:2] and len(array) == 3


LONG = "Ġ" * 12  # 24 bytes: keyed by its text, not by its first and last eight bytes
# two 20-byte tokens alike in their first and last eight bytes: only their texts tell them apart
TWINS = ["ĠĠĠĠabcdĠĠĠĠ", "ĠĠĠĠwxyzĠĠĠĠ"]
TOKENS = [*BYTE_TO_CHAR, "Ġt", "he", "Ġthe", "ĠĠ", "ĠĠĠĠ", "ĠĠĠĠĠĠ", LONG, LONG + "x", "éü", "Ġé", "éüé",
          "ĠĠĠĠabcd", "ĠĠĠĠwxyz", *TWINS]
MERGES = ["Ġ t", "h e", "Ġt he", "Ġ Ġ", "ĠĠ ĠĠ", "ĠĠ ĠĠĠĠ", "ĠĠĠĠĠĠ ĠĠĠĠĠĠ", f"{LONG} x", "é ü", "Ġ é", "éü é",
          "ĠĠĠĠwxyz ĠĠĠĠ", "ĠĠĠĠabcd ĠĠĠĠ"]


def _load(path: Path, monkeypatch, bulk_min: int) -> tokenizer.Tokenizer:
    read_in_bulk(monkeypatch, bulk_min)
    monkeypatch.setenv("RML_CHAT_TOKENIZER_CACHE", "off")
    return tokenizer.load(path)


def test_bulk_merge_table_equals_the_plain_one(tmp_path: Path, monkeypatch) -> None:
    path = write_bpe_gguf(tmp_path / "m.gguf", TOKENS, MERGES)
    fast, plain = _load(path, monkeypatch, 1), _load(path, monkeypatch, 10**9)
    assert isinstance(fast.spec.model.merges, bulk.BulkMerges) and isinstance(plain.spec.model.merges, bpe.MergePairs)
    assert fast.model.table == plain.model.table and len(fast.model.table) == len(MERGES)
    assert list(fast.spec.model.merges) == list(plain.spec.model.merges) and len(fast.spec.model.merges) == len(MERGES)
    assert fast.spec.vocab.tokens == TOKENS
    text = f"the thé {LONG}x  {' ' * 13}éüé"
    assert fast.encode(text) == plain.encode(text)
    width = len(TOKENS) + 1  # the long pair is in the table, with its rank and result
    assert fast.model.table[TOKENS.index(LONG) * width + TOKENS.index("x")] == 7 * width + TOKENS.index(LONG + "x")


@pytest.mark.parametrize("native", ["on", "off"])
def test_the_bulk_merge_table_is_built_with_or_without_the_c_reader(tmp_path: Path, monkeypatch, native: str) -> None:
    """Without the C loops (no C compiler, or RML_CHAT_NATIVE=off) the token records still come in bulk, so
    a big merge list is still built from the file's bytes."""
    path = write_bpe_gguf(tmp_path / "m.gguf", TOKENS, MERGES)
    plain = _load(path, monkeypatch, 10**9)
    monkeypatch.setenv("RML_CHAT_NATIVE", native)
    fast = _load(path, monkeypatch, 1)
    assert isinstance(fast.spec.model.merges, bulk.BulkMerges)
    assert fast.model.table == plain.model.table and fast.spec.vocab.tokens == plain.spec.vocab.tokens
    assert type(load_gguf(path, ACCELERATOR)[0].vocab.tokens) is list  # the loader's: plain, whichever reader


@pytest.mark.parametrize("tokens, merges", [
    (TOKENS + ["b c", "ab c"], [*MERGES[:3], "a b c", *MERGES[3:]]),  # two spaces: cut at the first (llama.cpp)
    (TOKENS + ["Ġt"], MERGES),                        # a token listed twice: the later id wins
    (TOKENS + [""], MERGES),                          # an empty token, renamed
])
def test_unusual_files_take_the_plain_path_to_the_same_table(tmp_path: Path, monkeypatch, tokens, merges) -> None:
    path = write_bpe_gguf(tmp_path / "m.gguf", tokens, merges)
    fast, plain = _load(path, monkeypatch, 1), _load(path, monkeypatch, 10**9)
    assert fast.model.table == plain.model.table and fast.spec.vocab.tokens == plain.spec.vocab.tokens


@pytest.mark.parametrize("merge, message", [
    ("Ġthe x", r"merge #13 \('Ġthe' 'x'\): result 'Ġthex' is not in"),
    (f"{LONG} y", rf"merge #13 \('{LONG}' 'y'\): result '{LONG}y' is not in"),  # a long one: no candidate at all
    (f"{LONG}x x", rf"merge #13 \('{LONG}x' 'x'\): result '{LONG}xx' is not in"),
])
def test_a_half_that_is_no_token_is_named_as_on_the_plain_path(tmp_path: Path, monkeypatch, merge, message) -> None:
    path = write_bpe_gguf(tmp_path / "m.gguf", TOKENS, [*MERGES, merge])
    with pytest.raises(TokenizerError, match=r"m\.gguf: " + message):
        _load(path, monkeypatch, 1)


def test_a_truncated_big_array_is_reported_by_the_plain_reader(tmp_path: Path, monkeypatch) -> None:
    data = write_bpe_gguf(tmp_path / "m.gguf", TOKENS, MERGES).read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:data.index("éüé".encode()) + 2])  # inside the last token
    with pytest.raises(TokenizerError, match=r"cut\.gguf: offset \d+: tokenizer\.ggml\.tokens\[266\]: string of 6"):
        _load(cut, monkeypatch, 1)


@pytest.mark.parametrize("name", [*VOCABS, "smollm2"])
def test_real_vocabularies_get_the_same_merge_table_either_way(monkeypatch, name: str) -> None:
    fast, plain = _load(model_path(name), monkeypatch, 1), _load(model_path(name), monkeypatch, 10**9)
    if plain.spec.model.merges is None:  # score-based SentencePiece: no merge list
        assert fast.spec.model.merges is None and not fast.model.table
        return
    assert isinstance(fast.spec.model.merges, bulk.BulkMerges) and not isinstance(plain.spec.model.merges, bulk.BulkMerges)
    assert fast.model.table == plain.model.table and fast.spec.vocab.tokens == plain.spec.vocab.tokens


@pytest.mark.parametrize("name", hf_files.NAMES)
def test_tokenizer_json_merge_tables_are_the_same_either_way(monkeypatch, name: str) -> None:
    path = hf_files.out_dir() / name / "tokenizer.json"
    fast, plain = _load(path, monkeypatch, 1), _load(path, monkeypatch, 10**9)
    assert fast.model.table == plain.model.table and fast.spec.vocab.tokens == plain.spec.vocab.tokens


@pytest.mark.parametrize("merges", [
    [["a", "b"], ["ab", "c"]],
    ["a b", "ab c"],                                  # "a b" strings: split into columns first
    [["a", "b"], ["ab", "c"], ["\0", "a"]],          # a NUL in a half: the plain path, same table
])
def test_string_merges_in_bulk_equal_the_plain_table(tmp_path: Path, monkeypatch, merges) -> None:
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "\0": 5, "\0a": 6, "é" * 20: 7, "é" * 20 + "a": 8}
    long = ["é" * 20, "a"] if isinstance(merges[0], list) else "é" * 20 + " a"
    merges = [*merges, long]  # a long result, checked byte by byte
    data = {"model": {"type": "BPE", "vocab": vocab, "merges": merges},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    fast, plain = _load(path, monkeypatch, 1), _load(path, monkeypatch, 10**9)
    assert fast.model.table == plain.model.table and len(fast.model.table) == len(merges)
