"""The REPL's own lines fitted to the terminal's width: a note or a listing folded at spaces as a reply is,
its continuation under its text (``folded``), and fields joined with " · " that wrap between fields,
never inside one (``fit_width``). Only rml-chat's own styling is inside these lines (``terminal.Styled``):
each run keeps its style across the fold."""

from __future__ import annotations

import re
import shutil

from ..terminal import RESET, cells
from .markdown_table import wrap_runs

_STYLE = re.compile(r"(\x1b\[[0-9;]*m)")  # (rml-chat's own: ``visible`` shows any other escape as text)


def folded(text: str, width: int) -> str:
    """rml-chat's own lines folded at spaces to ``width`` columns less one, as a reply is
    (``markdown_table.wrap_runs``); a line's continuation starts under its text: under the second column of
    a "label  text" line (a gap of two spaces in the row's first half), else under its indentation::

        >>> print(folded("  /regen   answer the last message again", 30))
          /regen   answer the last
                   message again
    """
    return "\n".join(_folded(line, width - 1) for line in text.split("\n"))


def _folded(line: str, room: int) -> str:
    styles, runs = [""], []  # (a run's style: the index of the sequences in force, 0 for none)
    for i, part in enumerate(_STYLE.split(line)):
        if i % 2:
            styles.append("" if part == RESET else styles[-1] + part)
        elif part:
            runs.append((len(styles) - 1 if styles[-1] else 0, part))
    plain = "".join(text for _, text in runs)
    if cells(plain) <= room:
        return line
    gap, indent = re.search(r"\S {2,}(?=\S)", plain), len(plain) - len(plain.lstrip())
    hang = gap.end() if gap is not None and cells(plain[:gap.end()]) <= room // 2 else indent
    hang = hang if cells(plain[:hang]) <= room // 2 else 0
    lead = cells(plain[:hang])
    head, body, taken = [], [], 0  # (the label and its gap, or the indentation; then the text wrapped)
    for style, text in runs:
        cut = min(max(hang - taken, 0), len(text))
        head += [(style, text[:cut])] if cut else []
        body += [(style, text[cut:])] if cut < len(text) else []
        taken += len(text)
    rows = wrap_runs(body, room - lead)
    return "\n".join(_drawn(head if not n else [(0, " " * lead)], styles) + _drawn(row, styles)
                     for n, row in enumerate(rows))


def _drawn(runs: list[tuple[int, str]], styles: list[str]) -> str:
    return "".join(styles[style] + text + RESET if style else text for style, text in runs)


def fit_width(fields: list[str], width: int | None = None) -> str:
    """Fields joined with " · ", wrapped between fields (never inside one) to the terminal's width."""
    width = width or shutil.get_terminal_size((80, 24)).columns
    lines, line = [], ""
    for part in fields:
        joined = f"{line} · {part}" if line else part
        if line and len(joined) > width:
            lines.append(line)
            line = part
        else:
            line = joined
    return "\n".join([*lines, line])
