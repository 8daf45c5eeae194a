"""CPU features that llama.cpp's build mishandles, found before a model is loaded.

Intel's AMX (Sapphire Rapids and later Xeons). llama.cpp puts the weights of a quantized model in an
"extra" AMX buffer on such a CPU, and its AMX matrix product crashes the process on the first batch of
two or more tokens (a segmentation fault: llama.cpp #20824, seen here with SmolLM2's Q4_1 through both
our engine and llama-cpp-python's ``Llama``; llama.cpp #16315 finds wrong results for Q4_0/Q4_1 there).
On such a CPU the model is loaded without llama.cpp's extra buffers (``use_extra_bufts`` false, which is
llama-server's ``--no-repack``): the plain CPU kernels, which are right and a little slower.

``$RML_CHAT_CPU_REPACK`` overrides the check: ``on`` keeps the extra buffers (for a llama.cpp that has
fixed it), ``off`` drops them on any CPU, and ``auto`` (or nothing) leaves it to the check.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from ..errors import UsageError

ENV = "RML_CHAT_CPU_REPACK"


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere, or where /proc can't be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def no_extra_buffers() -> str:
    """Why the model should load without llama.cpp's extra (AMX, repacked) buffers, or "" to keep them."""
    choice = os.environ.get(ENV, "").strip().lower()
    if choice == "on":
        return ""
    if choice == "off":
        return f"${ENV}=off"
    if choice not in ("", "auto"):  # (a value that says neither was taken as unset: not the choice made)
        raise UsageError(f"${ENV} is on, off or auto, not {os.environ[ENV]!r}")
    if "amx_int8" in cpu_flags():
        return "this CPU has AMX, whose llama.cpp kernels crash (llama.cpp #20824)"
    return ""
