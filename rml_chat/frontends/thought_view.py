"""How the REPL shows a reply's thought: whole and dim (``full``), or as one dim line that follows the
thought as it grows and, once the answer starts, says how long it was (``line``, as ollama's
"Thinking…" and chat apps' "Thought for 4 s"); ``/thought`` shows the last one whole. Hidden
(``--hidethinking``), nothing is shown. Worked example, ``line`` on an 40-column terminal::

    thinking: The user asks for a colour. Bl     (rewritten in place as the thought grows)
    thought: 12 words, 0.4 s (/thought)          (when the answer starts, then a blank line)
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

from ..terminal import dim, is_terminal, rewrite_line


class ThoughtView:
    """``thought(chunk)`` as the thought streams, ``answer()`` before the answer's first text."""

    def __init__(self, mode: str, hidden: bool, out: TextIO | None = None):
        self.mode, self.hidden, self.out = mode, hidden, out or sys.stdout
        self.text, self.started, self.open = "", 0.0, False  # open: a thought is on screen, its line not ended

    def thought(self, chunk: str) -> None:
        if not chunk or self.hidden:
            return
        if not self.text:
            self.started = time.perf_counter()
        self.text += chunk
        if self.mode == "full":
            self.out.write(dim(chunk, is_terminal(self.out)))
        else:
            width = shutil.get_terminal_size((80, 24)).columns - len("thinking: ") - 1
            tail = " ".join(self.text.split())[-max(width, 10):]
            self.out.write(rewrite_line(dim("thinking: " + tail, is_terminal(self.out))))
        self.out.flush()
        self.open = True

    def answer(self) -> None:
        """The answer starts below the thought (``line``: the thought's line becomes its summary)."""
        self.close()
        if self.text:
            self.out.write("\n")

    def close(self) -> None:
        """The thought's line ends (at the answer, or at the reply's end when it never closed)."""
        if not self.open:
            return
        if self.mode == "line":
            spent = time.perf_counter() - self.started
            self.out.write(rewrite_line(dim(f"thought: {len(self.text.split())} words, {spent:.1f} s (/thought)",
                                            is_terminal(self.out))))
        self.out.write("\n")
        self.open = False
