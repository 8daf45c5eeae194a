"""The optional accelerator: speed only, never behaviour.

The reference path (``tokenizer/loaders``, ``tokenizer/stages``, ``tokenizer/core.py``) is complete on its
own and defines every id. Each piece here does one of its steps faster and answers "not handled" (None)
whenever it is off, not built, or meets anything unusual; the caller then runs the reference step, which
gives the same result or names what is wrong. The tests hold each piece to the reference step
(``tests/test_accel_*.py``).

* ``native`` (``_cmerge*.c``, an optional C extension): the short-word merge loops (reference:
  ``stages/bpe.py``) and GGUF string arrays (reference: the loop in ``loaders/gguf_reader.py``);
* ``bulk`` (numpy): a big merge list's table (reference: ``stages/bpe.build_merge_table``) and a big GGUF
  string array (reference: the reader's loop);
* ``json_merges`` (numpy): a big tokenizer.json's merges read from its bytes (reference: ``json.loads``);
* ``table_cache`` (marshal): every load after a model's first (reference: the whole load).

One switch turns all of them off: ``RML_CHAT_ACCEL=off``. (``RML_CHAT_NATIVE=off`` turns off the C loops
alone, ``RML_CHAT_TOKENIZER_CACHE=off`` the table cache alone.) What each buys is measured in
docs/performance.md.
"""

from __future__ import annotations

import os
from abc import abstractmethod
from functools import cached_property

from ..spec import MergePairs, Merges

_OFF = ("off", "0", "no", "false")


def enabled() -> bool:
    """Whether the accelerator runs at all (``RML_CHAT_ACCEL``; read on every call, so a test can flip it)."""
    return os.environ.get("RML_CHAT_ACCEL", "").lower() not in _OFF


class LazyMerges(Merges):
    """``Merges`` whose columns are made on their first read (``columns()``), whose length is known before:
    a merge list still in a file's bytes, or one rebuilt from a cached table. The engine asks ``table``
    first, so a load that answers it never makes the columns."""

    def __init__(self, count: int):
        self._count = count

    def __len__(self) -> int:
        return self._count

    @cached_property
    def pairs(self) -> MergePairs:
        return self.columns()

    @property  # type: ignore[override]
    def lefts(self) -> list[str]:
        return self.pairs.lefts

    @property  # type: ignore[override]
    def rights(self) -> list[str]:
        return self.pairs.rights

    @abstractmethod
    def columns(self) -> MergePairs:
        """The pairs as columns, made from whatever this list holds."""
