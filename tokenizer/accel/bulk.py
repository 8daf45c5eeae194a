"""Big merge tables with numpy: strings keyed by their bytes, looked up all at once.

In plain Python, Llama 3's merge table (280k merges over 128k tokens) costs ~840k dictionary lookups
of freshly split strings (each merge's halves and result), each memory-bound (docs/performance.md). Here:

1. ``parse_strings`` finds the records (8-byte length, then the bytes) of a GGUF string array at once.
   A record whose length is below 256 starts where an unaligned 64-bit read gives a value below 256
   (its length, then seven zero bytes); following the chain (each record's end is the next one's
   start) from the first record proves which candidates are records. A record the chain misses (256+
   bytes, or seven zero bytes inside a string) is read on its own, and the chain picks up after it.
   "ab", "c" -> 02 00.. 'a' 'b' 01 00.. 'c': candidates at 0 and 10; 0 + 8 + 2 = 10, so both are records.
2. ``BulkMerges.table`` (a GGUF's merges, split at their spaces), ``table_of_texts`` (merges as Python
   strings, joined at NULs and encoded once) and ``table_of_queries`` (a tokenizer.json's, read from its
   bytes by ``json_merges``) key every token, merge half and merge result by
   its first and last eight bytes and its length — the string itself up to 16 bytes; a longer one is
   also compared byte for byte with the token its key finds — and look them up in a hash-bucketed
   index of the tokens (``_Index``): exact, not a hash guess. Anything unusual (not one space per GGUF
   merge, a NUL in a text, a token listed twice, an empty token, a half that is no token) answers
   None, and the caller takes the plain path, which gives the same table or names what is wrong.

What it buys: docs/performance.md. numpy is imported on first use only (``wanted``).
"""

from __future__ import annotations

import struct
import sys
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from itertools import chain
from typing import Any

from ..spec import MergePairs, Merges, TextIndex
from . import LazyMerges, enabled

#: string arrays this long are read in bulk: the gain outweighs numpy's own import
BULK_MIN = 100_000
#: ... and from this long where numpy is imported already (the app's llama_cpp imports it): 50k merges
#: then load faster. Below it, the plain loop is as fast.
BULK_MIN_IMPORTED = 20_000
_U64 = struct.Struct("<Q")
#: window sizes tried, in bytes per string (Llama 3's merges take ~17, its tokens ~15), and the most
#: read at once (Gemma 4's 515k merges take 9 MB): a corrupt count in a big model file is left to the
#: plain loop rather than copied out by the gigabyte.
_WINDOW_BYTES = (24, 96)
_MAX_WINDOW = 1 << 25
_HASH_A, _HASH_B = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F
#: strings up to this many bytes are keyed exactly by (first 8 bytes, last 8 bytes, length).
_EXACT = 16


def wanted(count: int) -> bool:
    """Whether a string array of ``count`` strings is worth reading in bulk (never with the accelerator off)."""
    return enabled() and (count >= BULK_MIN or (count >= BULK_MIN_IMPORTED and "numpy" in sys.modules))


def merge_table(merges: Merges, vocab: TextIndex, width: int, tokens: Sequence[str]) -> dict[int, int] | None:
    """``stages/bpe.build_merge_table``'s table for a big merge list — one that answers ``table`` itself
    (still in a file's bytes: ``BytesMerges``; from the table cache), or many string pairs — or None: not
    handled (off, small, unusual); the caller then builds it with ``build_merge_table``."""
    if not enabled() or not merges:
        return None
    ready = merges.table(vocab, width, tokens)
    if ready is not None or isinstance(merges, BytesMerges) or not wanted(len(merges)):
        return ready
    return table_of_texts(chain.from_iterable(zip(merges.lefts, merges.rights)), len(merges), vocab, width, tokens)


