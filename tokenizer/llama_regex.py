"""llama.cpp's regex dialect on Python's ``re``: Unicode classes, astral code points, custom splitters.

llama.cpp runs each pre-split pattern either through a hand-written splitter
(keyed by the exact pattern text) or through ``std::regex`` with its own
Unicode tables. ``translate`` rewrites a pattern for Python's ``re`` with the
same classes (``_unicode_tables.py``, generated from llama.cpp), and
``split_one`` applies it the way llama.cpp does: the text is rewritten first
(astral code points, non-ASCII spaces) and matches plus the gaps between them
become the pieces. Worked example::

    >>> split_one(re.compile(translate(r"\\p{N}{1,3}")), True)("ab12345")
    ['ab', '123', '45']
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Callable, Iterator

from . import _unicode_tables as ut


def _ranges_to_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{a:08X}" if a == b else f"\\U{a:08X}-\\U{b:08X}" for a, b in ranges)


# Performance: Python's re compiles a class of BMP-only ranges into a 64k bitmap
# (one lookup per character) but falls back to a linear scan of every range as
# soon as one range lies above U+FFFF — 7x slower on our corpus. So the classes
# hold only their BMP part, and before matching, each astral code point of the
# text is replaced by a BMP stand-in of the same llama.cpp class (offsets do not
# move: one code point for one); pieces are then cut from the original text.
# llama.cpp's regex path does the same ("collapsed" text). The stand-ins are
# members of their class, so a real one in the text is classified the same way.
_CLASSES = {name: getattr(ut, name) for name in ("L", "N", "P", "S", "M")}
_STAND_IN = {"L": "\u00aa", "N": "\u00b2", "P": "\u00a1", "S": "\u00a2", "M": "\u0300", None: "\u0378"}
#: llama.cpp's ``unicode_cpt_is_han`` (used by Kimi K2's splitter), assigned or not.
HAN = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0x2CEB0, 0x2EBEF), (0x2F800, 0x2FA1F))
#: stand-ins for astral Han: a BMP Han letter, and a BMP Han code point with no class (as unassigned ones).
_HAN_STAND_IN = {"L": "\u4e00", None: "\ufaff"}
_ASTRAL_STARTS: list[int] = []
_ASTRAL_STAND_INS: list[str] = []


def _build_astral_index() -> None:
    """Breakpoints over U+10000.. : from each, the stand-in of its class (and Han or not) applies."""
    spans = sorted((max(a, 0x10000), b, name) for name, rs in _CLASSES.items() for a, b in rs if b > 0xFFFF)
    han = [(a, b) for a, b in HAN if a > 0xFFFF]
    cuts = sorted({0x10000, *(a for a, _, _ in spans), *(b + 1 for _, b, _ in spans),
                   *(a for a, _ in han), *(b + 1 for _, b in han)} - {0x110000})
    starts = [a for a, _, _ in spans]
    for cut in cuts:
        i = bisect.bisect_right(starts, cut) - 1
        name = spans[i][2] if i >= 0 and spans[i][1] >= cut else None
        in_han = any(a <= cut <= b for a, b in han)
        _ASTRAL_STARTS.append(cut)
        _ASTRAL_STAND_INS.append(_HAN_STAND_IN[name] if in_han else _STAND_IN[name])


_build_astral_index()
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def _stand_in(match: re.Match[str]) -> str:
    return _ASTRAL_STAND_INS[bisect.bisect_right(_ASTRAL_STARTS, ord(match.group())) - 1]


def collapse_astral(text: str) -> str:
    """Replace each astral code point by a BMP member of its class (same length)."""
    return _ASTRAL.sub(_stand_in, text)


# CPython stores a str with 1, 2 or 4 bytes per code point, 4 only when one is above U+FFFF, so the
# object's size tells in O(1) what max(text) would find in O(n) (17 % of encode time on a warm cache).
# The rule is checked once at import; anywhere it does not hold, max() is used.
_COMPACT_BASE = sys.getsizeof("\u0100") - 2 * 2


def _wide_by_size(text: str) -> bool:
    return not text.isascii() and sys.getsizeof(text) - _COMPACT_BASE >= 4 * (len(text) + 1)


def _wide_by_max(text: str) -> bool:
    return bool(text) and max(text) > "\uffff"


_SIZE_RULE_HOLDS = all(_wide_by_size(t) == _wide_by_max(t)
                       for t in ("", "a", "\xe9", "\u4e2d\xe9", "\U0001F600", "a\U0001F600b", "\u4e2d" * 9))
has_astral = _wide_by_size if _SIZE_RULE_HOLDS else _wide_by_max


def _bmp(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    return tuple((a, min(b, 0xFFFF)) for a, b in ranges if a <= 0xFFFF)


_CLASS_BODY = {name: _ranges_to_class(_bmp(rs)) for name, rs in _CLASSES.items()}
# llama.cpp folds the letter subcategories into LETTER (its regex path has no finer classes).
_CLASS_BODY.update({sub: _CLASS_BODY["L"] for sub in ("Lu", "Ll", "Lt", "Lm", "Lo")})
_SPACE_BODY = _ranges_to_class(tuple((c, c) for c in ut.WHITESPACE))
_ESCAPE = re.compile(r"\\p\{(\w+)\}|\\[sSd]|\\.|\[|\]|\((?!\?)")


def translate(pattern: str) -> str:
    """Rewrite a llama.cpp/HF regex for Python's re with llama.cpp's classes.

    ``\\p{L}`` -> [letters], ``\\s`` -> [its 25 spaces], ``\\S`` -> [^...],
    ``\\d`` -> [0-9]; capturing groups become non-capturing (findall returns
    whole matches). Inside a [...] class the bodies are spliced in place.
    """
    out: list[str] = []
    pos = 0
    depth = 0
    for m in _ESCAPE.finditer(pattern):
        out.append(pattern[pos:m.start()])
        pos = m.end()
        token = m.group(0)
        if m.group(1):
            if m.group(1) not in _CLASS_BODY:
                raise ValueError(f"unsupported Unicode class {token} in pre-split pattern")
            body = _CLASS_BODY[m.group(1)]
            out.append(body if depth else f"[{body}]")
        elif token == r"\s":
            out.append(_SPACE_BODY if depth else f"[{_SPACE_BODY}]")
        elif token == r"\S":
            if depth:
                raise ValueError(r"\S inside a character class is not supported")
            out.append(f"[^{_SPACE_BODY}]")
        elif token == r"\d":
            out.append("0-9" if depth else "[0-9]")
        elif token == "[":
            depth += 1
            out.append(token)
        elif token == "]":
            depth = max(0, depth - 1)
            out.append(token)
        elif token == "(":
            out.append("(" if depth else "(?:")
        else:
            out.append(token)
    out.append(pattern[pos:])
    return "".join(out)


Splitter = Callable[[str], list[str]]


_NON_ASCII_SPACE = re.compile("[" + "".join(f"\\U{c:08X}" for c in ut.WHITESPACE if c > 0x7F) + "]")


def spaces_to_vt(text: str) -> str:
    """llama.cpp's wregex path (patterns without \\p{..}) sees every non-ASCII space as U+000B."""
    return _NON_ASCII_SPACE.sub("\x0b", text)


