"""A big tokenizer.json's merge list, read from the file's bytes with numpy instead of ``json.loads``.

Most of a big tokenizer.json is its merges: Llama 3's 17 MB file is 3.3 MB of vocabulary and settings,
then 14 MB of pretty-printed merges. ``json.loads`` makes (and later frees) 560k strings and 280k lists
of them, which ``bulk`` then joins and encodes again — most of the whole load. Here:

1. ``split_off`` cuts the merges array out of the file's bytes (it must be the last value of ``model``,
   itself the last value of the file, as HF writes them); the rest is decoded with a sentinel string in
   the array's place, ``json`` parses it, and the sentinel must come back as ``model["merges"]``.
2. ``_read_array`` reads the array's bytes. Every '"' not escaped (not after an odd run of
   backslashes) opens or closes a string, in turn. What lies outside the strings, less JSON's
   whitespace, must then be exactly the array's skeleton — one of::

       [["a","b"],["ab","c"]]   ->   [[","],[","]]    (pairs; closing quotes count as outside)
       ["a b","ab c"]           ->   [","]            (texts, one space each)

   No control character may stand inside a string (JSON's rule), the strings' bytes must be UTF-8, and
   a string with a backslash is decoded by ``json`` itself (a few thousand of them in Llama 3's file).
3. The strings' bytes are gathered into one buffer, each pair's halves abutting (a result is its two
   halves side by side), and ``bulk`` builds the merge table from them as from a GGUF's.

Anything else (merges not last, another layout, a shape or escape JSON would reject, a text without
exactly one space) answers None, and the caller parses the whole file with ``json``: same result, or
the same error message. What it buys: docs/performance.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..spec import MergePairs, TextIndex
from ..stages.bpe import split_pairs
from . import bulk

#: what stands in for the merges array while ``json`` parses the rest of the file
SENTINEL = "\0rml-chat: merges read apart"
_SENTINEL_JSON = json.dumps(SENTINEL)
#: pretty-printed pairs take ~50 bytes a merge: ``bulk.wanted`` decides by the count this gives
_BYTES_PER_MERGE = 50
_KEY = re.compile(rb'"merges"\s*:\s*\[')
_JSON_SPACE = b" \t\n\r"
_QUOTE, _BACKSLASH, _SPACE = 0x22, 0x5C, 0x20


def split_off(raw: bytes) -> tuple[str, JsonMerges] | None:
    """The file's text (``raw`` decoded) with its merges array replaced by ``SENTINEL``'s JSON, and the
    merges read from ``raw``; None where this does not apply, or the file is not plainly valid UTF-8 and
    JSON there (the plain path then reads it all, and says what is wrong)."""
    if not bulk.wanted(len(raw) // _BYTES_PER_MERGE + 1):  # too small even if it were all merges
        return None
    span = _array_span(raw)
    if span is None or not bulk.wanted((span[1] - span[0]) // _BYTES_PER_MERGE + 1):
        return None
    start, end = span
    try:  # the array's bytes are checked in _read_array: the text is decoded around them only
        text = raw[:start].decode("utf-8") + _SENTINEL_JSON + raw[end:].decode("utf-8")
    except UnicodeDecodeError:
        return None
    merges = _read_array(memoryview(raw)[start:end])
    return None if merges is None else (text, merges)


def _array_span(raw: bytes) -> tuple[int, int] | None:
    """Where the merges array starts and ends in ``raw``, when it is the last value of the last value of
    the file: ``"merges": [ ... ] } }``."""
    end = len(raw)
    for closing in b"}}]":  # from the end: the file's brace, the model's, the array's bracket
        end -= 1
        while end >= 0 and raw[end] in _JSON_SPACE:
            end -= 1
        if end < 0 or raw[end] != closing:
            return None
    key = len(raw)
    for _ in range(8):  # a later "merges" may be a string inside the array: try the ones before it
        key = raw.rfind(b'"merges"', 0, key)
        if key < 0:
            return None
        match = _KEY.match(raw, key)
        if match:
            return match.end() - 1, end + 1
    return None


class JsonMerges(bulk.BytesMerges):
    """A tokenizer.json's merges, read by ``_read_array``: the array's bytes, and the halves and results
    as (buffer, starts, lengths) for ``bulk``. Read as a sequence, the array is parsed by ``json`` on
    first use (what the plain path would have had)."""

    def __init__(self, region: memoryview, count: int, queries: list[tuple[Any, Any, Any]]):
        super().__init__(count)
        self.region, self.queries = region, queries

    def columns(self) -> MergePairs:
        merges = json.loads(bytes(self.region))
        return MergePairs.of((split_pairs(merges) if merges and isinstance(merges[0], str) else merges) or [])

    def table(self, vocab: TextIndex, width: int, tokens: Sequence[str]) -> dict[int, int] | None:
        """``stages/bpe.build_merge_table``'s table, or None where the plain path must decide."""
        return bulk.table_of_queries(self.queries, vocab, width, tokens)