class StringArray(Sequence[bytes]):
    """A GGUF string array left in its bytes: string i is ``window[starts[i]:starts[i] + lengths[i]]``
    (``starts`` and ``lengths``: numpy int64 arrays); read as a sequence, the strings as bytes, sliced
    out on the first read (``items``)."""

    def __init__(self, window: bytes, starts: Any, lengths: Any):
        self.window, self.starts, self.lengths = window, starts, lengths

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index):  # type: ignore[override]
        return self.items[index]

    @cached_property
    def items(self) -> list[bytes]:
        slices = map(slice, self.starts.tolist(), (self.starts + self.lengths).tolist())
        return list(map(self.window.__getitem__, slices))


class RecordList(list):
    """Strings read from a GGUF array by the plain loop, holding the array's bytes as well (``records``:
    8-byte length, then the string, for each) for ``BulkMerges``."""

    def __init__(self, strings: list, records: bytes):
        super().__init__(strings)
        self.records = records


def parse_strings(buf: Any, pos: int, end: int, count: int) -> tuple[StringArray, int] | None:
    """The ``count`` string records at ``pos`` of ``buf`` (up to ``end``) and the position after them;
    None when they cannot all be followed inside the file (the plain loop then says what is wrong)."""
    import numpy as np

    for per_string in _WINDOW_BYTES:  # a bounded window: never more than 96 bytes a string, nor 32 MB
        stop = min(end, pos + min(count * per_string + 4096, _MAX_WINDOW))
        window = buf[pos:stop]  # bytes (a slice of the memory map)
        found = _follow(np, window, count)
        if found is not None:
            starts, lengths, after = found
            return StringArray(window[:after], starts, lengths), pos + after
        if stop == end or stop - pos == _MAX_WINDOW:  # no bigger window to try
            break
    return None


def _padded(np: Any, raw: bytes) -> Any:
    """``raw`` as a uint8 array with 8 zero bytes after it, so that an 8-byte read at any offset fits."""
    return np.frombuffer(raw + bytes(8), dtype=np.uint8)


def _follow(np: Any, window: bytes, count: int) -> tuple[Any, Any, int] | None:
    """Records of ``window``: text starts, lengths, and the end of the last one; None if the window
    ends first (or a record runs past it)."""
    data = _padded(np, window)
    words = np.ndarray(shape=(len(window),), dtype="<u8", buffer=data, strides=(1,))
    candidates = np.flatnonzero(words < 256)
    lengths = words[candidates].astype(np.int64)
    ends = candidates + 8 + lengths
    breaks = np.flatnonzero(ends[:-1] != candidates[1:])  # the chain breaks after these candidates
    got_starts, got_lengths, got, at, singles = [], [], 0, 0, 0
    while got < count:
        first = int(np.searchsorted(candidates, at))
        if first < len(candidates) and candidates[first] == at:  # a run of chained records
            nxt = int(np.searchsorted(breaks, first))
            last = int(breaks[nxt]) if nxt < len(breaks) else len(candidates) - 1
            last = min(last, first + count - got - 1)
            if ends[last] > len(window):  # the run leaves the window: keep what fits
                last = first + int(np.searchsorted(ends[first:last + 1], len(window), side="right")) - 1
                if last < first:
                    return None
            got_starts.append(candidates[first:last + 1] + 8)
            got_lengths.append(lengths[first:last + 1])
            got += last + 1 - first
            at = int(ends[last])
        else:  # one record the chain missed
            singles += 1
            if at + 8 > len(window) or singles > count // 8 + 64:  # many: the plain loop is faster
                return None
            (length,) = _U64.unpack_from(window, at)
            if length > len(window) - at - 8:
                return None
            got_starts.append(np.array([at + 8], dtype=np.int64))
            got_lengths.append(np.array([length], dtype=np.int64))
            got += 1
            at += 8 + length
    return np.concatenate(got_starts), np.concatenate(got_lengths), at


