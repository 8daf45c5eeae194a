"""The accelerator's answers to the reference path's hooks (``tokenizer/speedups.py``): each hook asks
the piece that does that step faster, and passes on its None ("not handled").

=================  ===================================================
hook               piece
=================  ===================================================
``strings``        ``bulk.parse_strings`` (a big raw array, numpy), else ``native.read_strings`` (C)
``gguf_merges``    ``bulk.BulkMerges`` (the table built from the file's bytes)
``json_merges``    ``json_merges.split_off``
``merge_table``    ``bulk.merge_table``
``packed_tokens``  ``native.packed_tokens``
``ranked_merger``  ``native.ranked_table``
``scored_merger``  ``native.scored_vocab``
``cached, keep``   ``table_cache``
=================  ===================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..spec import MergePairs, Merges, TextIndex, TokenizerSpec
from ..speedups import Speedups
from . import bulk as arrays
from . import json_merges, native, table_cache


class Accelerator(Speedups):
    def strings(self, buf: Any, pos: int, end: int, count: int, *, decode: bool,
                bulk: bool) -> tuple[Sequence, int] | None:
        in_bulk = bulk and arrays.wanted(count)
        if in_bulk and not decode:  # left in the file's bytes, for gguf_merges
            found = arrays.parse_strings(buf, pos, end, count)
            if found is not None:
                return found
        read = native.read_strings(buf, pos, end, count, decode)
        if read is None and in_bulk and decode:  # no C loop: the records found in bulk, decoded here
            read = self._decoded_in_bulk(buf, pos, end, count)
        if read is None:
            return None
        strings, after = read
        if in_bulk and decode:  # decoded, and the records kept for gguf_merges
            return arrays.RecordList(strings, buf[pos:after]), after
        return strings, after

    @staticmethod
    def _decoded_in_bulk(buf: Any, pos: int, end: int, count: int) -> tuple[list[str], int] | None:
        """A big array's strings decoded from the records ``bulk.parse_strings`` finds (so that its bytes
        stay at hand for ``gguf_merges`` without the C reader)."""
        found = arrays.parse_strings(buf, pos, end, count)
        if found is None:
            return None
        records, after = found
        return [raw.decode("utf-8", "surrogateescape") for raw in records.items], after

    def gguf_merges(self, raw_merges: Sequence[bytes], raw_tokens: Sequence[str] | None,
                    split: Callable[[list[bytes]], MergePairs]) -> Merges | None:
        records = getattr(raw_tokens, "records", None)
        if isinstance(raw_merges, arrays.StringArray) and records is not None:
            return arrays.BulkMerges(raw_merges, records, split)
        return None

    def json_merges(self, raw: bytes) -> tuple[str, Merges, object] | None:
        found = json_merges.split_off(raw)
        return None if found is None else (*found, json_merges.SENTINEL)

    def merge_table(self, merges: Merges, vocab: TextIndex, width: int,
                    tokens: Sequence[str]) -> dict[int, int] | None:
        return arrays.merge_table(merges, vocab, width, tokens)

    def packed_tokens(self, tokens: Sequence[str]) -> Sequence[str] | None:
        return native.packed_tokens(tokens)

    def ranked_merger(self, table: dict[int, int], width: int, vocab: TextIndex) -> Any:
        return native.ranked_table(table, width, vocab)

    def scored_merger(self, tokens: Sequence[str], scores: Sequence[float] | None) -> Any:
        return native.scored_vocab(tokens, scores)

    def cached(self, source: Path, files: Sequence[Path]) -> tuple[TokenizerSpec, list[str]] | None:
        entry = table_cache.read(source, files)
        return None if entry is None else (entry.spec, entry.warnings)

    def keep(self, source: Path, files: Sequence[Path], spec: TokenizerSpec, merge_table: dict[int, int],
             warnings: list[str]) -> None:
        """Write the entry; once written, ``spec``'s merges answer from ``merge_table`` as the next load's
        will, and the merge list's bytes and the token records (SmolLM2: 6 MB) go."""
        if table_cache.write(source, files, spec, merge_table, warnings) and spec.model.merges is not None:
            spec.model.merges = table_cache.PackedMerges(merge_table, spec.vocab.tokens)


ACCELERATOR = Accelerator()
