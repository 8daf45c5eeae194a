"""A big tokenizer.json's merge list, read from the file's bytes with numpy instead of ``json.loads``.

Most of a big tokenizer.json is its merges: Llama 3's 17 MB file is 3.3 MB of vocabulary and settings,
then 14 MB of pretty-printed merges. ``json.loads`` makes (and later frees) 560k strings and 280k lists
of them, which ``bulk`` then joins and encodes again — two thirds of the whole load. Here:

1. ``split_off`` cuts the merges array out of the text (it must be the last value of ``model``, itself
   the last value of the file, as HF writes them) and puts a sentinel string in its place; ``json``
   parses the rest, and the sentinel must come back as ``model["merges"]``.
2. ``_read_array`` reads the array's bytes. Every '"' not escaped (not after an odd run of
   backslashes) opens or closes a string, in turn. What lies outside the strings, less JSON's
   whitespace, must then be exactly the array's skeleton — one of::

       [["a","b"],["ab","c"]]   ->   [[","],[","]]    (pairs; closing quotes count as outside)
       ["a b","ab c"]           ->   [","]            (texts, one space each)

   No control character may stand inside a string (JSON's rule); a string with a backslash is decoded
   by ``json`` itself (a few thousand of them in Llama 3's file).
3. The strings' bytes are gathered into one buffer, each pair's halves abutting (a result is its two
   halves side by side), and ``bulk`` builds the merge table from them as from a GGUF's.

Anything else (merges not last, another layout, a shape or escape JSON would reject, a text without
exactly one space) answers None, and the caller parses the whole file with ``json``: same result, or
the same error message. Measured on Llama 3's file: ``json.loads`` of the whole text ~115-200 ms, of
the text less its merges ~45 ms; reading the array here ~50 ms.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from . import bulk
from .bpe import split_pairs

#: what stands in for the merges array while ``json`` parses the rest of the file
SENTINEL = "\0rml-chat: merges read apart"
_SENTINEL_JSON = json.dumps(SENTINEL)
#: pretty-printed pairs take ~50 bytes a merge: ``bulk.wanted`` decides by the count this gives
_BYTES_PER_MERGE = 50
_KEY = {str: re.compile(r'"merges"\s*:\s*\['), bytes: re.compile(rb'"merges"\s*:\s*\[')}
_JSON_SPACE = " \t\n\r"
_QUOTE, _BACKSLASH, _SPACE = 0x22, 0x5C, 0x20


def split_off(text: str, raw: bytes) -> tuple[str, JsonMerges] | None:
    """``text`` (the file, decoded from ``raw``) with its merges array replaced by ``SENTINEL``'s JSON,
    and the merges read from ``raw``; None where this does not apply or the array is not plainly valid."""
    found = _array_span(text), _array_span(raw)
    if found[0] is None or found[1] is None or not bulk.wanted((found[1][1] - found[1][0]) // _BYTES_PER_MERGE + 1):
        return None
    (start, end), (raw_start, raw_end) = found
    merges = _read_array(raw[raw_start:raw_end])
    if merges is None:
        return None
    return text[:start] + _SENTINEL_JSON + text[end:], merges


def _array_span(text: Any) -> tuple[int, int] | None:
    """Where the merges array starts and ends in ``text`` (str or bytes alike: every character sought
    is ASCII), when it is the last value of the last value of the file: ``"merges": [ ... ] } }``."""
    lit = (lambda s: s.encode("ascii")) if isinstance(text, bytes) else (lambda s: s)
    space, end = lit(_JSON_SPACE), len(text)
    for closing in "}}]":  # from the end: the file's brace, the model's, the array's bracket
        end -= 1
        while end >= 0 and text[end:end + 1] in space:
            end -= 1
        if end < 0 or text[end:end + 1] != lit(closing):
            return None
    key = len(text)
    for _ in range(8):  # a later "merges" may be a string inside the array: try the ones before it
        key = text.rfind(lit('"merges"'), 0, key)
        if key < 0:
            return None
        match = _KEY[type(text)].match(text, key)
        if match:
            return match.end() - 1, end + 1
    return None


class JsonMerges(bulk.BytesMerges):
    """A tokenizer.json's merges, read by ``_read_array``: the array's bytes, and the halves and results
    as (buffer, starts, lengths) for ``bulk``. Read as a sequence, the array is parsed by ``json`` on
    first use (what the plain path would have had)."""

    def __init__(self, region: bytes, count: int, queries: list[tuple[Any, Any, Any]]):
        self.region, self.count, self.queries = region, count, queries

    @cached_property
    def pairs(self) -> Sequence[Any]:
        merges = json.loads(self.region)
        return (split_pairs(merges) if merges and isinstance(merges[0], str) else merges) or []

    def __len__(self) -> int:
        return self.count

    def table(self, vocab: dict[str, int], width: int, tokens: Sequence[str]) -> dict[int, int] | None:
        """``bpe.build_merge_table``'s table, or None where the plain path must decide."""
        return bulk.table_of_queries(self.queries, vocab, width, tokens)


