"""A step of llama.cpp's sampling drawn in Python: every token's entry filled from a position's logits, the
chain applied (``llama_sampler_apply``), and what it selects read back before anything is accepted.

``llama_sampler_sample`` does the same in C and accepts the token at once. Drawn here, the token can be looked
at first: a lazy grammar's trigger that would fire with text the grammar refuses (trigger_guard.py), or a
step where the grammar and the logit biases left no token at all (``Sampler.sample_short``); in both,
llama.cpp's grammar would throw on accepting it. The same chain applied to the same candidates selects the
same token, so a seeded reply draws the same either way.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from types import ModuleType


class Candidates:
    """Every token's entry for a step drawn here rather than by ``llama_sampler_sample``, which applies
    the chain to the same array and accepts what it selects: drawn here, the token can be looked at first.
    The buffer is made once and filled from the position's logits at each step (~0.1-0.4 ms)."""

    def __init__(self, lib: ModuleType, n_vocab: int) -> None:
        self._lib, self._n_vocab = lib, n_vocab
        self._buffer = (lib.llama_token_data * n_vocab)()

    def apply(self, chain: object, logits: object, left_out: Sequence[int] = ()) -> tuple[int, float]:
        """The chain applied to the candidates of ``logits`` (a C pointer to a position's), ``left_out``
        made impossible first: (the id it selects, that id's logit after the chain; -inf where the chain left
        none). Nothing is accepted."""
        import numpy as np

        view = np.ctypeslib.as_array(self._buffer).view(np.dtype([("id", np.int32), ("logit", np.float32),
                                                                  ("p", np.float32)]))
        view["id"], view["p"] = np.arange(self._n_vocab, dtype=np.int32), 0.0  # (the chain sorts the array
        view["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))  # in place: filled each time)
        view["logit"][list(left_out)] = -np.inf
        candidates = self._lib.llama_token_data_array(self._buffer, self._n_vocab, -1, False)
        self._lib.llama_sampler_apply(chain, ctypes.byref(candidates))
        if candidates.selected < 0:
            return -1, -math.inf
        chosen = candidates.data[candidates.selected]
        return int(chosen.id), float(chosen.logit)


def allowed(lib: ModuleType, grammar: object, tokens: Sequence[int]) -> list[int]:
    """Those of ``tokens`` a grammar sampler allows now: its ``llama_sampler_apply`` to them alone, which
    changes nothing (accepting one it refuses is what throws)."""
    some = (lib.llama_token_data * len(tokens))(*(lib.llama_token_data(t, 0.0, 0.0) for t in tokens))
    lib.llama_sampler_apply(grammar, ctypes.byref(lib.llama_token_data_array(some, len(tokens), -1, False)))
    return [entry.id for entry in some if entry.logit != -math.inf]
