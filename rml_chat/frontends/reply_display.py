"""How the front end shows a reply: its thought (whole, as one line, or not at all) and its answer (Markdown
drawn, or the text as written), and the writer that does it for one reply.

The answer is drawn as Markdown only where that can work: stdout a terminal, ``TERM`` not ``dumb`` (a
terminal that declares no cursor movement), and ``--markdown on`` (the default). Anywhere else the reply is
the model's exact text, made visible on a terminal (``terminal.for_stream``), so ``rml-chat -p … > file``
and a pipe get the bytes the model wrote. ``NO_COLOR`` takes the colours out and keeps the layout and bold,
italic and underline, as rich does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, TextIO

from ..terminal import for_stream, is_terminal
from .markdown_view import MarkdownView

SETTINGS = ("hide_thinking", "thinking_display", "markdown")  # the /set rows that are the display's


@dataclass
class ReplyDisplay:
    """How replies are shown: the thought's ``mode`` (``--thinking-display``: full or line) and ``hidden``
    (``--hidethinking``: the thought stays in ``--json`` and in the conversation), and ``markdown``
    (``--markdown``: the answer drawn, where stdout is a terminal that can)."""

    mode: str = "full"
    hidden: bool = False
    markdown: bool = True

    def apply(self, name: str, value: object) -> None:
        """Set one of ``SETTINGS`` to a value its row parsed."""
        if name == "hide_thinking":
            self.hidden = value == "on"
        elif name == "markdown":
            self.markdown = value == "on"
        else:
            self.mode = str(value)

    def setting(self, name: str) -> str:
        """One of ``SETTINGS`` as /set shows it."""
        if name == "thinking_display":
            return self.mode
        return "on" if (self.hidden if name == "hide_thinking" else self.markdown) else "off"

    def answer_writer(self, out: TextIO) -> AnswerWriter:
        """The writer for one reply's answer on ``out``."""
        if self.markdown and is_terminal(out) and os.environ.get("TERM", "") != "dumb":
            return MarkdownView(out, color=not os.environ.get("NO_COLOR"))
        return PlainAnswer(out)


class AnswerWriter(Protocol):
    def write(self, piece: str) -> None: ...

    def pause(self) -> None:
        """Before something else is printed amid the reply (a tool call's line)."""

    def end(self) -> None:
        """The reply ended: the cursor goes to a line's start."""


class PlainAnswer:
    """The answer as the model wrote it: exact into a pipe or a file, made visible on a terminal."""

    def __init__(self, out: TextIO):
        self.out, self.last = out, ""  # (an empty reply still ends its line, as it always did)

    def write(self, piece: str) -> None:
        if piece:
            self.out.write(for_stream(piece, self.out))
            self.out.flush()
            self.last = piece[-1]

    def pause(self) -> None:
        return  # (the exact bytes: nothing added between a reply's parts)

    def end(self) -> None:
        if self.last != "\n":
            self.out.write("\n")
            self.last = "\n"
