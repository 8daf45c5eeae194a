"""llama.cpp's lookup cache files (``-lcs/--lookup-cache-static``, ``-lcd/--lookup-cache-dynamic``): n-grams
counted over earlier text, which ``--spec-type ngram-cache`` drafts from beside the chat's own n-grams
(ngram_drafts.NgramCache).

llama.cpp writes them with ``common_ngram_cache_save``: ``llama-lookup-create`` counts the 2-grams of a
text (a static cache), and ``llama-lookup`` the 1- to 4-grams of what it generated (a dynamic one). A file
is a run of records, every number a little-endian int32::

    t0 t1 t2 t3   n   token count   token count ...   (n pairs)

the n-gram padded with -1 to four tokens, then the n tokens that followed it, each with its count (above 0).
llama.cpp reads a record again with ``emplace``, so the first record of an n-gram wins, and the first pair
of a token in it.

A cache made from a large text holds millions of n-grams. Dicts of tuples would keep some 9 times the file's
size (316 MB for a 36 MB file of a million 2-grams), so the records stay as numpy arrays (``LookupCache``):
the file's numbers, and the n-grams as 16-byte keys, sorted, found by a binary search (about 6 µs a lookup,
a few lookups a drafted token); 3 to 4 times the file's size in all (the process grew by 107-129 MB for
that file). A worked example, a record of the 2-gram (5, 6), followed by 7 three times and 8 once::

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".bin") as f:
    ...     _ = f.write(np.array([5, 6, -1, -1, 2, 7, 3, 8, 1], dtype="<i4").tobytes()); f.flush()
    ...     cache = LookupCache.read(f.name)
    >>> cache.followers((5, 6)), cache.followers((6,)), len(cache)
    ({7: 3, 8: 1}, None, 1)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

NGRAM_MAX = 4  # llama.cpp's LLAMA_NGRAM_MAX: the tokens of a record's n-gram, padded with -1
_RECORD_HEAD = NGRAM_MAX + 1  # the n-gram, then how many followers


class LookupCacheError(ValueError):
    """A file that is not one of llama.cpp's lookup caches; str() says where it stops making sense."""


class LookupCache:
    """The n-grams of one lookup cache file, each with the tokens that followed it and their counts."""

    def __init__(self, keys: np.ndarray, starts: np.ndarray, numbers: np.ndarray, largest_token: int, path: str = ""):
        self._keys = keys        # each n-gram as 16 bytes (padded with -1), sorted
        self._starts = starts    # where its followers' pairs start in ``numbers`` (their count is just before)
        self._numbers = numbers  # the whole file's int32s
        self.largest_token = largest_token  # the largest id it names (-1: none); past the vocabulary: another model's
        self.path = path

    def __len__(self) -> int:
        return len(self._keys)

    @classmethod
    def read(cls, path: str | Path) -> LookupCache:
        """The cache in ``path``; LookupCacheError where it is not one (OSError where it can't be read).

        The file is mapped, not read, while its records are walked: a file given by mistake (a model of
        many gigabytes, a device that never ends) is refused at its first records without being loaded."""
        size = os.stat(path)
        if not stat.S_ISREG(size.st_mode):  # (before it is opened: opening a FIFO waits for a writer)
            raise LookupCacheError("not a regular file")
        with open(path, "rb") as file:
            if file.read(4) == b"GGUF":
                raise LookupCacheError("it is a GGUF file (a model's)")
            if size.st_size % 4:
                raise LookupCacheError(f"{size.st_size} bytes is not a whole number of int32s")
        mapped = np.memmap(path, dtype="<i4", mode="r") if size.st_size else np.empty(0, dtype="<i4")
        heads = _record_heads(mapped)
        numbers = np.array(mapped)  # (a copy, checked: the file may change once read)
        del mapped
        starts = heads + _RECORD_HEAD
        tokens = _pair_positions(starts, numbers[heads + NGRAM_MAX])
        if (numbers[tokens] < 0).any():
            raise LookupCacheError("a follower's token id is below 0")
        if (numbers[tokens + 1] < 1).any():
            raise LookupCacheError("a follower's count is below 1")
        ngrams = numbers[heads[:, None] + np.arange(NGRAM_MAX)]
        if (ngrams < -1).any():
            raise LookupCacheError("an n-gram holds a token id below -1")
        largest = int(max(ngrams.max(initial=-1), numbers[tokens].max(initial=-1)))
        keys = np.ascontiguousarray(ngrams).view("V16").ravel()
        order = np.argsort(keys, kind="stable")  # (an n-gram recorded twice: its first record first)
        keys, starts = keys[order], starts[order]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        return cls(keys[first], starts[first], numbers, largest, str(path))

    def followers(self, ngram: tuple[int, ...]) -> dict[int, int] | None:
        """The tokens that followed ``ngram`` and their counts, in the file's order (None: not in it)."""
        key = np.array([*ngram, *(-1,) * (NGRAM_MAX - len(ngram))], dtype="<i4").tobytes()
        at = int(np.searchsorted(self._keys, np.void(key)))
        if at == len(self._keys) or self._keys[at].tobytes() != key:
            return None
        start = int(self._starts[at])
        pairs = self._numbers[start:start + 2 * int(self._numbers[start - 1])].tolist()
        counts: dict[int, int] = {}
        for token, count in zip(pairs[::2], pairs[1::2]):
            counts.setdefault(token, count)  # (a token listed twice: its first count, as llama.cpp reads it)
        return counts

    def describe(self) -> str:
        return f"{self.path} ({len(self)} n-gram{'s' * (len(self) != 1)})"


def _record_heads(numbers: np.ndarray) -> np.ndarray:
    """Where each record starts in the file's int32s; LookupCacheError where a record is cut short or
    says no token followed its n-gram."""
    heads = []
    at, total = 0, len(numbers)
    while at < total:
        if at + _RECORD_HEAD > total:
            raise LookupCacheError(f"the file ends inside a record's n-gram (int32 {at})")
        n = int(numbers[at + NGRAM_MAX])
        if n <= 0:
            raise LookupCacheError(f"a record says {n} tokens followed its n-gram (int32 {at + NGRAM_MAX})")
        if at + _RECORD_HEAD + 2 * n > total:
            raise LookupCacheError(f"the file ends inside a record's {n} followers (int32 {at})")
        heads.append(at)
        at += _RECORD_HEAD + 2 * n
    return np.array(heads, dtype=np.int64)


def _pair_positions(starts: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """The positions of every follower's token (its count is the int32 after it): ``pairs[i]`` pairs from
    ``starts[i]`` on.

        >>> _pair_positions(np.array([5, 20]), np.array([2, 1])).tolist()
        [5, 7, 20]
    """
    pairs = pairs.astype(np.int64)
    firsts = np.repeat(starts, pairs)
    nth = np.arange(int(pairs.sum())) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    return firsts + 2 * nth
