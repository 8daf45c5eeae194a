"""Markdown's inline marks read as they stream: emphasis, strong, strikethrough, code spans, links and
backslash escapes become styled runs of text, the marks themselves taken out.

Text comes in pieces (the tokens of a reply); a piece may end inside a mark, so the reader holds what it
cannot decide yet — a run of ``*`` until the character after it, a ``[`` until its link closes or proves not
to be one — and gives back every run it has decided. A line's end decides everything held::

    >>> marks = InlineMarks()
    >>> marks.feed("Use **bo") + marks.feed("ld** and `x *y*` and a\\\\*star")
    [(0, 'Use '), (1, 'bo'), (1, 'ld'), (0, ' and '), (4, 'x *y*'), (0, ' and a'), (0, '*'), (0, 'star')]
    >>> marks.feed("see [the docs](https://x.org) ") + marks.line_end()
    [(0, 'see '), (16, 'the docs'), (32, ' (https://x.org)'), (0, ' ')]

Whether a run of ``*`` or ``_`` opens or closes follows CommonMark's flanking rule, simplified: it opens
before a non-space and closes after one, and ``_`` only at a word's edge (``snake_case_name`` stays as it
is). ``2 * 3 * 4`` stays as written. A mark opened and never closed styles the rest of the paragraph (a
streaming reader cannot take back what it showed); ``end_block`` ends every style at a paragraph's end.
"""

from __future__ import annotations

import re

BOLD, ITALIC, CODE, STRIKE, LINK, URL = 1, 2, 4, 8, 16, 32
Run = tuple[int, str]  # (the style's flags, the text shown in it)

LINK_LIMIT = 400  # a ``[`` whose link has not closed within this many characters is a plain bracket
RUN_LIMIT = 32  # a run of one mark longer than this is its text (none means more than three; a code span's
# backticks may be more, but a reply's 100,000 of them are held and scanned again on every piece otherwise)
_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_LINK = re.compile(r"\[([^\[\]\n]*)\]\(([^()\s]*)\)")
_LINK_SO_FAR = re.compile(r"\[[^\[\]\n]*(?:\](?:\([^()\s]*)?)?")  # what may still become a link


class InlineMarks:
    """Runs of styled text from Markdown pieces: ``feed`` as they come, ``line_end`` at each line's end
    (a line's end decides what is held; styles go on into the paragraph's next line), ``end_block`` at a
    paragraph's end (every style off)."""

    def __init__(self, base: int = 0):
        self.base = base  # a style every run has (a heading's, a link text's)
        self.style = 0  # the marks open now
        self.code_fence = 0  # inside a code span: the length of the backtick run that opened it
        self.held = ""
        self.previous = " "  # the last character decided (the flanking rule looks at it)
        self.long_run = ""  # the mark of a run given as text for its length, which the next piece may go on

    def feed(self, text: str) -> list[Run]:
        self.held += text
        return self._decide(final=False)

    def line_end(self) -> list[Run]:
        runs = self._decide(final=True)
        self.previous = " "
        return runs

    def end_block(self) -> list[Run]:
        runs = self.line_end()
        self.style = self.code_fence = 0
        return runs

    def _decide(self, final: bool) -> list[Run]:
        runs: list[Run] = []
        text, at, plain = self.held, 0, 0  # text[plain:at]: plain text in the present style, decided
        while at < len(text):
            if text[at] not in ("`" if self.code_fence else "\\`*_~["):
                at += 1
                continue
            self._add(runs, self.style, text[plain:at])
            resume = self._tick(text, at, final, runs) if self.code_fence else self._mark(text, at, final, runs)
            plain = at
            if resume is None:  # (not decidable before more text comes: held from here)
                break
            at = plain = resume
        else:
            self._add(runs, self.style, text[plain:])
            plain = len(text)
        self.held = text[plain:]
        return runs

    def _tick(self, text: str, at: int, final: bool, runs: list[Run]) -> int | None:
        """A backtick run inside a code span: the span's end if it is as long as the one that opened it."""
        run = _run_at(text, at)
        if at + run == len(text) and not final:
            return None
        if run == self.code_fence:
            self.style, self.code_fence = self.style & ~CODE, 0
            return at + run
        return self._literal(runs, text[at:at + run], at + run)

    def _mark(self, text: str, at: int, final: bool, runs: list[Run]) -> int | None:
        """The mark at ``text[at]`` read: runs added, and where reading goes on; None: wait for more text."""
        char = text[at]
        if char == "\\":
            if at + 1 == len(text):
                return None if not final else self._literal(runs, "\\", at + 1)
            escaped = text[at + 1]
            return self._literal(runs, escaped if escaped in _PUNCTUATION else "\\" + escaped, at + 2)
        if char == "[":
            match = _LINK.match(text, at)
            if match is None:
                if _LINK_SO_FAR.fullmatch(text, at) and not final and len(text) - at < LINK_LIMIT:
                    return None  # (still a link in the making)
                return self._literal(runs, "[", at + 1)
            label, url = match.groups()
            shown = InlineMarks(self.style | LINK)
            for style, part in shown.feed(label) + shown.line_end():
                self._add(runs, style, part)
            if url and url != label:
                self._add(runs, self.style | URL, f" ({url})")
            self.previous = ")"
            return match.end()
        run = _run_at(text, at)
        if run > (3 if char != "`" else RUN_LIMIT) or (at == 0 and char == self.long_run):
            self._literal(runs, text[at:at + run], at + run)  # (text, whatever follows: no mark is this long)
            self.long_run = char if at + run == len(text) else ""
            return at + run
        if at + run == len(text) and not final:
            return None  # (the run may go on, and the character after it decides)
        after = text[at + run] if at + run < len(text) else " "
        if char == "`":
            self.code_fence, self.style = run, self.style | CODE
            return at + run
        opens, closes = not after.isspace(), not self.previous.isspace()
        if char == "_":
            opens, closes = opens and not self.previous.isalnum(), closes and not after.isalnum()
        wanted = {1: ITALIC, 2: BOLD, 3: BOLD | ITALIC}.get(run, 0) if char != "~" else (STRIKE if run == 2 else 0)
        if wanted and closes and self.style & wanted == wanted:
            self.style &= ~wanted
        elif wanted and opens:
            self.style |= wanted
        else:
            return self._literal(runs, text[at:at + run], at + run)
        self.previous = char
        return at + run

    def _literal(self, runs: list[Run], shown: str, resume: int) -> int:
        self._add(runs, self.style, shown)
        return resume

    def _add(self, runs: list[Run], style: int, text: str) -> None:
        if text:
            runs.append((style | self.base, text))
            self.previous = text[-1]
            if text[-1] != self.long_run:
                self.long_run = ""


def _run_at(text: str, at: int) -> int:
    """How many times ``text[at]`` repeats from ``at``."""
    return len(text) - at - len(text[at:].lstrip(text[at]))


def plain_runs(text: str, base: int = 0) -> list[Run]:
    """A whole piece of Markdown (a table's cell) as styled runs.

    >>> plain_runs("**Name**")
    [(1, 'Name')]
    """
    marks = InlineMarks(base)
    return marks.feed(text) + marks.end_block()
