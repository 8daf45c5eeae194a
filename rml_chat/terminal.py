"""What may reach a terminal: rml-chat's own styling, and every other character shown as what it is.

A reply, a thought, a tool's name, arguments and result, an MCP server's text, a file name or a value quoted
in an error line: none of it comes from rml-chat, and any of it may hold bytes that drive a terminal (a
model steered by a piped file can write ``ESC ] 0 ; title BEL``). On a terminal each such character is shown
visibly where it is, as ``cat -v`` and ``less`` show it:

* C0 controls but newline and tab in caret notation: ESC ``^[``, BEL ``^G``, CR ``^M``, backspace ``^H``;
* DEL as ``^?``;
* C1 controls (U+0080..U+009F, among them the one-character CSI, U+009B) as ``<U+009B>``, as ``less`` does;
* a lone surrogate (not Unicode: a file name's byte that is not UTF-8, which Python keeps as U+DC80..U+DCFF,
  as ``<FF>``, a byte as ``less`` shows one; a JSON ``"\\ud800"`` as ``<U+D800>``);
* Unicode's format characters the same way: a bidirectional override (``<U+202E>``) would reorder what
  follows it on screen, and invisible ones (zero-width spaces, tags) hide text; only the joiners, which
  emoji and some scripts need, pass.

    >>> visible("\\x1b]0;PWNED\\x07 and \\x1b[2J\\r\\x9b")
    '^[]0;PWNED^G and ^[[2J^M<U+009B>'

Only rml-chat's own styling is an escape sequence: ``Styled`` is text this module made safe, and ``style``
the one way to wrap text in a sequence. Anything joined to styled text is made visible as it is joined, and
text that lost the mark (an f-string around it) is made visible again where it is printed, so a mistake shows
our own escapes as ``^[[2m`` rather than letting another's through::

    >>> line = "note: " + dim("a \\x1b[8mhidden\\x1b[0m word", tty=True)
    >>> visible(line) == line, "\\x1b[8m" in line
    (True, False)

Elsewhere than a terminal nothing is changed: ``rml-chat -p … > file`` holds the model's exact bytes, the
saved chats the exact text, and ``json_text`` escapes every control character as JSON escapes them (C1 and
DEL too, which JSON allows raw: a ``--json`` line read on a terminal drives nothing).
"""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import math
import os
import re
import shutil
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

# Every C0 control but tab and newline, DEL, C1; and Unicode's format characters (category Cf): the
# bidirectional overrides and isolates that reorder what follows them on screen (U+202A-U+202E,
# U+2066-U+2069, the marks U+200E, U+200F, U+061C), the invisible ones (U+200B, U+2060-U+2064, U+FEFF, the
# tags U+E0001 and U+E0020-U+E007F that can smuggle text), and the rest of Cf as of Unicode 15. Kept as they
# are: the joiners U+200C and U+200D, which emoji sequences and Indic and Persian scripts need.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
                       "\u08e2\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
                       "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                       "\U000e0001\U000e0020-\U000e007f\ud800-\udfff]")
_JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")  # what json.dumps(ensure_ascii=False) leaves raw

# rml-chat's own sequences (SGR attributes, and the line rewrite the progress lines use)
DIM, REVERSE, RESET, CLEAR_LINE = "\x1b[2m", "\x1b[7m", "\x1b[0m", "\r\x1b[K"


