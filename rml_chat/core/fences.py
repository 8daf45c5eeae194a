"""Markdown's fenced blocks in a text, read line by line in one pass: a block opens at a line that starts
with three or more backticks or tildes, and ends at a line of that same fence alone (trailing spaces
allowed). A line of 30,000 backticks is read as any other. Each line comes with its role::

    >>> lines, left_open = read("Run:\\n```sh\\nls\\n```\\nthen\\n~~~\\nopen")
    >>> [role for _, role in lines], left_open
    (['text', 'open', 'body', 'close', 'text', 'open', 'body'], '~~~')
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"`{3,}|~{3,}")


def read(text: str) -> tuple[list[tuple[str, str]], str]:
    """(each line of ``text`` with its role: "text" outside a block, "open", "body", "close"; the fence a
    block left open at the end, "" where none is)."""
    lines, fence = [], ""
    for line in text.split("\n"):
        if not fence:
            opened = _FENCE.match(line)
            fence = opened.group() if opened else ""
            lines.append((line, "open" if opened else "text"))
        elif line.rstrip(" \t") == fence:
            lines.append((line, "close"))
            fence = ""
        else:
            lines.append((line, "body"))
    return lines, fence
