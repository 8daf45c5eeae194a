"""A live line while a long prompt is evaluated: tokens done / total and the rate, on a terminal only.

It appears once the evaluation has run for half a second (a short prompt shows nothing), rewrites itself
after each batch, and is erased before the reply's first character::

    evaluating the prompt: 1536/3597 tokens · 412 tok/s
"""

from __future__ import annotations

import sys
from typing import TextIO

from ..terminal import one_row


class EvalProgress:
    def __init__(self, stream: TextIO | None = None, after_s: float = 0.5):
        self._stream = stream or sys.stderr
        self._after = after_s
        self._live = self._stream.isatty()
        self.shown = False

    def __call__(self, done: int, total: int, seconds: float) -> None:
        if not self._live or (not self.shown and seconds < self._after):
            return
        rate = done / seconds if seconds > 0 else 0.0
        line = one_row([f"evaluating the prompt: {done}/{total} tokens · {rate:.0f} tok/s",
                        f"prompt: {done}/{total} · {rate:.0f} tok/s"])
        self._stream.write(f"\r\x1b[K\x1b[2m{line}\x1b[0m")
        self._stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self.shown = False
