"""The one seam between the reference path and the optional accelerator (``tokenizer/accel``).

The reference path (``spec.py``, ``loaders/``, ``stages/``, ``core.py``) defines every id and needs
nothing else. At the few steps the accelerator can do faster it asks a ``Speedups`` object, handed to it
by ``tokenizer.load`` (and by ``Tokenizer(spec)``); every hook answers None for "not handled", and the
caller then runs its own step, which gives the same result or names what is wrong. ``Speedups`` itself
handles nothing: it *is* the reference path alone, what ``installed()`` gives where ``tokenizer/accel``
is absent (deleted from the tree, say) or turned off (``RML_CHAT_ACCEL=off``).

=================  ===============================================  ==========================
hook               the reference step it may do faster              asked by
=================  ===============================================  ==========================
``strings``        the GGUF string-array loop                       ``loaders/gguf_reader.py``
``gguf_merges``    splitting a GGUF's merges at their spaces        ``loaders/gguf.py``
``json_merges``    ``json.loads`` of a tokenizer.json's merges      ``loaders/hf.py``
``merge_table``    ``stages/bpe.build_merge_table``                 ``core.py``
``ranked_merger``  ``stages/bpe.merge_ranked`` on short words       ``core.py``
``scored_merger``  ``stages/bpe.merge_scored`` on short words       ``core.py``
``cached``         the whole load of a file loaded before           ``tokenizer.load``
``keep``           (remembering a load for ``cached``)              ``tokenizer.load``
=================  ===============================================  ==========================

What an answer may be: plain data (lists, dicts), or a ``spec.Merges`` whose pairs are made on first read
and which may answer ``table`` with the merge table itself. Either way the ids are the reference's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .spec import MergePairs, Merges, TextIndex, TokenizerSpec


class Speedups:
    """The hooks, each answering None ("not handled"): the reference path alone."""

    def strings(self, buf: Any, pos: int, end: int, count: int, *, decode: bool,
                bulk: bool) -> tuple[Sequence, int] | None:
        """``count`` GGUF strings from ``buf[pos:end]`` (str, or bytes unless ``decode``): (the strings, the
        position after them). ``bulk``: a big array whose bytes a later hook (``gguf_merges``) may use."""
        return None

    def gguf_merges(self, raw_merges: Sequence[bytes], raw_tokens: Sequence[str] | None,
                    split: Callable[[list[bytes]], MergePairs]) -> Merges | None:
        """A GGUF's merges (as ``strings`` gave them, undecoded) as ``Merges``; ``raw_tokens``: the tokens as
        ``strings`` gave them (None: renamed since); ``split``: the reference split, for the pairs."""
        return None

    def json_merges(self, raw: bytes) -> tuple[str, Merges, object] | None:
        """A tokenizer.json's bytes with its merge list cut out: (the rest as text, to parse as JSON; the
        merges; the placeholder that stands for them in ``model.merges`` of the rest)."""
        return None

    def merge_table(self, merges: Merges, vocab: TextIndex, width: int,
                    tokens: Sequence[str]) -> dict[int, int] | None:
        """``stages/bpe.build_merge_table``'s table."""
        return None

    def packed_tokens(self, tokens: Sequence[str]) -> Sequence[str] | None:
        """The token texts in less memory: a sequence of the same texts by id whose ``index()`` reads as the
        reference's ``dict(zip(tokens, ids))`` (``get``, ``[]``, ``in``, ``len``: later duplicates win)."""
        return None

    def ranked_merger(self, table: dict[int, int], width: int, vocab: TextIndex) -> Any:
        """An object whose ``merge(ids)`` is ``bpe.merge_ranked`` and whose ``encode(chunk)`` merges a chunk's
        characters, each answering None for a word it does not take."""
        return None

    def scored_merger(self, tokens: Sequence[str], scores: Sequence[float] | None) -> Any:
        """An object whose ``encode(chunk)`` is ``bpe.merge_scored`` to ids (``-1 - code point`` for a
        character that is no token), None for a chunk it does not take, and whose ``get(text, default)`` is
        a token's score (``merge_scored``'s table, for the chunks it does not take)."""
        return None

    def cached(self, source: Path, files: Sequence[Path]) -> tuple[TokenizerSpec, list[str]] | None:
        """A spec read back for ``source`` (made from ``files``), with the warnings its first load gave."""
        return None

    def keep(self, source: Path, files: Sequence[Path], spec: TokenizerSpec, merge_table: dict[int, int],
             warnings: list[str]) -> None:
        """Remember a load for ``cached`` (and, once remembered, ``spec``'s merges may answer from
        ``merge_table`` as the next load's will)."""
        return None


REFERENCE = Speedups()


def installed() -> Speedups:
    """The accelerator's hooks where ``tokenizer/accel`` is there (each piece still answers None when it is
    off or not built); else ``REFERENCE``."""
    try:
        from .accel.hooks import ACCELERATOR
    except ImportError:
        return REFERENCE
    return ACCELERATOR


log = logging.getLogger("tokenizer")


@contextmanager
def captured_warnings() -> Iterator[list[str]]:
    """Collect the warnings the ``tokenizer`` logger emits inside the block (they still go out): a load's
    warnings, kept with it for ``cached``."""
    messages: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                messages.append(record.getMessage())

    handler = _Collect()
    log.addHandler(handler)
    try:
        yield messages
    finally:
        log.removeHandler(handler)


def replay(warnings: list[str]) -> None:
    """Log again the warnings a load gave when it was first made (``cached``)."""
    for message in warnings:
        log.warning("%s", message)
