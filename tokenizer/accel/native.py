"""The C twins of the reference loops (``_cmerge*.c``): built by pip install where a C compiler is, optional.

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
from typing import Any

from . import enabled

try:  # built by pip install (setup.py); optional
    from ._cmerge import RankedTable, ScoredVocab
    from ._cmerge import read_strings as _read_strings
except ImportError:  # not built (no C compiler, or a bare source tree): the reference loops run
    RankedTable = ScoredVocab = _read_strings = None  # type: ignore[assignment,misc]

#: the score of a pair that is not a token (as in stages/bpe.py).
_NO_TOKEN = float("-inf")


def built() -> bool:
    """Whether the C extension was built (tests/test_accel_native.py fails when it was not)."""
    return ScoredVocab is not None


def wanted() -> bool:
    """Whether the C loops run: built, the accelerator on, and not turned off with ``RML_CHAT_NATIVE=off``."""
    return built() and enabled() and os.environ.get("RML_CHAT_NATIVE") != "off"


def scored_vocab(tokens: list[str], scores: list[float] | None) -> Any:
    """``merge_scored`` in C for this vocabulary: ``.encode(chunk)`` gives the ids (``-1 - code point`` for a
    character that is no token), or None for a chunk over ``SHORT_WORD`` characters. None when not wanted
    or the tables are not plain lists of str and float."""
    if not wanted() or type(tokens) is not list or type(scores) not in (list, type(None)):
        return None
    if scores is None or len(scores) != len(tokens):  # as zip() pairs them: a token past the scores never merges
        scores = (scores or [])[:len(tokens)] + [_NO_TOKEN] * (len(tokens) - len(scores or []))
    try:
        return ScoredVocab(tokens, scores)
    except (TypeError, ValueError):
        return None


def ranked_table(merges: dict[int, int], width: int, vocab: dict[str, int]) -> Any:
    """``merge_ranked`` in C for this table: ``.merge(ids)`` gives the merged ids; ``.encode(chunk)`` merges a
    chunk's characters (their tokens; ``width - 1`` for one with none) and gives ids as
    ``ScoredVocab.encode`` does. Each gives None for a word over ``SHORT_WORD`` units. None when not wanted."""
    if not wanted() or type(merges) is not dict or type(vocab) is not dict:
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
