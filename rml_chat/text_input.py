"""One text policy for every input path: invalid UTF-8 becomes U+FFFD, with a one-time warning.

The paths: command-line arguments (``-p``, ``--system``, ``--stop`` …), stdin, what is typed or pasted
into the REPL, and the files ``/load`` and ``--resume`` read. Python hands undecodable argv and terminal
bytes over as lone surrogates (``\\udcff``); a file or stdin arrives as bytes. Either way each invalid
byte becomes U+FFFD (as ``bytes.decode(errors="replace")`` does), and the first time a path brings one,
one line names the path and the byte offset::

    rml-chat: warning: stdin is not valid UTF-8 (byte 0xff at offset 6); invalid bytes were replaced with U+FFFD

Rejecting the input instead would lose what was typed; replacing keeps every valid character.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from .errors import AppError
from .terminal import visible

MAX_TEXT_BYTES = 8 * 2**20  # no context holds more text than this (about 2 million tokens): stdin, -f, /file

_SURROGATES = re.compile("[\ud800-\udfff]")
_LONE_SURROGATE = "holds text that is not valid Unicode (a lone surrogate)"
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # in JSON text: a surrogate, paired or lone
_warned: set[str] = set()


def _warn(line: str) -> None:
    try:
        print(visible(f"rml-chat: warning: {line}"), file=sys.stderr, flush=True)
    except (BrokenPipeError, OSError):
        pass


def from_bytes(data: bytes, source: str, warn: Callable[[str], None] = _warn) -> str:
    """Decode ``data`` (from ``source``: "stdin", a file's name) under the policy."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        _once(source, f"{source} is not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})", warn)
        return data.decode("utf-8", errors="replace")


def from_str(text: str, source: str, warn: Callable[[str], None] = _warn) -> str:
    """A string Python decoded with surrogate escapes (argv, a terminal), under the policy."""
    if not _SURROGATES.search(text):
        return text
    raw = text.encode("utf-8", "surrogateescape") if _only_escapes(text) else None
    if raw is not None:
        return from_bytes(raw, source, warn)
    _once(source, f"{source} {_LONE_SURROGATE}", warn)
    return _SURROGATES.sub("\ufffd", text)


def from_json(text: str, source: str, warn: Callable[[str], None] = _warn, numbers_only: bool = False) -> Any:
    """``json.loads(text)`` under the policy: JSON may escape a lone surrogate (``"\\ud800"``), which is no
    Unicode character and which no UTF-8 can write; each one in a string (a key too) becomes U+FFFD, and
    the first time ``source`` brings one, ``warn`` says so. ValueError or RecursionError as ``json.loads``;
    with ``numbers_only``, also for ``NaN``, ``Infinity`` and a number past a double's range (``1e400``),
    which Python reads and JSON has not (a schema holding one makes replies that are no JSON)::

        >>> from_json('["\\\\ud83d\\\\ude00 is a pair", "\\\\ud800 is not"]', "chat.json", warn=print)
        chat.json holds text that is not valid Unicode (a lone surrogate); invalid bytes were replaced with U+FFFD
        ['😀 is a pair', '� is not']
    """
    value = json.loads(text, parse_constant=_no_number, parse_float=_finite_float) if numbers_only else \
        json.loads(text)
    if not _ESCAPED_SURROGATE.search(text):  # (nearly every file: no walk)
        return value
    found: list[bool] = []

    def valid(item: Any) -> Any:
        if isinstance(item, str):
            if _SURROGATES.search(item):
                found.append(True)
                return _SURROGATES.sub("\ufffd", item)
            return item
        if isinstance(item, list):
            return [valid(v) for v in item]
        if isinstance(item, dict):
            return {valid(k): valid(v) for k, v in item.items()}
        return item

    value = valid(value)
    if found:
        _once(source, f"{source} {_LONE_SURROGATE}", warn)
    return value


def _only_escapes(text: str) -> bool:
    """Every surrogate is a surrogateescape of a byte (U+DC80-U+DCFF), so the bytes can be recovered."""
    return all("\udc80" <= ch <= "\udcff" for ch in _SURROGATES.findall(text))


def without_bom(text: str) -> str:
    """The text without a leading byte-order mark (U+FEFF: editors on Windows start UTF-8 files with one;
    it is no part of the text)."""
    return text[1:] if text.startswith("\ufeff") else text


def _no_number(constant: str) -> float:
    raise ValueError(f"{constant} is no JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal} is past the range of a number here")
    return value


def read_limited(path: str | os.PathLike, limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of the file at ``path``, or OSError (``err.strerror`` says why, as for a missing file).

    A file, a pipe or a device that holds more than ``limit`` bytes is refused once ``limit + 1`` are read,
    so ``/dev/zero`` or a pipe that never ends costs ``limit`` bytes, not all the memory there is::

        >>> read_limited("/dev/zero", limit=4)
        Traceback (most recent call last):
        OSError: [Errno 27] more than 4 bytes
    """
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"more than {limit:,} bytes")
    return data


def read_stdin(limit: int = MAX_TEXT_BYTES) -> str:
    """All of stdin, as bytes first, under the policy, without a byte-order mark. Stdin that holds more than
    ``limit`` bytes (``yes | rml-chat -p …`` never ends) is refused in one line once that much is read."""
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1)
    if len(data) > limit:
        raise AppError(f"stdin holds more than {limit:,} bytes, more text than any context takes; pass a part of "
                       "it (head -c, or -f FILE for a file)", "input")
    return without_bom(from_bytes(data, "stdin") if isinstance(data, bytes) else from_str(data, "stdin"))


def _once(source: str, line: str, warn: Callable[[str], None]) -> None:
    if source not in _warned:
        _warned.add(source)
        warn(line + "; invalid bytes were replaced with U+FFFD")


def whole_number(text: str) -> int | None:
    """A number a user gives to pick something (a message, a branch, a code block, a listed chat): ASCII
    digits alone, else None. ``str.isdigit`` takes ``²`` (which ``int`` refuses) and other scripts' digits
    (which ``int`` reads, where a user meant a name).

    >>> whole_number("12"), whole_number("²"), whole_number("٣"), whole_number(" 3"), whole_number("")
    (12, None, None, None, None)
    """
    return int(text) if re.fullmatch(r"[0-9]{1,18}", text) else None
