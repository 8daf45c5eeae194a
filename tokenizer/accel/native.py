"""The C twins of the reference loops (``_cmerge*.c``): built by pip install where a C compiler is, optional.

* ``packed_tokens``: the vocabulary's texts and its text-to-id index (reference: a list of str and
  ``dict(zip(tokens, ids))``) in a fifth of the memory;
* ``scored_vocab``: ``stages/bpe.merge_scored`` (score-based SentencePiece) for words up to
  ``bpe.SHORT_WORD`` characters;
* ``ranked_table``: ``stages/bpe.merge_ranked`` (merge lists), the same;
* ``read_strings``: the string-array loop of ``loaders/gguf_reader.py``.

Each answers None when the module is not built, the accelerator is off, or the input is not plain
(``"1.5"`` is a score to ``float`` but not to C): the reference loop then runs, with the same result
(tests/test_accel_native.py holds the two to the same ids).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from operator import eq
from typing import Any

from . import enabled

try:  # built by pip install (setup.py); optional
    from ._cmerge import RankedTable, ScoredVocab, TokenIndex, TokenTable
    from ._cmerge import read_strings as _read_strings
except ImportError:  # not built (no C compiler, or a bare source tree): the reference loops run
    RankedTable = ScoredVocab = TokenIndex = TokenTable = _read_strings = None  # type: ignore[assignment,misc]

if TokenTable is not None:
    class PackedTokens(TokenTable):  # type: ignore[misc,valid-type]
        """A vocabulary's texts, packed (``_cmerge_table.c``): a sequence of str by id, as the list it was
        made from, whose ``index()`` reads as the reference's ``dict(zip(tokens, ids))`` (later duplicates
        win). Equal to a list or tuple of the same texts."""

        __slots__ = ()
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other: object) -> bool:
            if not isinstance(other, (list, tuple, TokenTable)):
                return NotImplemented
            return len(self) == len(other) and all(map(eq, self, other))

        def __reduce__(self) -> tuple:
            return PackedTokens, (list(self),)

        def __repr__(self) -> str:
            return f"PackedTokens({len(self)} tokens, {self.nbytes()} bytes)"

    Sequence.register(PackedTokens)

#: the score of a pair that is not a token (as in stages/bpe.py).
_NO_TOKEN = float("-inf")


def built() -> bool:
    """Whether the C extension was built (tests/test_accel_native.py fails when it was not)."""
    return ScoredVocab is not None


def wanted() -> bool:
    """Whether the C loops run: built, the accelerator on, and not turned off with ``RML_CHAT_NATIVE=off``."""
    return built() and enabled() and os.environ.get("RML_CHAT_NATIVE") != "off"


def packed_tokens(tokens: Sequence[str]) -> Any:
    """``tokens`` packed (``PackedTokens``): the same texts by id, and the index by text. ``tokens`` itself
    when already packed; None when not wanted or not a plain list of str."""
    if not wanted():
        return None
    if isinstance(tokens, TokenTable):
        return tokens
    if type(tokens) is not list:
        return None
    try:
        return PackedTokens(tokens)
    except (TypeError, ValueError):
        return None


def scored_vocab(tokens: Sequence[str], scores: Sequence[float] | None) -> Any:
    """``merge_scored`` in C for this vocabulary: ``.encode(chunk)`` gives the ids (``-1 - code point`` for a
    character that is no token), or None for a chunk over ``SHORT_WORD`` characters; ``.get(text,
    default)`` is a token's score (the reference's ``dict(zip(tokens, scores))``, for longer chunks). None
    when not wanted or the tables are not plain lists of str and float."""
    table = packed_tokens(tokens)
    if table is None or type(scores) not in (list, array, type(None)):
        return None
    if scores is None or len(scores) != len(table):  # as zip() pairs them: a token past the scores never merges
        scores = list(scores or [])[:len(table)] + [_NO_TOKEN] * (len(table) - len(scores or []))
    try:
        return ScoredVocab(table, scores)
    except (TypeError, ValueError):
        return None


def ranked_table(merges: dict[int, int], width: int, vocab: Any) -> Any:
    """``merge_ranked`` in C for this table: ``.merge(ids)`` gives the merged ids; ``.encode(chunk)`` merges a
    chunk's characters (their tokens; ``width - 1`` for one with none) and gives ids as
    ``ScoredVocab.encode`` does. Each gives None for a word over ``SHORT_WORD`` units. None when not wanted."""
    if not wanted() or type(merges) is not dict or type(vocab) not in (dict, TokenIndex):
        return None
    try:
        return RankedTable(merges, width, vocab)
    except (TypeError, ValueError, OverflowError):
        return None


def read_strings(buf: Any, pos: int, end: int, count: int, decode: bool) -> tuple[list, int] | None:
    """``count`` GGUF strings from ``buf[pos:end]``: (strings, position after them), or None when not wanted
    or anything is unusual (the reference loop then reads them and names what is wrong)."""
    if not wanted():
        return None
    return _read_strings(buf, pos, end, count, decode)
