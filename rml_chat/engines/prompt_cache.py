"""A prompt cache across runs (``-p``, ``--batch``, ``--check``): llama.cpp's state kept on disk at the
end of a run, and the longest prefix a later run's prompt shares with a kept state restored instead of
evaluated.

Worked example, a 2,000-token system prompt and a new question each run::

    run 1   evaluates [system 2000][question 1 + glue 20], replies 40   -> keeps a state of 2,060 ids
    run 2   [system 2000][question 2 + glue 22]: shares 2,004 ids with it (the system prompt and the
            user header) -> restores the state, drops the cells past 2,004, evaluates 18

One state per run, taken at its end, covers both places a later prompt parts from it — the end of the
system prompt (a new question) and the end of the prompt (the same prompt again) — because a restore
keeps whatever prefix is shared and drops the rest of the cells (``LlamaModel.keep``). A state is kept
only when it holds at least ``WORTH_KEEPING`` tokens more than the entry it was restored from (else run
after run of new questions would each write a copy of the same system prompt); a restore is done when it
saves at least ``WORTH_RESTORING`` tokens of evaluation (measured: docs/performance.md).

Each entry is a ``/save`` state file (``kv_cache.write_state``): stamped with the weights file's path,
size and mtime, the context size and the exact cached ids, written atomically, CRC-checked when read, and
its ids matched token for token before use. A stale, damaged or foreign entry is passed over (said with
``--verbose``); the folder is bounded by size, the least recently used going first. A read-only or full
disk never fails a run: the state is simply not kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import kv_cache
from .base import common_prefix, prune_oldest

WORTH_RESTORING = 16   # tokens of evaluation a restore must save (it wins from there: docs/performance.md)
WORTH_KEEPING = 64     # tokens a new state must hold beyond the entry it came from (a file per run costs disk)
DEFAULT_CAP = 2_000_000_000
NOTE_EVERY = 256_000_000  # bytes: the user is told each time the cache grows past another this many


@dataclass
class Hit:
    path: Path
    shared: int  # the ids it shares with the prompt


_ENTRY_NAME = re.compile(r"[0-9a-f]{24}\.kv")


def is_entry(path: Path) -> bool:
    """Whether ``path`` is one of the cache's own entries: its name as ``keep`` makes them, and the header
    ``kv_cache`` writes (a user's ``notes.kv`` in the same folder is neither counted nor removed)."""
    return bool(_ENTRY_NAME.fullmatch(path.name)) and path.is_file() and kv_cache.read_header(path) is not None


class PromptCache:
    """``say``: what only ``--verbose`` shows (an entry passed over); ``note``: what the user is always told
    (the folder grew past another ``NOTE_EVERY`` bytes: where it is, its cap, how to change either)."""

    def __init__(self, folder: Path, cap: int = DEFAULT_CAP, say: Callable[[str], None] = lambda _: None,
                 note: Callable[[str], None] = lambda _: None):
        self.folder, self.cap, self.say, self.note = folder, cap, say, note
        self.restored_from: Hit | None = None
        self._headers: list[tuple[Path, dict]] | None = None  # read once a run: a batch asks every line

    def _entries(self) -> list[tuple[Path, dict]]:
        if self._headers is None:
            self._headers = []
            try:
                paths = sorted(p for p in self.folder.glob("*.kv") if p.is_file())  # (a FIFO would hang)
            except OSError:
                paths = []
            for path in paths:
                header = kv_cache.read_header(path)
                if header is None:
                    self.say(f"prompt cache: {path.name} passed over: not one of rml-chat's state files")
                else:
                    self._headers.append((path, header))
        return self._headers

    def best(self, stamp: dict, ids: Sequence[int], better_than: int) -> Hit | None:
        """The entry of these weights and context size that shares the longest prefix with ``ids``, when
        it shares ``WORTH_RESTORING`` more than ``better_than`` (what the context holds already)."""
        best: Hit | None = None
        for path, header in self._entries():
            shared = common_prefix(header["ids"], ids)
            if shared < better_than + WORTH_RESTORING or (best is not None and shared <= best.shared):
                continue
            changed = next((key for key, value in stamp.items() if header.get(key) != value), None)
            if changed is not None:  # it would have served: say why it can't
                self.say(f"prompt cache: {path.name} passed over: saved with "
                         f"{'another context size' if changed == 'n_ctx' else 'other weights'}")
                continue
            best = Hit(path, shared)
        return best

    def used(self, hit: Hit) -> None:
        self.restored_from = hit
        with contextlib.suppress(OSError):
            os.utime(hit.path)  # least recently used goes first

    def worth_keeping(self, ids: Sequence[int]) -> bool:
        base = self.restored_from.shared if self.restored_from is not None else 0
        return len(ids) - base >= WORTH_KEEPING

    def keep(self, stamp: dict, ids: Sequence[int], state: bytes) -> str:
        """Write the state (then prune to the cap); "" when kept, else why not (never raises for a disk)."""
        name = hashlib.sha1(json.dumps([stamp, list(ids)]).encode()).hexdigest()[:24] + ".kv"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            kv_cache.write_state(self.folder / name, state, stamp, ids)
        except OSError as err:
            return f"the prompt cache can't be written ({err.strerror or err})"
        prune_oldest(self.folder, self.cap, self.folder / name, owns=is_entry)
        self._headers = None
        self._note_growth(self.folder / name)
        return ""

    def _note_growth(self, written: Path) -> None:
        """One line when the entries together pass another ``NOTE_EVERY`` bytes with the one just written
        (a state is about 22 KB a token on SmolLM2: a long prompt's is hundreds of MB)."""
        with contextlib.suppress(OSError):
            sizes = {p: p.stat().st_size for p in self.folder.iterdir() if _ENTRY_NAME.fullmatch(p.name)}
            total = sum(sizes.values())
            if total // NOTE_EVERY > (total - sizes.get(written, 0)) // NOTE_EVERY:
                self.note(f"the prompt cache holds {total / 1e6:,.0f} MB of llama.cpp's state now ({self.folder}; "
                          f"at most {self.cap / 1e9:g} GB, the least recently used first; RML_CHAT_PROMPT_CACHE_MAX "
                          "sets it, --prompt-cache off turns it off)")