def _read_array(region: memoryview) -> JsonMerges | None:
    """The merges of a JSON array of [a, b] pairs or of "a b" texts (``region``: '[' to ']'), or None."""
    import numpy as np

    data = np.frombuffer(region, dtype=np.uint8)
    # Each pass over the array writes into one of three arrays made here: fresh 14 MB arrays cost
    # more in page faults than the passes themselves.
    scratch = np.equal(data, _BACKSLASH)
    backslashes = np.flatnonzero(scratch)
    is_quote = np.equal(data, _QUOTE)
    if len(backslashes):  # the character after each escaping backslash is not a quote that counts
        run_start = np.flatnonzero(np.diff(backslashes, prepend=-2) != 1)
        in_run = np.arange(len(backslashes)) - np.repeat(run_start, np.diff(run_start, append=len(backslashes)))
        is_quote[backslashes[in_run % 2 == 0] + 1] = False  # safe: JSON's last byte here is ']', not '\'
    quotes = np.flatnonzero(is_quote)
    if len(quotes) % 2:
        return None
    # True from each opening quote up to its closing one: runs between quotes, alternately out and in
    # (np.repeat: faster than a cumulative sum of the quotes over the whole array)
    inside = np.repeat(np.arange(len(quotes) + 1) % 2 == 1, np.diff(quotes, prepend=0, append=len(data)))
    np.greater(data, _SPACE, out=scratch)
    np.less(inside, scratch, out=scratch)  # outside the strings, and not whitespace
    skeleton = data[scratch].tobytes()
    pairs = skeleton[1:2] == b"["
    count = len(quotes) // (4 if pairs else 2)
    if not count or skeleton != b"[" + ((b'[","],' if pairs else b'",') * count)[:-1] + b"]":
        return None  # (an empty list: json's own parse is as quick)
    np.greater(inside, is_quote, out=inside)  # the strings' bytes, less their opening quotes
    buffer = data[inside]
    if len(buffer) and buffer.min() < _SPACE:  # a control character in a string: JSON rejects it
        return None
    # none outside either (the strings have none: checked just above), but JSON's whitespace
    whitespace = 0
    for code in b"\t\n\r":
        whitespace += np.count_nonzero(np.equal(data, code, out=scratch))
    if np.count_nonzero(np.less(data, _SPACE, out=scratch)) != whitespace:
        return None
    opens, closes = quotes[0::2], quotes[1::2]
    lengths = closes - opens - 1
    # UTF-8 (the rest of the file was decoded apart): the strings' bytes, one after the other, decode,
    # and none starts with a continuation byte — so none ends inside a character either
    content = buffer.tobytes()
    if ((data[opens[lengths > 0] + 1] & 0xC0) == 0x80).any() or not _is_utf8(content):
        return None
    starts = np.cumsum(lengths) - lengths
    if len(backslashes):
        tail = _decode_escaped(region, buffer, opens, closes, backslashes, starts, lengths, pairs)
        if tail is None:
            return None
        content = buffer.tobytes() + tail
    buffer = np.frombuffer(content + bytes(8), dtype=np.uint8)  # bulk reads 8 bytes at a time
    queries = _pair_queries(buffer, starts, lengths) if pairs else _text_queries(np, buffer, starts, lengths)
    return None if queries is None else JsonMerges(region, count, queries)


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _decode_escaped(region: memoryview, buffer: Any, opens: Any, closes: Any, backslashes: Any, starts: Any,
                    lengths: Any, pairs: bool) -> bytes | None:
    """The strings holding a backslash (with their pair's other half), decoded by ``json``, to be laid
    after ``buffer``; their ``starts``/``lengths`` are pointed there and their old bytes blanked (no
    stray space is left for ``_text_queries`` to find). None if JSON would reject an escape."""
    import numpy as np

    strings = np.unique(np.searchsorted(opens, backslashes, side="right") - 1)
    if pairs:  # both halves move, so that each result still lies in one piece
        strings = np.unique(np.concatenate([strings - strings % 2, strings - strings % 2 + 1]))
    pieces = [region[o:c + 1] for o, c in zip(opens[strings].tolist(), closes[strings].tolist())]
    try:
        texts = json.loads(b"[" + b",".join(pieces) + b"]")
    except ValueError:
        return None
    for start, length in zip(starts[strings].tolist(), lengths[strings].tolist()):
        buffer[start:start + length] = 0
    decoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    sizes = np.fromiter(map(len, decoded), dtype=np.int64, count=len(decoded))
    lengths[strings] = sizes
    starts[strings] = len(buffer) + np.cumsum(sizes) - sizes
    return b"".join(decoded)


def _pair_queries(buffer: Any, starts: Any, lengths: Any) -> list[tuple[Any, Any, Any]]:
    """Left halves, right halves and results of [a, b] pairs (string 2k is merge k's left half)."""
    left, right = (starts[0::2], lengths[0::2]), (starts[1::2], lengths[1::2])
    return [(buffer, *left), (buffer, *right), (buffer, left[0], left[1] + right[1])]


def _text_queries(np: Any, buffer: Any, starts: Any, lengths: Any) -> list[tuple[Any, Any, Any]] | None:
    """Left halves, right halves and results of "a b" texts: exactly one space each, not first."""
    spaces = np.flatnonzero(buffer[:len(buffer) - 8] == _SPACE)
    if len(spaces) != len(starts):
        return None
    at = np.empty_like(spaces)
    at[np.argsort(starts, kind="stable")] = spaces  # text k's space (one each, in buffer order: checked just below)
    if not ((starts < at) & (at < starts + lengths)).all():
        return None
    joined = np.delete(buffer, spaces)
    shift = np.searchsorted(spaces, starts)  # spaces before each text: where it lies once they are gone
    return [(buffer, starts, at - starts), (buffer, at + 1, starts + lengths - at - 1),
            (joined, starts - shift, lengths - 1)]