class BytesMerges(LazyMerges):
    """A merge list still in a file's bytes (``BulkMerges``, ``json_merges.JsonMerges``): ``table``
    builds the merge table from them, None where the plain path must decide; read as pairs or columns,
    it is parsed (``columns``) on first use."""

    @abstractmethod
    def table(self, vocab: TextIndex, width: int, tokens: Sequence[str]) -> dict[int, int] | None:
        """``stages/bpe.build_merge_table``'s table, or None where the plain path must decide."""


class BulkMerges(BytesMerges):
    """A GGUF merge list still in its bytes, with the token array it refers to, split into pairs by
    ``split`` when read as a sequence."""

    def __init__(self, merges: StringArray, token_records: bytes,
                 split: Callable[[list[bytes]], MergePairs]):
        super().__init__(len(merges))
        self.merges, self.token_records, self._split = merges, token_records, split

    def columns(self) -> MergePairs:
        return self._split(self.merges.items)

    def table(self, vocab: TextIndex, width: int, tokens: Sequence[str]) -> dict[int, int] | None:
        """``stages/bpe.build_merge_table``'s table, or None where the plain path must decide."""
        import numpy as np

        merges, count = self.merges, len(self.merges)
        if len(vocab) != len(tokens):
            return None  # a text listed twice: the vocabulary's index answers its later id
        found = _follow(np, self.token_records, len(tokens))
        if found is None or found[2] != len(self.token_records):
            return None
        token_starts, token_lengths, _ = found
        data = _padded(np, merges.window)
        spaces = _spaces(np, data, merges.starts, merges.lengths)
        if spaces is None:
            return None
        starts, lengths = merges.starts, merges.lengths
        # the halves, and each result as it stands once the spaces are gone
        joined = np.delete(data, spaces)
        query_data = [(data, starts, spaces - starts), (data, spaces + 1, starts + lengths - spaces - 1),
                      (joined, starts - np.arange(count), lengths - 1)]
        token_data = _padded(np, self.token_records)
        return _table(np, (token_data, token_starts, token_lengths), query_data, vocab, width, "surrogateescape")


def table_of_texts(halves: Iterable[str], count: int, vocab: TextIndex, width: int,
                   tokens: Sequence[str]) -> dict[int, int] | None:
    """``stages/bpe.build_merge_table``'s table for merges given as strings (a tokenizer.json's): ``halves``
    is left 0, right 0, left 1, ... Each side is joined at NULs and encoded once; the rest is as for
    a GGUF's bytes. None where the plain path must decide (a half that is no string, a NUL in a text,
    a text listed twice, a half or result that is no token)."""
    import numpy as np

    try:
        text = "\0".join(halves)
    except TypeError:
        return None
    if text.count("\0") != 2 * count - 1:
        return None
    # surrogatepass: a lone surrogate (JSON's "\ud800") is a 3-byte sequence, the same on both sides
    data = _padded(np, text.encode("utf-8", "surrogatepass"))
    starts, lengths = _parts(np, data)
    (lefts, rights), (left_sizes, right_sizes) = (starts[0::2], starts[1::2]), (lengths[0::2], lengths[1::2])
    joined = np.delete(data, rights - 1)  # the NUL inside each merge gone: left and right abut
    query_data = [(data, lefts, left_sizes), (data, rights, right_sizes),
                  (joined, lefts - np.arange(count), left_sizes + right_sizes)]
    return table_of_queries(query_data, vocab, width, tokens)


def table_of_queries(queries: list[tuple[Any, Any, Any]], vocab: TextIndex, width: int,
                     tokens: Sequence[str]) -> dict[int, int] | None:
    """The merge table from the left halves, right halves and results as (padded uint8 buffer, starts,
    lengths), against token texts (joined at NULs and encoded once); None where the plain path must
    decide (a NUL in a token, a text listed twice, a half or result that is no token)."""
    import numpy as np

    if len(vocab) != len(tokens):
        return None
    try:
        token_text = "\0".join(tokens)
    except TypeError:
        return None
    if token_text.count("\0") != len(tokens) - 1:
        return None
    token_data = _padded(np, token_text.encode("utf-8", "surrogatepass"))
    return _table(np, (token_data, *_parts(np, token_data)), queries, vocab, width, "surrogatepass")


