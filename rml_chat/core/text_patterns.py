"""A template's text as a pattern a model's reply is matched with: any whitespace where the template writes
some, or none, or some between two markers (``</arg_value><arg_key>`` as ``</arg_value>\\n<arg_key>``);
holes take what the model writes there::

    >>> bool(piece("</arg_value>\\n<arg_key>").match("</arg_value><arg_key>"))
    True
    >>> piece("functions.get:\\1").match("functions.get:7").group("count")
    '7'
"""

from __future__ import annotations

import functools
import re

from tokenizer.chat import markers
from tokenizer.chat.tool_calls import COUNT_HOLE, ID_HOLE
from tokenizer.chat.tool_keyed import KEY_HOLE


@functools.lru_cache(maxsize=512)  # (a pattern a template's text, not one a reply)
def piece(text: str) -> re.Pattern[str]:
    """``text`` as a pattern that takes any whitespace where the template writes some, or between two
    markers; holes take what the model writes there, the first id and count as groups."""
    holes = {ID_HOLE: r"(?P<id>[\w\-]+)", COUNT_HOLE: r"(?P<count>\d+)", KEY_HOLE: r"[\w.\-]+"}
    parts = []
    for part in split_hole(text.strip()):
        parts.append(holes.pop(part, None) or {ID_HOLE: r"[\w\-]+", COUNT_HOLE: r"\d+"}.get(part) or re.escape(part))
    return re.compile(r"\s*" + r"\s*".join(parts) if text.strip() else "")


@functools.lru_cache(maxsize=64)  # (a pattern a closing, not one a value)
def cut_closing(closing: str) -> re.Pattern[str]:
    """A closing the reply stops inside of: any start of it, then the text's end (Gemma 4's
    ``}<tool_call|>`` of ``}<tool_call|><|tool_response>``, the model's turn ending between the two)."""
    core = closing.strip()
    starts = "|".join(re.escape(core[:n]) for n in range(len(core), 0, -1)) or "(?!)"
    return re.compile(rf"\s*(?:{starts})\s*\Z")


def split_hole(text: str) -> list[str]:
    """``text`` in the parts a pattern joins with optional whitespace: at whitespace, between two markers
    (``>`` then ``<``, ``]`` then ``[``), and around holes."""
    parts: list[str] = []
    for i, part in enumerate(re.split(f"([{ID_HOLE}{COUNT_HOLE}{KEY_HOLE}])", text)):
        parts += [part] if i % 2 else [p for p in re.split(rf"\s+|{markers.BETWEEN_TWO}", part) if p]
    return parts
