"""The bulk GGUF string-array reader and the bulk merge splitter, against the plain rules they speed up:
reading records one by one, and cutting each merge text at its space."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer
from tokenizer import TokenizerError, gguf_reader
from tokenizer.bpe import MergePairs, split_pairs
from tokenizer.byte_alphabet import BYTE_TO_CHAR
from tokenizer.gguf_strings import decode_all, split_strings


def records(strings: list[bytes]) -> bytes:
    return b"".join(struct.pack("<Q", len(s)) + s for s in strings)


def one_by_one(window: bytes, count: int) -> tuple[list[bytes], int] | None:
    """The reference: each record's u64 length, then that many bytes."""
    out, pos = [], 0
    for _ in range(count):
        if pos + 8 > len(window):
            return None
        (length,) = struct.unpack_from("<Q", window, pos)
        if length > len(window) - pos - 8:
            return None
        out.append(window[pos + 8:pos + 8 + length])
        pos += 8 + length
    return out, pos


# strings that break the common case: empty ones, 256+ bytes (two-byte lengths), runs of NULs
_STRING = st.one_of(
    st.binary(max_size=12),
    st.binary(min_size=250, max_size=300),
    st.lists(st.sampled_from([b"\0", b"\0" * 7, b"\0" * 15, b"a", b"\x80", b"\xc3\xa9"]), max_size=8).map(b"".join),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_STRING, max_size=12), st.binary(max_size=24), st.integers(0, 40), st.data())
def test_split_strings_equals_reading_records_one_by_one(strings, tail, cut, data) -> None:
    window = records(strings) + tail
    window = window[:len(window) - cut] if cut < len(window) else window
    count = data.draw(st.integers(1, len(strings) + 1))
    assert split_strings(window, count) == one_by_one(window, count)


def test_split_strings_worked_example() -> None:
    window = b"\x02" + bytes(7) + b"hi" + b"\x01" + bytes(7) + b"!" + b"tail"
    assert split_strings(window, 2) == ([b"hi", b"!"], 19)
    assert split_strings(window, 3) is None  # "tail" is no record


@given(st.lists(st.binary(max_size=6)))
def test_decode_all_decodes_each_string_alone(strings) -> None:
    assert decode_all(strings) == [s.decode("utf-8", "surrogateescape") for s in strings]


def test_decode_all_keeps_broken_sequences_apart() -> None:
    # "\xe2\x82" + "\xac" would be "€" if decoded together; each alone is escaped
    assert decode_all([b"\xe2\x82", b"\xac", b"ok\0"]) == ["\udce2\udc82", "\udcac", "ok\0"]


def _big_gguf(path: Path, tokens: list[str], merges: list[str]) -> Path:
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def test_bulk_read_of_a_gguf_equals_the_checked_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # more strings than the bulk threshold, with a 300-byte token, a 600-byte one and an empty one in between
    tokens = [*BYTE_TO_CHAR] + [f"t{i}" for i in range(3000)] + ["Ġ" * 150, "x" * 600, "", "ü" * 5]
    merges = ["Ġ t", "t 1", "x x", "ü ü"] * 400
    path = _big_gguf(tmp_path / "big.gguf", tokens, merges)
    raw = frozenset({"tokenizer.ggml.merges"})
    bulk = gguf_reader.read_metadata(path, raw=raw)
    monkeypatch.setattr(gguf_reader, "_BULK_MIN", 10 ** 9)
    assert bulk == gguf_reader.read_metadata(path, raw=raw)
    assert bulk["tokenizer.ggml.tokens"][1][-4:] == ["Ġ" * 150, "x" * 600, "", "ü" * 5]
    assert bulk["tokenizer.ggml.merges"][1][:2] == [b"\xc4\xa0 t", b"t 1"]


def test_truncated_big_string_array_names_the_offset(tmp_path: Path) -> None:
    tokens = [*BYTE_TO_CHAR] + [f"t{i}" for i in range(3000)]
    data = _big_gguf(tmp_path / "big.gguf", tokens, ["t 1"]).read_bytes()
    start = data.index(b"tokenizer.ggml.tokens")
    past_minimum = start + 40 + 8 * len(tokens)  # the reader first checks the 8 bytes each string needs at least
    for cut in (past_minimum + 10, past_minimum + 2000, past_minimum + 9000):
        broken = tmp_path / f"cut{cut}.gguf"
        broken.write_bytes(data[:cut])
        with pytest.raises(TokenizerError, match=r"offset \d+: tokenizer\.ggml\.tokens\[\d+\]"):
            tokenizer.load(broken)


@pytest.mark.parametrize("kind", [str, bytes])
def test_split_pairs_cuts_each_text_at_its_space(kind) -> None:
    texts = ["Ġ t", "h e", "Ġt he", "é ü"]
    given_texts = texts if kind is str else [t.encode() for t in texts]
    pairs = split_pairs(given_texts)
    assert isinstance(pairs, MergePairs)
    assert list(pairs) == [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("é", "ü")]
    assert pairs.lefts == ["Ġ", "h", "Ġt", "é"] and pairs.rights == ["t", "e", "he", "ü"]


@pytest.mark.parametrize("texts", [
    ["a b", "cd"],              # no space
    ["a b c", "de"],            # two spaces in one, none in the other: the count alone would pass
    [" a", "b c"],              # a space first
    ["a b", "c  d"],            # two spaces
])
def test_split_pairs_declines_what_is_not_one_space_each(texts) -> None:
    assert split_pairs(texts) is None
    assert split_pairs([t.encode() for t in texts]) is None


def test_split_pairs_of_undecodable_bytes_keeps_them_escaped() -> None:
    assert list(split_pairs([b"\xe2\x82 \xac"])) == [("\udce2\udc82", "\udcac")]


def test_merge_pairs_reads_as_a_list_of_tuples() -> None:
    pairs = MergePairs(["a", "ab"], ["b", "c"])
    assert len(pairs) == 2 and pairs[1] == ("ab", "c") and pairs[-1] == ("ab", "c")
    assert pairs[:1] == [("a", "b")]
    assert pairs == [("a", "b"), ("ab", "c")] and pairs != [("a", "b")]
    assert not MergePairs([], [])