def _parts(np: Any, data: Any) -> tuple[Any, Any]:
    """Starts and lengths of the NUL-separated texts of ``data`` (less its 8 bytes of padding)."""
    ends = np.append(np.flatnonzero(data[:-8] == 0), len(data) - 8)
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    return starts, ends - starts


def _table(np: Any, tokens: tuple[Any, Any, Any], queries: list[tuple[Any, Any, Any]], vocab: TextIndex,
           width: int, errors: str) -> dict[int, int] | None:
    """The merge table from byte strings: ``tokens`` (data, starts, lengths), ``queries`` the same for
    the left halves, the right halves and the results; ``errors``: how texts decode for the vocabulary."""
    token_keys = _keys(np, *tokens)
    index = _Index(np, *token_keys)
    left_query, right_query, result_query = queries
    left = _lookup(np, index.find(*_keys(np, *left_query)), left_query, tokens, vocab, errors)
    right = _lookup(np, index.find(*_keys(np, *right_query)), right_query, tokens, vocab, errors)
    result_keys = _keys(np, *result_query)
    found = _in_token_order(np, index, token_keys, result_keys, result_query)
    merged = _lookup(np, index.find(*result_keys) if found is None else found, result_query, tokens, vocab, errors)
    if left is None or right is None or merged is None:
        return None
    keys = left * width + right
    values = np.arange(len(left), dtype=np.int64) * width + merged
    return dict(zip(keys[::-1].tolist(), values[::-1].tolist()))  # a repeated pair's first rank wins


def _lookup(np: Any, found: Any, query: tuple[Any, Any, Any], tokens: tuple[Any, Any, Any], vocab: TextIndex,
            errors: str) -> Any:
    """``found`` (token ids by key, -1: none) made sure, or None if some string is no token. A string
    over 16 bytes was keyed by its ends only: the bytes between must match too, else (two long tokens
    alike at both ends, or no such token) it is looked up by its text."""
    buffer, at, size = query
    token_data, token_starts, _ = tokens
    long = np.flatnonzero((size > _EXACT) & (found >= 0))
    mismatched = long[~_same_bytes(np, buffer, at[long], token_data, token_starts[found[long]], size[long])]
    unsure = np.concatenate([mismatched, np.flatnonzero((size > _EXACT) & (found < 0))])
    if len(unsure):
        raw = buffer[:len(buffer) - 8].tobytes()
        found[unsure] = [vocab.get(raw[a:a + n].decode("utf-8", errors), -1)
                         for a, n in zip(at[unsure].tolist(), size[unsure].tolist())]
    return None if (found < 0).any() else found


def _in_token_order(np: Any, index: _Index, token_keys: tuple[Any, ...], keys: tuple[Any, ...],
                    query: tuple[Any, Any, Any]) -> Any:
    """Ids of the merge results when they are tokens in id order, one run of merges per token (GPT-2,
    Qwen2: one merge each; Llama 3: 280k merges make 128k tokens in order), found without the index:
    each result unlike the one before is the next token, and every key is checked against its token's
    (the caller compares the bytes of long ones). None when that does not hold."""
    first, last, size, _ = keys
    data, starts, lengths = query
    start = index.find(*(key[:1] for key in keys))[0]
    if start < 0:
        return None
    step = np.empty(len(size), dtype=np.int64)
    step[0] = start
    step[1:] = (first[1:] != first[:-1]) | (last[1:] != last[:-1]) | (size[1:] != size[:-1])
    alike = np.flatnonzero((step[1:] == 0) & (lengths[1:] > _EXACT)) + 1  # long, alike at both ends: same bytes?
    step[alike] = ~_same_bytes(np, data, starts[alike], data, starts[alike - 1], lengths[alike])
    found = np.cumsum(step)
    if found[-1] >= len(token_keys[0]):
        return None
    token_first, token_last, token_size, _ = token_keys
    same = (token_first[found] == first) & (token_last[found] == last) & (token_size[found] == size)
    return found if same.all() else None