def split_one(regex: re.Pattern[str], uses_classes: bool) -> Splitter:
    """Matches and the text between them, in order, as pieces.

    Before matching, the text is rewritten the way llama.cpp rewrites it for the
    same kind of pattern (same length, so offsets carry over to the original).
    """
    findall = regex.findall
    finditer = regex.finditer

    def split(text: str) -> list[str]:
        if uses_classes:
            if has_astral(text):
                return _cut(text, finditer(collapse_astral(text)))
        elif _NON_ASCII_SPACE.search(text):
            return _cut(text, finditer(spaces_to_vt(text)))
        pieces = findall(text)
        if sum(map(len, pieces)) == len(text):  # the usual case: the matches tile the text
            return pieces
        return _cut(text, finditer(text))

    return split


def _cut(text: str, matches: Iterator[re.Match[str]]) -> list[str]:
    """Pieces of text at the match boundaries, gaps between matches included."""
    pieces = []
    pos = 0
    for m in matches:
        start, end = m.span()
        if start > pos:
            pieces.append(text[pos:start])
        if end > start:
            pieces.append(text[start:end])
        pos = end
    if pos < len(text):
        pieces.append(text[pos:])
    return pieces


_ONE_CLASS = re.compile(r"(\\p\{\w+\}|\[(?!\^)(?:\\.|[^\]\\])*\])\+?")


def tiled(pattern: str) -> str:
    """A pattern that is one character class (``\\p{N}``, ``[\\r\\n]+``) gets ``|[^class]+`` added.

    The added alternative matches exactly the gaps the pattern leaves (maximal runs
    of other characters), so findall tiles the text and the gap-aware path is not needed.
    """
    m = _ONE_CLASS.fullmatch(pattern)
    if not m:
        return pattern
    body = m.group(1)
    members = body if body.startswith("\\p") else body[1:-1]
    return f"{pattern}|[^{members}]+"


# --- llama.cpp's hand-written splitters, selected by the exact text of a table pattern -------------

_NUMBER_RUN = re.compile(translate(r"\p{N}+"))


def _digit_groups(text: str) -> list[str]:
    """llama.cpp's AFMoE digit split (Tiny Aya's ``\\d{1,3}(?=(?:\\d{3})*\\b)`` runs the same code): each
    run of numbers is cut into groups of three counted from its end, and the text before a run stays
    joined to the run's first group — "ab1234 x" -> ["ab1", "234", " x"]."""
    scan = collapse_astral(text) if has_astral(text) else text
    pieces: list[str] = []
    prev = 0
    for m in _NUMBER_RUN.finditer(scan):
        start, end = m.span()
        for cut in range(start + ((end - start) % 3 or 3), end + 1, 3):
            pieces.append(text[prev:cut])
            prev = cut
    if prev < len(text):
        pieces.append(text[prev:])
    return pieces


_HAN_CLASS = "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in HAN if b <= 0xFFFF)  # astral Han: its stand-ins
# Kimi K2's splitter as one regex (llama.cpp's hand-written code, same pieces): Han runs; letter runs
# without Han, an optional lead character and an English contraction; 1-3 digits; then Llama 3's tail.
_KIMI_K2 = (f"[{_HAN_CLASS}]+|[^\\r\\n\\p{{L}}\\p{{N}}]?(?:(?![{_HAN_CLASS}])\\p{{L}})+"
            r"(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

#: pattern text -> splitter, as llama.cpp's ``unicode_regex_split_custom`` picks them (GGUF table rows only).
CUSTOM: dict[str, Splitter] = {
    r"\p{AFMoE_digits}": _digit_groups,
    r"\d{1,3}(?=(?:\d{3})*\b)": _digit_groups,
    r"\p{Han}+": split_one(re.compile(translate(_KIMI_K2)), True),
}
