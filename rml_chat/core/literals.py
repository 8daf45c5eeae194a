"""A tool-call argument's value written as a literal, read into its JSON value: JSON itself, a Python
literal (LFM2's ``NAME(city='Oslo', ok=True, tags=["a"])``), or bare keys and a template's own quote
(Gemma 4's ``{theme:<|"|>dark<|"|>,count:3}``).

The text is cut into strings and the rest. A string in the template's quote is taken verbatim; one in
Python's quotes is read as Python reads it (its escapes: ``"a\\nb"`` is two lines). In the rest, Python's
``True``/``False``/``None`` become JSON's and a bare key (``theme:``) is quoted; then it is JSON::

    >>> literal_value('{theme:<|"|>dark<|"|>,count:3}', '<|"|>')
    {'theme': 'dark', 'count': 3}
    >>> literal_value("['a', True, None]", "'"), literal_value("1.5e10", "'"), literal_value("Oslo", "'")
    (['a', True, None], 15000000000.0, 'Oslo')

``scan`` finds where such a value ends in a longer text: at a closing quote, or a bracket's partner, or
where the next argument's or the call's closing text starts, strings and brackets skipped (-1: a string
that never closes).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence

_PYTHON_WORDS = re.compile(r"\b(True|False|None)\b")
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][\w.\-]*)(\s*:)")
_JSON_WORDS = {"True": "true", "False": "false", "None": "null"}
_OPENERS = {"{": "}", "[": "]", "(": ")"}


def _quotes(quote: str) -> tuple[str, ...]:
    """The quotes a family's strings come in: its own, and where that is one of Python's, both of them."""
    return ("'", '"') if quote in ("'", '"') else (quote, '"')


def _string_end(text: str, at: int, quote: str) -> int:
    """Where the string opening at ``at`` ends (past its closing quote); -1 if it never closes. A backslash
    escapes the next character in Python's and JSON's quotes, not in a template's own."""
    i = at + len(quote)
    while i < len(text):
        if quote in ("'", '"') and text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        i += 1
    return -1


def scan(text: str, quote: str, ends: Sequence[re.Pattern[str]]) -> int:
    """Where the value at the start of ``text`` ends: a string or bracketed value, whole; a bare one, where
    one of ``ends`` (the texts after a value) first matches outside strings and brackets. ``len(text)``
    where none does; -1 where a string never closes.

        >>> scan("'a, b', x=1)]", "'", [re.compile(", "), re.compile(r"\\)\\]")])
        6
        >>> scan('[1, "x)"], y=2)', "'", [re.compile(", "), re.compile(r"\\)")])
        9
    """
    quotes, depth, i = _quotes(quote), 0, 0
    while i < len(text):
        opened = next((q for q in quotes if text.startswith(q, i)), None)
        if opened is not None:
            end = _string_end(text, i, opened)
            if end < 0:
                return -1
            i = end
            if depth == 0:
                return i
            continue
        if depth == 0 and i > 0 and any(e.match(text, i) for e in ends):
            return i
        if text[i] in _OPENERS:
            depth += 1
        elif text[i] in _OPENERS.values() and depth > 0:
            depth -= 1
            if depth == 0:
                return i + 1
        elif depth == 0 and i == 0 and any(e.match(text, i) for e in ends):
            return 0
        i += 1
    return len(text)


def literal_value(text: str, quote: str) -> object:
    """The JSON value of a literal in this family's quote; the text itself where it is no literal."""
    quotes, parts, i, start = _quotes(quote), [], 0, 0
    while i < len(text):
        opened = next((q for q in quotes if text.startswith(q, i)), None)
        if opened is None:
            i += 1
            continue
        end = _string_end(text, i, opened)
        if end < 0:
            return text
        parts.append(_plain(text[start:i]))
        parts.append(json.dumps(_string(text[i:end], opened, quote), ensure_ascii=False))
        i = start = end
    parts.append(_plain(text[start:]))
    try:
        return json.loads("".join(parts))
    except json.JSONDecodeError:
        return text


def _string(literal: str, opened: str, quote: str) -> str:
    inner = literal[len(opened):-len(opened)]
    if opened not in ("'", '"') or (opened == '"' and quote not in ("'", '"')):
        try:
            return json.loads(literal) if opened == '"' else inner
        except json.JSONDecodeError:
            return inner
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return inner
    return value if isinstance(value, str) else inner


def _plain(text: str) -> str:
    """Text outside strings: Python's words as JSON's, bare keys quoted."""
    text = _PYTHON_WORDS.sub(lambda m: _JSON_WORDS[m.group()], text)
    return _BARE_KEY.sub(lambda m: f'{m.group(1)}"{m.group(2)}"{m.group(3)}', text)