def _same_bytes(np: Any, data: Any, starts: Any, other: Any, other_starts: Any, lengths: Any) -> Any:
    """Whether each string of ``data`` equals the one of ``other`` (same length, given): one gather of
    all their bytes."""
    if not len(lengths):
        return np.zeros(0, dtype=bool)
    offsets = np.cumsum(lengths) - lengths  # where each string's bytes begin in the gather
    string = np.repeat(np.arange(len(lengths)), lengths)
    inside = np.arange(int(offsets[-1] + lengths[-1])) - offsets[string]
    equal = data[starts[string] + inside] == other[other_starts[string] + inside]
    return np.logical_and.reduceat(equal, offsets)


def _spaces(np: Any, data: Any, starts: Any, lengths: Any) -> Any:
    """Where each merge text's space is, when each holds exactly one and not first; else None."""
    text = data.copy()
    text[starts - 8] = 0  # blank the length fields: their low byte, and the others of 256+ byte texts
    long = starts[lengths >= 256]
    for byte in range(1, 8):
        text[long - 8 + byte] = 0
    spaces = np.flatnonzero(text == 32)
    # n spaces in all, the k-th inside text k and not its first byte: exactly one each
    if len(spaces) != len(starts) or not ((starts < spaces) & (spaces < starts + lengths)).all():
        return None
    return spaces


def _keys(np: Any, data: Any, starts: Any, lengths: Any) -> tuple[Any, Any, Any, Any]:
    """(first 8 bytes, last 8 bytes or 0, length, hash) of each string — the string itself up to 16
    bytes (``data`` ends with 8 zero bytes of padding)."""
    words = np.ndarray(shape=(len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    masks = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
    first = words[starts]
    first &= masks[np.minimum(lengths, 8)]
    last = words[np.maximum(starts + lengths - 8, starts)]
    last[lengths <= 8] = 0
    size = lengths.astype(np.uint64)
    digest = first * np.uint64(_HASH_A)
    digest ^= (last + size) * np.uint64(_HASH_B)
    digest ^= digest >> np.uint64(29)
    return first, last, size, digest


class _Index:
    """Token keys sorted by hash bucket: a query compares its bucket's keys in turn, all queries at once."""

    def __init__(self, np: Any, first: Any, last: Any, size: Any, digest: Any):
        self.np = np
        bits = max(10, len(digest).bit_length() + 1)  # buckets hold ~0.5 tokens on average
        self.shift = np.uint64(64 - bits)
        bucket = (digest >> self.shift).astype(np.int64)
        self.ids = np.argsort(bucket, kind="stable")
        self.first, self.last, self.size = first[self.ids], last[self.ids], size[self.ids]
        self.bounds = np.zeros((1 << bits) + 1, dtype=np.int64)  # bucket b: rows bounds[b] to bounds[b + 1]
        np.cumsum(np.bincount(bucket, minlength=1 << bits), out=self.bounds[1:])

    def find(self, first: Any, last: Any, size: Any, digest: Any) -> Any:
        """Token id of each query whose key a token has, else -1."""
        np = self.np
        bucket = (digest >> self.shift).astype(np.int64)
        at, stop = self.bounds[bucket], self.bounds[bucket + 1]
        found = np.full(len(digest), -1, dtype=np.int64)
        todo = np.flatnonzero(at < stop)
        while len(todo):
            row = at[todo]
            hit = self.first[row] == first[todo]
            hit &= self.last[row] == last[todo]
            hit &= self.size[row] == size[todo]
            found[todo[hit]] = self.ids[row[hit]]
            todo = todo[~hit]
            at[todo] += 1
            todo = todo[at[todo] < stop[todo]]
        return found
