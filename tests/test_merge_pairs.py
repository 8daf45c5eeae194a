"""Merges split into halves in bulk (``bpe.split_pairs``), against the plain rule — cut each text at its
space — and the column-held merge list it makes."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

import tokenizer
from tokenizer import TokenizerError
from tokenizer.loaders import gguf_reader
from tokenizer.stages.bpe import MergePairs, split_pairs
from tokenizer.stages.byte_alphabet import BYTE_TO_CHAR

pytestmark = pytest.mark.offline


def write_bpe_gguf(path: Path, tokens: list[str], merges: list[str]) -> Path:
    """A byte-level GGUF (GPT-2 split) of these tokens and merges."""
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def test_merges_read_undecoded_then_split_into_columns(tmp_path: Path) -> None:
    path = write_bpe_gguf(tmp_path / "m.gguf", [*BYTE_TO_CHAR, "Ġt", "éü"], ["Ġ t", "é ü"])
    meta = gguf_reader.read_metadata(path, raw=frozenset({"tokenizer.ggml.merges"}))
    assert meta["tokenizer.ggml.merges"][1] == [b"\xc4\xa0 t", b"\xc3\xa9 \xc3\xbc"]
    assert meta["tokenizer.ggml.tokens"][1][-1] == "éü"  # other string arrays are decoded
    spec = tokenizer.load(path).spec
    assert isinstance(spec.model.merges, MergePairs) and list(spec.model.merges) == [("Ġ", "t"), ("é", "ü")]


def test_a_merge_without_its_space_is_still_named(tmp_path: Path) -> None:
    path = write_bpe_gguf(tmp_path / "m.gguf", [*BYTE_TO_CHAR, "ab"], ["a b", "ab"])
    with pytest.raises(TokenizerError, match=r"tokenizer\.ggml\.merges\[1\] 'ab' has no space between its halves"):
        tokenizer.load(path)


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
