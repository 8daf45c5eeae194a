"""How the REPL shows a reply's thought: whole and dim (``full``), or as one dim line that follows the
thought as it grows and, once the answer starts, says how long it was (``line``, as ollama's
"Thinking…" and chat apps' "Thought for 4 s"); ``/thought`` shows the last one whole. Hidden
(``--hidethinking``), nothing is shown. Worked example, ``line`` on an 40-column terminal::

    thinking: The user asks for a colour. Bl     (rewritten in place as the thought grows)
    thought: 12 words, 0.4 s (/thought)          (when the answer starts, then a blank line)
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from typing import TextIO

from ..core.grown_text import GrownText
from ..terminal import cells, dim, is_terminal, one_row, rewrite_line, visible

LABEL = "thinking: "
RECENT_CHARS = 1024  # the thought's end kept for the line: more than any terminal row shows
_SPACES = re.compile(r"\s+")


class ThoughtView:
    """``thought(chunk)`` as the thought streams, ``answer()`` before the answer's first text."""

    def __init__(self, mode: str, hidden: bool, out: TextIO | None = None):
        self.mode, self.hidden, self.out = mode, hidden, out or sys.stdout
        self.text, self.started, self.open = GrownText(), 0.0, False  # open: a thought on screen, its line not ended
        self.recent = ""  # the thought's end, its spaces and line ends run together (``line``)

    def thought(self, chunk: str) -> None:
        if not chunk or self.hidden:
            return
        if not self.text:
            self.started = time.perf_counter()
        self.text += chunk
        if self.mode == "full":
            self.out.write(dim(chunk, is_terminal(self.out)))
        else:
            self.recent = _SPACES.sub(" ", self.recent + chunk).lstrip()[-RECENT_CHARS:]
            room = shutil.get_terminal_size((80, 24)).columns - 1 - len(LABEL)
            line = one_row([LABEL + last_cells(visible(self.recent.rstrip()), room)])  # (never wraps: rewritten)
            self.out.write(rewrite_line(dim(line, is_terminal(self.out))))
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
            words = len(str(self.text).split())
            line = one_row([f"thought: {words} words, {spent:.1f} s (/thought)", f"thought: {words} words", "thought"])
            self.out.write(rewrite_line(dim(line, is_terminal(self.out))))
        self.out.write("\n")
        self.open = False


def last_cells(text: str, room: int) -> str:
    """The end of ``text`` that takes at most ``room`` terminal cells (a wide character two)::

        >>> last_cells("the colour 藍色", 6)
        'r 藍色'
    """
    start, used = len(text), 0
    while start and used + cells(text[start - 1]) <= room:
        start -= 1
        used += cells(text[start])
    return text[start:]
