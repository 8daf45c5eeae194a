"""A reply's Markdown drawn on a terminal as it streams, each piece as soon as it can be.

The reply comes as pieces of text (tokens). Each source line is one of:

* **prose** (a paragraph's line, a heading, a list item, a quote): drawn as its pieces come, its inline marks
  styled (``markdown_inline``), wrapped at spaces to the terminal's width. A word that runs past the edge
  is taken back from that row and drawn on the next (``ESC [ n D``, ``ESC [ K``: only the word's own
  cells), so nothing above it is drawn again. A line's first characters are held until they say which
  block it opens (``- `` a list item, ``## `` a heading): a character or two.
* **code** (inside a fence): drawn as it comes, never wrapped, but folded at the edge with a ``↪`` on the
  next row; at the line's end it is drawn once more, highlighted by Pygments for the fence's language — only
  that line's rows, and not at all when the terminal changed width meanwhile or the line is taller than
  the screen.
* **a table's row**: held until its line ends; the rows are laid out in columns (``markdown_table``).
* a fence, a rule (``---``) or a blank line.

So what is written per token is that token's own text and its styling (plus, once per code line, the
line again): a 2,000-line reply is never drawn twice. The width is read at each line's start, so a resized
terminal is followed from the next line on. The reply's text is made visible first (``terminal.visible``):
the model's own control characters drive nothing. Worked example (``color=False``, 24 columns)::

    >>> import io
    >>> out = io.StringIO()
    >>> view = MarkdownView(out, color=False, columns=lambda: 24)
    >>> for piece in ["## Two", " steps\\n\\n- Open **the", " lid** and look", " inside carefully\\n"]:
    ...     view.write(piece)
    >>> view.end()
    >>> print(re.sub("\\x1b\\\\[[0-9;]*m", "", out.getvalue()))  # (the styles taken out)
    Two steps
    <BLANKLINE>
    • Open the lid and look
      inside carefully
    <BLANKLINE>
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from typing import TextIO

from ..terminal import cells, visible
from .markdown_inline import BOLD, CODE, ITALIC, LINK, STRIKE, URL, InlineMarks, Run
from .markdown_table import ROWS_MEASURED, Table, is_delimiter

HEADING, QUOTE, MUTED = 64, 128, 256  # the view's own styles, beside the inline ones
#: each style's SGR parameters: (with colour, without) — NO_COLOR keeps bold, italic and underline
SGR = {BOLD: ("1", "1"), ITALIC: ("3", "3"), CODE: ("36", ""), STRIKE: ("9", "9"), LINK: ("4;34", "4"),
       URL: ("2", "2"), HEADING: ("1;35", "1"), QUOTE: ("2;3", "3"), MUTED: ("2", "2")}
#: Pygments' token types and their colours (a type without one takes its parent's: Name.Function.Magic)
CODE_COLORS = {"Keyword": "35", "Name.Builtin": "36", "Name.Function": "34", "Name.Class": "1;34",
               "Name.Decorator": "33", "Name.Exception": "31", "String": "32", "Number": "33",
               "Comment": "2;3", "Operator.Word": "35", "Literal": "33", "Generic.Deleted": "31",
               "Generic.Inserted": "32", "Generic.Heading": "1"}
RESET = "\x1b[0m"
CODE_MARGIN, FOLD = "  ", "↪ "
LEXED_LINES = 4  # a code line is lexed with the lines just before it (this many in all): a long block stays cheap
LEXED_CHARS, LEX_SECONDS = 4000, 0.05  # a code line longer than this is not lexed; lexing stops after this long
START_HELD = 256  # a line's start held while it may still be a rule or a list item, at most this long (then prose)

_RULE = re.compile(r"([-*_])( *\1){2,} *")
_RULE_SO_FAR = re.compile(r"[-*_]( *[-*_])* *")
_HEADING = re.compile(r"(#{1,6})(?: +|$)")
_ITEM = re.compile(r"([-*+]|\d{1,9}[.)]) +")
_ITEM_SO_FAR = re.compile(r"\d{1,9}[.)]?|#{1,6}|`{1,2}|~{1,2}|(?:> ?)*")
_FENCE = re.compile(r"(`{3,}|~{3,})\s*([\w+#.-]*)")


class MarkdownView:
    """``write(piece)`` as a reply streams, ``pause()`` before something else is printed (a tool call's
    line), ``end()`` when the reply ends; the cursor is then at a line's start."""

    def __init__(self, out: TextIO, color: bool = True, columns: Callable[[], int] | None = None):
        self.out, self.color = out, color
        self.columns = columns or (lambda: shutil.get_terminal_size((80, 24)).columns)
        self.line = ""  # the source line so far
        self.kind = ""  # what the line is: "" undecided, prose, rule, code, fence, table
        self.fence: tuple[str, str] | None = None  # inside a code block: (its closing mark, its language)
        self.code: list[str] = []  # the code block's last lines (each line is lexed with those before it)
        self.table: Table | None = None
        self.table_head: str | None = None  # a row that may be a table's header (the next line says)
        self.marks = InlineMarks()
        self.writer = _Rows(self)
        self.painted = 0  # the style of what was written last

    def write(self, piece: str) -> None:
        parts = visible(piece).replace("\t", "    ").split("\n")
        for at, part in enumerate(parts):
            if at:
                self._line_end()
            if part:
                self._add(part)
        self._flush()

    def pause(self) -> None:
        """Everything held is drawn and the line ended (something else is about to be printed)."""
        if self.line or self.kind:
            self._line_end()
        self._end_table()
        self.marks.end_block()
        self._flush()

    def end(self) -> None:
        self.pause()
        self.fence, self.code = None, []

    # -- a line's pieces, by what the line is --

    def _add(self, part: str) -> None:
        self.line += part
        if not self.kind:
            self._decide(complete=False)
        elif self.kind == "prose":
            self._prose(self.marks.feed(part))
        elif self.kind == "code":
            self.writer.code_echo(part)

    def _decide(self, complete: bool) -> None:
        """What the line is, once its start says it; until then it is held."""
        line, stripped = self.line, self.line.lstrip(" ")
        if self.fence is not None:
            self.kind = "code"
            self.writer.code_start()
            self.writer.code_echo(line)
            return
        if stripped.startswith("|"):
            self.kind = "table"  # (held whole until the line ends)
            return
        undecided = not stripped or _RULE_SO_FAR.fullmatch(stripped) or _ITEM_SO_FAR.fullmatch(stripped)
        if not complete and undecided and len(line) < START_HELD:
            return
        self._end_table()
        if complete and _RULE.fullmatch(stripped):
            self.kind = "rule"
            self.writer.start([(MUTED, "─" * max(self.columns() - 1 - (len(line) - len(stripped)), 3))], [])
            return
        if _FENCE.match(stripped):
            self.kind = "fence"  # (held: the language is known at the line's end)
            return
        self.kind = "prose"
        self._prose_start(line)

    def _line_end(self) -> None:
        if not self.kind:
            self._decide(complete=True)
        kind, line = self.kind, self.line
        self.kind, self.line = "", ""
        if kind == "prose":
            self._prose(self.marks.end_block() if self.marks.base == HEADING else self.marks.line_end())
            self.writer.end_row()
            if self.marks.base == HEADING:  # (a heading's styles end with its line)
                self.marks = InlineMarks()
        elif kind == "rule":
            self.writer.end_row()
        elif kind == "code":
            self._code_line(line)
        elif kind == "fence":
            self._fence_line(line)
        elif kind == "table":
            self._table_line(line)

    # -- prose --

    def _prose_start(self, line: str) -> None:
        stripped = line.lstrip(" ")
        indent = " " * min(len(line) - len(stripped), self.columns() // 3)
        if not stripped:  # a blank line ends a paragraph
            self.marks.end_block()
            self.writer.start([], [])
            return
        first: list[Run] = [(0, indent)]
        rest: list[Run] = [(0, indent)]
        if heading := _HEADING.match(stripped):
            self.marks = InlineMarks(HEADING)
            stripped = stripped[heading.end():]
        elif item := _ITEM.match(stripped):
            mark = item.group(1)
            bullet = "• " if mark in "-*+" else mark + " "
            first, rest = [(0, indent), (BOLD, bullet)], [(0, indent + " " * cells(bullet))]
            self.marks = InlineMarks()
            stripped = stripped[item.end():]
        elif stripped.startswith(">"):
            depth = len(re.match(r"(> ?)+", stripped).group().replace(" ", ""))
            first = rest = [(0, indent), (QUOTE, "▌ " * min(depth, self.columns() // 8 or 1))]  # (room for text)
            stripped = re.sub(r"^(> ?)+", "", stripped)
        self.writer.start(first, rest)
        self._prose(self.marks.feed(stripped))

    def _prose(self, runs: list[Run]) -> None:
        for style, text in runs:
            self.writer.text(style, text)

    # -- code --

    def _fence_line(self, line: str) -> None:
        stripped = line.strip()
        self.writer.line([(MUTED, stripped)])
        if self.fence is None:
            found = _FENCE.match(stripped)
            self.fence, self.code = (found.group(1)[0] * len(found.group(1)), found.group(2)), []
            self.writer.lexer = _lexer(found.group(2)) if self.color else None

    def _code_line(self, line: str) -> None:
        closing, _ = self.fence
        stripped = line.strip()
        if stripped.startswith(closing) and not stripped.strip(closing[0]):
            self.writer.code_redraw([("2", stripped)], margin=False)
            self.fence, self.code = None, []
            return
        self.code = [*self.code[1 - LEXED_LINES:], line]  # (only the lines a code line is lexed with)
        if self.writer.lexer is None:
            self.writer.end_row()  # (the echo is the line as drawn)
        else:
            self.writer.code_redraw(self.writer.highlighted(self.code), margin=True)

    # -- tables --

    def _table_line(self, line: str) -> None:
        if self.table is not None:
            self.table.add(line)
            if self.table.widths:
                self._draw(self.table.row_lines(self.table.rows.pop()))
            elif len(self.table.rows) >= ROWS_MEASURED:
                self._draw_table()
        elif self.table_head is None:
            self.table_head = line
        elif is_delimiter(line):
            self.table, self.table_head = Table.of(self.table_head, line), None
        else:  # (the row before was not a table's header: it is a line of text)
            self._text_line(self.table_head)
            self.table_head = line

    def _end_table(self) -> None:
        if self.table_head is not None:
            head, self.table_head = self.table_head, None
            self._text_line(head)
        if self.table is not None:
            if not self.table.widths:
                self._draw_table()
            self.table = None

    def _draw_table(self) -> None:
        self.table.fix_widths(self.columns() - 1)
        self._draw(self.table.header_lines())
        for row in self.table.rows:
            self._draw(self.table.row_lines(row))
        self.table.rows.clear()

    def _draw(self, lines: list[list[Run]]) -> None:
        for runs in lines:
            self.writer.line(runs)

    def _text_line(self, line: str) -> None:
        """A whole line drawn as prose (a row that proved not to belong to a table)."""
        self._prose_start(line)
        self._prose(self.marks.line_end())
        self.writer.end_row()

    # -- output --

    def paint(self, style: int) -> str:
        """The SGR sequence that switches from what was written last to ``style``."""
        if style == self.painted:
            return ""
        self.painted = style
        codes = [SGR[flag][0 if self.color else 1] for flag in SGR if style & flag]
        codes = [code for code in codes if code]
        return "\x1b[0;" + ";".join(codes) + "m" if codes else RESET

    def _flush(self) -> None:
        if self.writer.pending:
            self.out.write("".join(self.writer.pending))
            self.writer.pending.clear()
            self.out.flush()


class _Rows:
    """The rows on screen: where the cursor is, the word being written, and the wrapping."""

    def __init__(self, view: MarkdownView):
        self.view = view
        self.pending: list[str] = []
        self.column = 0
        self.limit = 79
        self.rest: list[Run] = []  # what starts a wrapped row (a list item's indent)
        self.word: list[Run] = []  # the word being written, as it stands on this row
        self.fresh = True  # nothing but the prefix on this row yet
        self.lexer = None
        self.code_rows, self.code_width = 0, 0

    def start(self, first: list[Run], rest: list[Run]) -> None:
        width = self.view.columns()
        self.limit, self.rest = max(width - 1, 1), rest
        self.column, self.word, self.fresh = 0, [], True
        self._put(first)

    def text(self, style: int, text: str) -> None:
        for part in re.findall(r" +|[^ ]+", text):
            if part[0] == " ":
                self.word = []
                if self.fresh:
                    continue  # (no spaces at a row's start: a line's indent is its prefix)
                if self.column + len(part) > self.limit:
                    self._wrap()
                else:
                    self._put([(style, part)])
                continue
            self._word(style, part)

    def _word(self, style: int, part: str) -> None:
        """A word's piece: on this row where it fits; else the word so far moves to the next row (where
        something stands before it on this one), and what does not fit there is folded at the row's edge, a
        row at a time (a loop: a 100,000-character word is as many rows, never as deep a recursion). So a
        word is laid out the same whether it comes whole or a character at a time."""
        while part:
            size = cells(part)
            if self.column + size <= self.limit:
                self._put([(style, part)])
                self.word.append((style, part))
                self.fresh = False
                return
            held = sum(cells(text) for _, text in self.word)
            rest_width = self._rest_width()
            if not self.fresh and self.column - held > rest_width:
                if held:
                    self.pending.append(f"\x1b[{held}D\x1b[K")
                word, self.word = self.word, []
                self._wrap()
                for run in word:  # (they fit the new row: no deeper than this)
                    self._word(*run)
                continue
            room = self.limit - self.column
            head = _fitting(part, room)
            if not head and self.fresh:  # (a prefix as wide as the row: a character a row all the same, never none)
                head = part[:1]
            if head:
                self._put([(style, head)])
            self._wrap()
            self.word = []
            part = part[len(head):]

    def _wrap(self) -> None:
        self.pending.append(self.view.paint(0) + "\n")
        self.column, self.fresh = 0, True
        self._put(self.rest)

    def end_row(self) -> None:
        self.pending.append(self.view.paint(0) + "\n")
        self.column, self.word, self.fresh = 0, [], True

    def line(self, runs: list[Run]) -> None:
        """A whole row drawn as it is (a table's, a fence's)."""
        self.column = 0
        self._put(runs)
        self.end_row()

    def _put(self, runs: list[Run]) -> None:
        for style, text in runs:
            if text:
                self.pending.append(self.view.paint(style) + text)
                self.column += cells(text)

    def _rest_width(self) -> int:
        return sum(cells(text) for _, text in self.rest)

    # -- code lines: echoed as they come, drawn again highlighted at their end --

    def code_start(self) -> None:
        self.code_width = self.view.columns()
        self.limit = max(self.code_width - 1, 1)
        self.column, self.code_rows = 0, 1
        self.pending.append(self.view.paint(0) + CODE_MARGIN)
        self.column = len(CODE_MARGIN)

    def code_echo(self, text: str) -> None:
        self._code(text, "")

    def _code(self, text: str, codes: str) -> None:
        """Code characters in SGR ``codes`` (empty: none), folded at the edge onto a row that starts with ``↪``."""
        resume = f"\x1b[0;{codes}m" if codes else RESET
        fold = FOLD if len(FOLD) + 2 <= self.limit else ""  # (a row too narrow for the mark and a wide character: none)
        for char in text:
            size = cells(char)
            if self.column + size > self.limit:
                self.pending.append("\x1b[0;2m\n" + fold + resume)
                self.column, self.code_rows = len(fold), self.code_rows + 1
            self.pending.append(char)
            self.column += size

    def code_redraw(self, pieces: list[tuple[str, str]], margin: bool) -> None:
        """The code line drawn again over its echo, in ``pieces`` (SGR parameters, text)."""
        rows = shutil.get_terminal_size((80, 24)).lines
        if self.view.columns() != self.code_width or self.code_rows >= rows:
            self.end_row()  # (the echo stays as it is)
            return
        self.pending.append("\r" + (f"\x1b[{self.code_rows - 1}A" if self.code_rows > 1 else "") + "\x1b[J")
        self.column = 0
        if margin:
            self.pending.append(CODE_MARGIN)
            self.column = len(CODE_MARGIN)
        for codes, text in pieces:
            self.pending.append(f"\x1b[0;{codes}m" if codes else RESET)
            self._code(text, codes)
        self.view.painted = -1  # (the styles above were not paint()'s: the next paint writes its own)
        self.end_row()

    def highlighted(self, lines: list[str]) -> list[tuple[str, str]]:
        """The last of a code block's lines as (SGR parameters, text) pieces, lexed with the lines before it,
        within a budget: lines longer than ``LEXED_CHARS`` are not lexed, and lexing that takes longer than
        ``LEX_SECONDS`` stops there (the rest of the line plain): a lexer's patterns may backtrack."""
        shown = [line for line in lines[-LEXED_LINES:] if len(line) <= LEXED_CHARS] or [""]
        if shown[-1] is not lines[-1]:
            return [("", lines[-1])]
        text = "\n".join(shown)
        start = len(text) - len(shown[-1])
        pieces, done, began = [], start, time.monotonic()
        for at, kind, value in self.lexer.get_tokens_unprocessed(text):
            end = at + len(value)
            if end > start:
                pieces.append((_color(kind), value[max(start - at, 0):].replace("\n", "")))
                done = end
            if time.monotonic() - began > LEX_SECONDS:
                break
        return pieces + ([("", text[done:])] if done < len(text) else [])


def _fitting(text: str, room: int) -> str:
    """The longest start of ``text`` that takes at most ``room`` cells (the marks of no width that follow
    it go with it, as they do when the text comes a character at a time)::

        >>> _fitting("界界a", 3), _fitting("ab\u0301c", 2)
        ('界', 'ab́')
    """
    used = 0
    for at, char in enumerate(text):
        used += cells(char)
        if used > room:
            return text[:at]
    return text


def _lexer(language: str):
    """Pygments' lexer for a fence's language, if it knows it (imported only when a fence names one)."""
    if not language:
        return None
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _color(kind) -> str:
    while kind is not None:
        name = ".".join(kind)
        if name in CODE_COLORS:
            return CODE_COLORS[name]
        kind = kind.parent
    return ""
