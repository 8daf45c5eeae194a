"""A persistent cache of built tokenizer tables: the second load of a model reads flat lists back.

Why: a cold load of a 128k-token byte-level vocabulary does ~2 M Python-level operations — 400k
length-prefixed strings read from the GGUF (or a 17 MB JSON parsed), then each of 280k merges split and
its halves and result looked up by text to build the merge table: slower than llama.cpp's C++ load.
What it produces is small and flat: the spec's fields and the merge table's int keys and values.
``marshal`` writes those in one C call and reads them back in a fraction of the time
(docs/performance.md; ``scripts/bench_tokenizer.py``: "load ours warm").

Entries: one file per source (named by a hash of its resolved path), holding a stamp — size, mtime and
inode of every file the loader reads (the GGUF, or tokenizer.json and its config files), plus a hash of
this package's own source, so a changed file *or* a changed loader is a miss and the entry is rebuilt
(overwritten: a model has one entry however often it changes). Only vocabularies with merges and at
least ``MIN_TOKENS`` tokens are cached: small ones load in milliseconds anyway, and a score-based
SentencePiece GGUF (no merge table) loads as fast cold as from an entry.

Safety: an entry is written to a temporary file and renamed into place, and carries a CRC32 of its
payload; a missing, truncated, corrupt or foreign entry is a miss, never an error, and a write that
fails (read-only or full disk) is skipped. Warnings the cold load logged are stored and logged again.

Where: ``$RML_CHAT_TOKENIZER_CACHE`` (a directory, or ``off``), else ``cache_dir() / "tokenizers"``; off too
with the whole accelerator (``RML_CHAT_ACCEL=off``).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import marshal
import os
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cache_dirs import cache_folder, source_hash
from ..spec import (
    AddedTokens,
    Decoder,
    MergePairs,
    Model,
    Normalizer,
    PostProcess,
    PreSplit,
    TextIndex,
    TokenizerSpec,
    Vocabulary,
)
from . import LazyMerges, enabled, native

log = logging.getLogger("tokenizer")

#: bump when the layout of an entry changes (the source hash covers changes of meaning).
FORMAT = 2
MIN_TOKENS = 10_000


def tables_dir() -> Path | None:
    """Where entries live, or None when the cache (or the accelerator) is turned off."""
    if not enabled():
        return None
    return cache_folder("RML_CHAT_TOKENIZER_CACHE", "tokenizers")


def _code_hash() -> str:
    return source_hash(Path(__file__).parent.parent)  # the whole tokenizer package: loaders, stages and all


def _stamp(source: Path, files: Sequence[Path]) -> tuple:
    stats = []
    for file in files:
        try:
            st = file.stat()
            stats.append((file.name, st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            stats.append((file.name, None))
    return (FORMAT, _code_hash(), str(source), tuple(stats))


def _entry_path(root: Path, source: Path) -> Path:
    return root / (hashlib.sha1(str(source).encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".tables")


class PackedMerges(LazyMerges):
    """A cached tokenizer's merges: ``table`` answers with the cached merge table itself, and the pairs in
    rank order are rebuilt from it only if someone reads them. A pair listed twice appears once, at its
    first rank — the one the engine uses. The table is keyed as the merge models key theirs (``width``:
    the vocabulary's size + 1)."""

    def __init__(self, table: dict[int, int], tokens: Sequence[str]):
        super().__init__(len(table))
        self._table, self._tokens, self._width = table, tokens, len(tokens) + 1

    def table(self, vocab: TextIndex, width: int, tokens: Sequence[str]) -> dict[int, int] | None:
        return self._table if width == self._width else None

    def columns(self) -> MergePairs:
        tokens, width = self._tokens, self._width
        by_rank = sorted(self._table.items(), key=lambda item: item[1])
        return MergePairs([tokens[key // width] for key, _ in by_rank], [tokens[key % width] for key, _ in by_rank])


#: the spec's parts; each is stored as its fields, enums as their values (the parts take those back).
_PARTS = {"vocab": Vocabulary, "model": Model, "normalizer": Normalizer, "pre_split": PreSplit,
          "added": AddedTokens, "post": PostProcess, "decoder": Decoder}


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    return tuple(map(_plain, value)) if isinstance(value, tuple) else value


@dataclasses.dataclass
class Entry:
    spec: TokenizerSpec
    warnings: list[str]


def read(source: Path, files: Sequence[Path]) -> Entry | None:
    """The cached tables of ``source`` (read from ``files``: the GGUF, or tokenizer.json and its config
    files), or None (cache off, no entry, stale or unreadable entry)."""
    root = tables_dir()
    if root is None:
        return None
    try:
        source = source.resolve()
        blob = _entry_path(root, source).read_bytes()
        if len(blob) < 4 or zlib.crc32(blob[4:]) != int.from_bytes(blob[:4], "little"):
            return None
        stamp, fields, table, warnings = marshal.loads(blob[4:])
        if stamp != _stamp(source, files):
            return None
        has_merges = fields["model"].pop("merges") is not None  # the table stands for them
        packed = native.packed_tokens(fields["vocab"]["tokens"])  # shared with the merges below: one copy
        if packed is not None:
            fields["vocab"]["tokens"] = packed
        parts = {name: part(**fields[name]) for name, part in _PARTS.items()}
        tokens = parts["vocab"].tokens
        if has_merges:
            parts["model"].merges = PackedMerges(table, tokens)
        spec = TokenizerSpec(**parts, source=fields["source"], chat_template=fields["chat_template"])
        return Entry(spec, list(warnings))
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return None


def write(source: Path, files: Sequence[Path], spec: TokenizerSpec, merge_table: dict[int, int],
          warnings: list[str]) -> bool:
    """Store the tables of a freshly built tokenizer (big vocabularies only); failures are skipped.
    True: stored."""
    root = tables_dir()
    if root is None or len(spec.vocab.tokens) < MIN_TOKENS or not merge_table:
        return False
    fields: dict[str, Any] = {name: {f.name: _plain(getattr(getattr(spec, name), f.name))
                                     for f in dataclasses.fields(part)} for name, part in _PARTS.items()}
    fields["vocab"]["tokens"] = list(spec.vocab.tokens)  # plain lists: marshal takes no packed table nor array
    if spec.vocab.scores is not None:
        fields["vocab"]["scores"] = list(spec.vocab.scores)
    if spec.vocab.types is not None:
        fields["vocab"]["types"] = list(map(int, spec.vocab.types))  # TokenType members are ints marshal refuses
    fields["model"]["merges"] = None if spec.model.merges is None else True  # the table stands for them
    fields.update(source=spec.source, chat_template=spec.chat_template)
    try:
        source = source.resolve()
        payload = marshal.dumps((_stamp(source, files), fields, merge_table, warnings))
        root.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=root, prefix=".tables-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(zlib.crc32(payload).to_bytes(4, "little") + payload)
            os.replace(temp, _entry_path(root, source))
        except BaseException:
            os.unlink(temp)
            raise
    except (OSError, ValueError) as err:  # ValueError: marshal of an unexpected value
        log.debug("tokenizer table cache: not written for %s (%s)", source, err)
        return False
    return True
