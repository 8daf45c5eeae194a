"""Memory checked before it is taken: the KV cache a context needs, against the memory available.

llama.cpp allocates the whole KV cache when it makes a context. A context far larger than memory is not
refused there: the process grows until the kernel's OOM killer ends it, with no message. So before the
context is made, the cache is estimated from the model's own hyperparameters (``runtime.LlamaModel``
reads them through the C API) and compared with the memory available now.

The estimate is the cache alone, in llama.cpp's default type (f16: 2 bytes a value): for every layer, the
keys and the values of every KV head. Worked example, SmolLM2-135M (30 layers, 3 KV heads, 64 values a
head for keys and for values)::

    30 * 3 * (64 + 64) * 2 = 23,040 bytes a token: -c 8192 needs 189 MB, -c 2,000,000 needs 46 GB

It leaves out the compute buffers and counts a sliding-window cache as a full one, so near the limit it
errs on the side of refusing too late rather than too early.
"""

from __future__ import annotations

import os

from .base import CTX_STEP

#: llama.cpp's positions are int32: a context can't hold more tokens than this
MAX_CTX = 2**31 - 1


def kv_bytes_per_token(n_layer: int, n_head_kv: int, key_length: int, value_length: int, value_bytes: int = 2) -> int:
    """
        >>> kv_bytes_per_token(30, 3, 64, 64)
        23040
    """
    return n_layer * n_head_kv * (key_length + value_length) * value_bytes


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


def context_shortfall(n_ctx: int, per_token: int, available: int | None) -> str:
    """"" when a context of ``n_ctx`` tokens fits, else why not, naming both figures and the largest
    context that fits.

        >>> context_shortfall(8192, 23040, 4 * 10**9)
        ''
        >>> context_shortfall(2_000_000, 23040, 20 * 10**9).split("; ")[1]
        'the largest -c that fits is about 867,840'
    """
    if n_ctx > MAX_CTX:
        return f"a context holds at most {MAX_CTX:,} tokens (llama.cpp's positions are 32-bit)"
    if available is None or per_token <= 0 or n_ctx * per_token <= available:
        return ""
    fits = available // per_token // CTX_STEP * CTX_STEP
    return (f"not enough memory for a {n_ctx:,}-token context: its KV cache needs about {_size(n_ctx * per_token)} "
            f"and {_size(available)} is available; the largest -c that fits is about {fits:,}")