def _read_array(region: bytes) -> JsonMerges | None:
    """The merges of a JSON array of [a, b] pairs or of "a b" texts (``region``: '[' to ']'), or None."""
    import numpy as np

    data = np.frombuffer(region, dtype=np.uint8)
    is_quote = data == _QUOTE
    backslashes = np.flatnonzero(data == _BACKSLASH)
    if len(backslashes):  # the character after each escaping backslash is not a quote that counts
        run_start = np.flatnonzero(np.diff(backslashes, prepend=-2) != 1)
        in_run = np.arange(len(backslashes)) - np.repeat(run_start, np.diff(run_start, append=len(backslashes)))
        is_quote[backslashes[in_run % 2 == 0] + 1] = False  # safe: JSON's last byte here is ']', not '\'
    quotes = np.flatnonzero(is_quote)
    if len(quotes) % 2:
        return None
    # True from each opening quote up to its closing one: runs between quotes, alternately out and in
    # (np.repeat: ~3x faster than a cumulative sum of the quotes over 14 MB)
    inside = np.repeat(np.arange(len(quotes) + 1) % 2 == 1, np.diff(quotes, prepend=0, append=len(data)))
    outside = np.greater(data, _SPACE)
    outside &= ~inside
    skeleton = data[outside].tobytes()
    pairs = skeleton[1:2] == b"["
    count = len(quotes) // (4 if pairs else 2)
    if not count or skeleton != b"[" + ((b'[","],' if pairs else b'",') * count)[:-1] + b"]":
        return None  # (an empty list: json's own parse is as quick)
    inside &= ~is_quote  # the strings' bytes, less their opening quotes
    buffer = data[inside]
    if len(buffer) and buffer.min() < _SPACE:  # a control character in a string: JSON rejects it
        return None
    # none outside either (the strings have none: checked just above), but JSON's whitespace
    if np.count_nonzero(data < _SPACE) != sum(np.count_nonzero(data == c) for c in b"\t\n\r"):
        return None
    opens, closes = quotes[0::2], quotes[1::2]
    lengths = closes - opens - 1
    starts = np.cumsum(lengths) - lengths
    tail = b""
    if len(backslashes):
        tail = _decode_escaped(region, buffer, opens, closes, backslashes, starts, lengths, pairs)
        if tail is None:
            return None
    buffer = np.frombuffer(buffer.tobytes() + tail + bytes(8), dtype=np.uint8)  # bulk reads 8 bytes at a time
    queries = _pair_queries(np, buffer, starts, lengths) if pairs else _text_queries(np, buffer, starts, lengths)
    return None if queries is None else JsonMerges(region, count, queries)


def _decode_escaped(region: bytes, buffer: Any, opens: Any, closes: Any, backslashes: Any, starts: Any,
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


def _pair_queries(np: Any, buffer: Any, starts: Any, lengths: Any) -> list[tuple[Any, Any, Any]] | None:
    """Left halves, right halves and results of [a, b] pairs (string 2k is merge k's left half)."""
    left, right = (starts[0::2], lengths[0::2]), (starts[1::2], lengths[1::2])
    return [(buffer, *left), (buffer, *right), (buffer, left[0], left[1] + right[1])]


def _text_queries(np: Any, buffer: Any, starts: Any, lengths: Any) -> list[tuple[Any, Any, Any]] | None:
    """Left halves, right halves and results of "a b" texts: exactly one space each, not first."""
    spaces = np.flatnonzero(buffer[:len(buffer) - 8] == _SPACE)
    order = np.argsort(starts, kind="stable")  # the texts as they lie in the buffer (escaped ones last)
    if len(spaces) != len(starts):
        return None
    at = np.empty_like(spaces)
    at[order] = spaces  # text k's space (one each, in buffer order: checked just below)
    if not ((starts < at) & (at < starts + lengths)).all():
        return None
    joined = np.delete(buffer, spaces)
    shift = np.searchsorted(spaces, starts)  # spaces before each text: where it lies once they are gone
    return [(buffer, starts, at - starts), (buffer, at + 1, starts + lengths - at - 1),
            (joined, starts - shift, lengths - 1)]
