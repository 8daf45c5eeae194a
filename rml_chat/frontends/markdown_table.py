"""A Markdown table laid out in columns for a terminal, each cell's text wrapped inside its column.

A table streams in row by row, so its column widths are chosen from the rows seen so far (the header and up
to ``ROWS_MEASURED`` rows) and kept for the rows after them; a later, longer cell wraps inside its column.
When the widths' sum is wider than the terminal, the widest columns give way first (each keeps at least
``NARROWEST`` columns). A table with more columns than that leaves room for is drawn as Markdown writes
it, a row a line folded at spaces (as glow does): columns wider than the terminal would be broken by it
into lines that no longer line up. Worked example on a 30-column terminal::

    | Tool | What it does |                 Tool   │        What it does
    |---|--:|                        →      ───────┼────────────────────
    | ollama | runs models by name |        ollama │ runs models by name

    >>> table = Table.of("| Tool | What it does |", "|---|--:|")
    >>> table.add("| ollama | runs models by name |")
    >>> table.fix_widths(30)
    [6, 19]
    >>> ["".join(text for _, text in line) for line in table.header_lines() + table.row_lines(table.rows[0])]
    ['Tool   │        What it does', '───────┼────────────────────', 'ollama │ runs models by name']

(The first column's width is 6 here: ``ollama`` is the widest cell.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..terminal import cells
from .markdown_inline import BOLD, Run, plain_runs

ROWS_MEASURED = 8  # rows held back to choose the widths from; the rest stream with the widths kept
NARROWEST = 3
GAP = " │ "
_DELIMITER = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*")
_CELL_BAR = re.compile(r"(?<!\\)\|")


def row_cells(line: str) -> list[str]:
    """A table row's cells, the outer bars taken off (``\\|`` is a bar inside a cell)."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip().replace("\\|", "|") for cell in _CELL_BAR.split(inner)]


def is_delimiter(line: str) -> bool:
    """Whether ``line`` is the row under a table's header (``|---|:--:|``)."""
    return "-" in line and bool(_DELIMITER.fullmatch(line))


@dataclass
class Table:
    """A table as it streams: the header's cells, the alignment of each column, the rows kept so far."""

    header: list[str]
    aligns: list[str]  # "<", ">" or "^" a column
    rows: list[list[str]] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)  # empty until fixed
    as_text_in: int = 0  # the terminal's columns, where the table is drawn as its Markdown (too many columns)

    @classmethod
    def of(cls, header: str, delimiter: str) -> Table:
        cells_ = row_cells(header)
        marks = row_cells(delimiter)
        aligns = [_align(marks[i]) if i < len(marks) else "<" for i in range(len(cells_))]
        return cls(cells_, aligns)

    def add(self, line: str) -> None:
        row = row_cells(line)
        self.rows.append((row + [""] * len(self.header))[:len(self.header)])

    def fix_widths(self, columns: int) -> list[int]:
        """Widths that fit ``columns`` for the rows held, kept from now on."""
        natural = [max(NARROWEST, *(_shown_width(row[i]) for row in [self.header, *self.rows]))
                   for i in range(len(self.header))]
        if NARROWEST * len(natural) + cells(GAP) * (len(natural) - 1) > columns:
            self.as_text_in = columns
        room = max(columns - cells(GAP) * (len(natural) - 1), NARROWEST * len(natural))
        cap = max(natural)
        while sum(min(width, cap) for width in natural) > room and cap > NARROWEST:
            cap -= 1
        self.widths = [min(width, cap) for width in natural]
        return self.widths

    def header_lines(self) -> list[list[Run]]:
        if self.as_text_in:
            return self._lines(self.header, BOLD) + self._as_text(["---"] * len(self.header), 0)
        rule = "─┼─".join("─" * width for width in self.widths)
        return self._lines(self.header, BOLD) + [[(0, rule)]]

    def row_lines(self, row: list[str]) -> list[list[Run]]:
        return self._lines(row, 0)

    def _as_text(self, row: list[str], base: int) -> list[list[Run]]:
        markdown = "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
        return wrap_runs([(base, markdown)], self.as_text_in)

    def _lines(self, row: list[str], base: int) -> list[list[Run]]:
        if self.as_text_in:
            return self._as_text(row, base)
        wrapped = [wrap_runs(plain_runs(cell, base), width) for cell, width in zip(row, self.widths)]
        lines = []
        for at in range(max(len(cell) for cell in wrapped)):
            line: list[Run] = []
            for column, (cell, width) in enumerate(zip(wrapped, self.widths)):
                runs = cell[at] if at < len(cell) else []
                line += ([(0, GAP)] if column else []) + _aligned(runs, width, self.aligns[column])
            lines.append(line)
        return lines


def _align(mark: str) -> str:
    if mark.startswith(":") and mark.endswith(":"):
        return "^"
    return ">" if mark.endswith(":") else "<"


def _shown_width(cell: str) -> int:
    return cells("".join(text for _, text in plain_runs(cell)))


def _aligned(runs: list[Run], width: int, align: str) -> list[Run]:
    room = width - sum(cells(text) for _, text in runs)
    left = {"<": 0, ">": room, "^": room // 2}[align]
    return [(0, " " * left), *runs, (0, " " * (room - left))]


def wrap_runs(runs: list[Run], width: int) -> list[list[Run]]:
    """Styled runs wrapped at spaces into lines of at most ``width`` columns; a word longer than a line is
    cut. Always at least one line.

    >>> wrap_runs([(0, "a bb "), (1, "ccc dd")], 4)
    [[(0, 'a bb')], [(1, 'ccc')], [(1, 'dd')]]
    """
    lines: list[list[Run]] = [[]]
    used = 0
    for style, word in _words(runs):
        size = cells(word)
        if word == " ":
            if used and used < width:
                lines[-1].append((style, " "))
                used += 1
            continue
        if used and used + size > width:
            _trim(lines[-1])
            lines.append([])
            used = 0
        while size > width:  # (a word longer than a line: cut where the line ends)
            head = _fitting(word, width - used)
            lines[-1].append((style, head))
            lines.append([])
            word, used, size = word[len(head):], 0, size - cells(head)
        lines[-1].append((style, word))
        used += size
    _trim(lines[-1])
    return [_merged(line) for line in lines]


def _words(runs: list[Run]) -> list[Run]:
    """Runs split into words and single spaces, each with its style."""
    return [(style, part) for style, text in runs for part in re.findall(r" |[^ ]+", text)]


def _fitting(word: str, room: int) -> str:
    """The start of ``word`` that fits ``room`` columns (at least its first character)."""
    used = 0
    for end, char in enumerate(word):
        used += cells(char)
        if used > room:
            return word[:end] or word[:1]
    return word


def _trim(line: list[Run]) -> None:
    while line and line[-1][1] == " ":
        line.pop()


def _merged(line: list[Run]) -> list[Run]:
    merged: list[Run] = []
    for style, text in line:
        if merged and merged[-1][0] == style:
            merged[-1] = (style, merged[-1][1] + text)
        else:
            merged.append((style, text))
    return merged
