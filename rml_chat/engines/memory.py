"""Memory checked before it is taken: the KV cache a context needs, against the memory available.

llama.cpp allocates the whole KV cache when it makes a context. A context far larger than memory is not
refused there: the process grows until the kernel's OOM killer ends it, with no message. So before the
context is made, the cache is estimated from the model's own hyperparameters (``runtime.LlamaModel``
reads them through the C API) and compared with the memory available now.

The estimate (``MemoryNeed``) is the KV cache plus llama.cpp's compute buffers, in its default types on
the CPU (f16 keys and values, f32 activations, attention scores held whole: flash attention, which
``-fa auto`` turns on, computes them in tiles, and the scores term below is then an overestimate, kept
because ``auto`` is resolved only once the context exists):

- the KV cache: for every layer, the keys and the values of every KV head, 2 bytes a value;
- the compute buffer: the largest tensor of the graph, which is either the attention scores of one
  micro-batch (``n_ubatch * n_ctx * n_head`` floats) or its logits (``n_ubatch * n_vocab`` floats).

Worked example, SmolLM2-135M (30 layers, 9 heads, 3 KV heads, 64 values a head, 49,152 tokens)::

    KV cache   30 * 3 * (64 + 64) * 2 = 23,040 bytes a token: -c 32768 needs 720 MiB (llama.cpp: 720 MiB)
    compute    max(512 * 32768 * 9, 512 * 49152) * 4 = 576 MiB             (llama.cpp: 646 MiB)

Measured against llama.cpp's own log at -c 2048, 8192 and 32768: the compute
buffer is 11-13% under its size once the scores dominate, and the logits term is Gemma 3's whole 514 MiB buffer
(a 262k vocabulary). A sliding-window cache is counted as a full one, and the buffers' fixed part is
left out, so near the limit the check errs on the side of refusing too late rather than too early.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .base import CTX_STEP

#: llama.cpp's positions are int32: a context can't hold more tokens than this
MAX_CTX = 2**31 - 1


def kv_bytes_per_token(n_layer: int, n_head_kv: int, key_length: int, value_length: int, value_bytes: int = 2) -> int:
    """
        >>> kv_bytes_per_token(30, 3, 64, 64)
        23040
    """
    return n_layer * n_head_kv * (key_length + value_length) * value_bytes


@dataclass(frozen=True)
class MemoryNeed:
    """What a context of n tokens takes beyond the weights (the module docstring's estimate)."""

    kv_per_token: int          # the KV cache's bytes a token
    scores_per_token: int      # the compute buffer's attention scores: n_ubatch * n_head floats a token
    logits: int                # the compute buffer's logits: n_ubatch * n_vocab floats

    @classmethod
    def of(cls, kv_per_token: int, n_head: int, n_vocab: int, n_ubatch: int = 512) -> MemoryNeed:
        return cls(kv_per_token, n_ubatch * n_head * 4, n_ubatch * n_vocab * 4)

    def kv(self, n_ctx: int) -> int:
        return n_ctx * self.kv_per_token

    def compute(self, n_ctx: int) -> int:
        return max(self.logits, n_ctx * self.scores_per_token)

    def total(self, n_ctx: int) -> int:
        """
            >>> MemoryNeed.of(23040, 9, 49152).total(32768) // 10**6
            1358
        """
        return self.kv(n_ctx) + self.compute(n_ctx)

    def largest_fitting(self, available: int) -> int:
        """The largest context, in llama.cpp's steps, whose need is within ``available`` (0: none)."""
        low, high = 0, MAX_CTX // CTX_STEP
        while low < high:  # the need grows with n_ctx: a binary search over the steps
            mid = (low + high + 1) // 2
            low, high = (mid, high) if self.total(mid * CTX_STEP) <= available else (low, mid - 1)
        return low * CTX_STEP


def available_bytes() -> int | None:
    """The memory available now (Linux: MemAvailable), or None where it can't be told."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def context_shortfall(n_ctx: int, need: MemoryNeed, available: int | None) -> str:
    """"" when a context of ``n_ctx`` tokens fits, else why not, naming the figures and the largest
    context that fits.

        >>> smollm2 = MemoryNeed.of(23040, 9, 49152)
        >>> context_shortfall(8192, smollm2, 4 * 10**9)
        ''
        >>> context_shortfall(2_000_000, smollm2, 20 * 10**9).split("; ")[1]
        'the largest -c that fits is about 482,048'
    """
    if n_ctx > MAX_CTX:
        return f"a context holds at most {MAX_CTX:,} tokens (llama.cpp's positions are 32-bit)"
    if available is None or need.kv_per_token <= 0 or need.total(n_ctx) <= available:
        return ""
    return (f"not enough memory for a {n_ctx:,}-token context: its KV cache needs about {_size(need.kv(n_ctx))} "
            f"and llama.cpp's compute buffers about {_size(need.compute(n_ctx))}, and {_size(available)} is "
            f"available; the largest -c that fits is about {need.largest_fitting(available):,}")