def _caret(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if 0xDC80 <= code <= 0xDCFF:
        return f"<{code - 0xDC00:02X}>"
    return "^?" if code == 0x7F else f"<U+{code:04X}>"


class Styled(str):
    """Text safe for a terminal: its own characters made visible, its escape sequences rml-chat's own.
    Plain text joined to it (either side) is made visible as it joins."""

    __slots__ = ()

    def __add__(self, other: str) -> Styled:
        return Styled(str.__add__(self, visible(other)))

    def __radd__(self, other: str) -> Styled:
        return Styled(str.__add__(visible(other), self))


def visible(text: str) -> str:
    """Every control character but newline and tab shown as ``cat -v``/``less`` show it; styled text as is."""
    if isinstance(text, Styled):
        return text
    return _CONTROLS.sub(_caret, text)


def style(text: str, *codes: str) -> Styled:
    """``text`` made visible and wrapped in rml-chat's own sequences (``codes``, then a reset)."""
    return Styled("".join(codes) + visible(text) + RESET)


def dim(text: str, tty: bool) -> Styled:
    """Dim on a terminal (``tty``); elsewhere the text made visible, with no sequence."""
    return style(text, DIM) if tty else Styled(visible(text))


def rewrite_line(text: Styled | str) -> Styled:
    """The cursor back to the line's start, the line cleared, then ``text``: a progress line redrawn."""
    return Styled(CLEAR_LINE) + text


def one_row(forms: Sequence[str], width: int | None = None) -> str:
    """The first of ``forms`` (the longest first) that fits a row of ``width`` (the terminal's) less one
    cell, else the last cut to fit: a line redrawn in place (``\\r``, then cleared) must never wrap, or
    its first row stays on screen::

        >>> one_row(["evaluating the prompt: 48/48 tokens · 40 tok/s", "prompt: 48/48 · 40 tok/s"], 40)
        'prompt: 48/48 · 40 tok/s'
    """
    width = (width or shutil.get_terminal_size((80, 24)).columns) - 1
    for form in forms:
        if cells(form) <= width:
            return form
    cut = forms[-1]
    while cut and cells(cut) > max(width, 1):
        cut = cut[:-1]
    return cut


def for_stream(text: str, stream: TextIO) -> str:
    """Text from elsewhere as it may be written to ``stream``: visible on a terminal, exact otherwise."""
    return visible(text) if is_terminal(stream) else text


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # (a closed or odd stream)
        return False


def known_width(stream: TextIO) -> int:
    """The width in columns of the terminal ``stream`` writes to; 0 where there is none or it says none (a
    pipe, a pty nobody sized): there, lines are left to whatever reads them."""
    if not is_terminal(stream):
        return 0
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        return 0


def utf8_streams() -> None:
    """stdout and stderr write UTF-8 whatever the locale names, as llama.cpp writes a model's bytes (a
    reply in Japanese under ``LANG=en_US.ISO-8859-1`` failed), and never fail on a character: a byte Python
    keeps as a surrogate escape (a file name that is not UTF-8) goes out as that byte, any other lone
    surrogate (a JSON ``"\\ud800"``) as U+FFFD. On a terminal ``visible`` has shown both already."""
    codecs.register_error("rml_chat.exact", _unencodable)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError, OSError, io.UnsupportedOperation):
                stream.reconfigure(encoding="utf-8", errors="rml_chat.exact")


def _unencodable(err: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    lone = err.object[err.start:err.end]
    return b"".join(bytes([ord(c) - 0xDC00]) if "\udc80" <= c <= "\udcff" else "\ufffd".encode() for c in lone), err.end


def json_text(value: Any) -> str:
    """``json.dumps`` with non-ASCII text kept as is, but DEL and C1 controls (and U+2028/9) escaped too,
    and lone surrogates, which JSON writes as escapes and UTF-8 can't write at all. NaN and the infinities,
    which are no JSON (Python reads ``NaN`` and ``1e400`` from a --batch line, and a model may write them
    in a call), are written as ``null``, as JavaScript's ``JSON.stringify`` writes them::

        >>> json_text({"id": float("nan"), "x": [1e400, 0.5]})
        '{"id": null, "x": [null, 0.5]}'
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), ensure_ascii=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: Any) -> Any:
    """``value`` with each NaN or infinite float made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def cells(text: str) -> int:
    """How many terminal columns ``text`` takes: two for a wide character (CJK, most emoji), none for a
    combining mark, one for the rest (what ``wcwidth`` says for the characters a reply holds).

    >>> cells("naïve 界 👋"), cells("e\\u0301")
    (11, 1)
    """
    return sum(_cell(char) for char in text)


def _cell(char: str) -> int:
    if char < "\u0300":  # (ASCII and Latin-1: one column each, the common case made quick)
        return 1
    if unicodedata.combining(char) or char in "\u200b\u200c\u200d\ufe0f":
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1

