"""llama.cpp's and HF's regex dialects on Python's ``re``: Unicode classes, astral code points, empty
matches, llama.cpp's hand-written splitters.

llama.cpp runs each pre-split pattern either through a hand-written splitter
(keyed by the exact pattern text) or through ``std::regex`` with its own
Unicode tables. ``translate`` rewrites a pattern for Python's ``re`` with the
same classes (``_unicode_tables.py``, generated from llama.cpp), and
``split_one`` applies it the way llama.cpp does: the text is rewritten first
(astral code points, non-ASCII spaces) and matches plus the gaps between them
become the pieces. A tokenizer.json pattern is read in HF's dialect instead (``hf=True``): letter
subcategories apart, ``\\d`` any decimal digit, Oniguruma's word class. Worked example::

    >>> split_one(re.compile(translate(r"\\p{N}{1,3}")), text_rewrite(r"\\p{N}"))("ab12345")
    ['ab', '123', '45']
"""

from __future__ import annotations

import bisect
import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from . import _unicode_tables as ut


def _ranges_to_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{a:08X}" if a == b else f"\\U{a:08X}-\\U{b:08X}" for a, b in ranges)


# Performance: Python's re compiles a class of BMP-only ranges into a 64k bitmap
# (one lookup per character) but falls back to a linear scan of every range as
# soon as one range lies above U+FFFF (docs/performance.md has the cost). So the classes
# hold only their BMP part, and before matching, each astral code point of the
# text is replaced by a BMP stand-in of the same class (offsets do not move: one
# code point for one); pieces are then cut from the original text. llama.cpp's
# regex path does the same ("collapsed" text). The stand-ins are members of their
# class, so a real one in the text is classified the same way. Two dialects:
# llama.cpp's (letters are one class L; Han matters to Kimi K2) and HF's
# (tokenizer.json: upper/lower/title/modifier/other letters apart, \d = Nd).
Ranges = tuple[tuple[int, int], ...]
#: llama.cpp's ``unicode_cpt_is_han`` (used by Kimi K2's splitter), assigned or not.
HAN = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0x2CEB0, 0x2EBEF), (0x2F800, 0x2FA1F))
_UNASSIGNED = "\u0378"


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    return tuple((max(x, y), min(p, q)) for x, p in a for y, q in b if max(x, y) <= min(p, q))


#: (ranges, stand-in) layers; where layers overlap, the later one decides.
_LLAMA_LAYERS = [(ut.L, "\u00aa"), (ut.N, "\u00b2"), (ut.P, "\u00a1"), (ut.S, "\u00a2"), (ut.M, "\u0300"),
                 (HAN, "\ufaff"), (_intersect(HAN, ut.L), "\u4e00")]  # Han without a class / Han letters


class _AstralIndex:
    """Breakpoints over U+10000..: from each one on, the stand-in of the layer holding it."""

    def __init__(self, layers: list[tuple[Ranges, str]]):
        spans = [tuple((max(a, 0x10000), b) for a, b in ranges if b > 0xFFFF) for ranges, _ in layers]
        firsts = [[a for a, _ in layer] for layer in spans]
        cuts = sorted({0x10000, *(x for layer in spans for a, b in layer for x in (a, b + 1))} - {0x110000})
        self.starts, self.stand_ins = cuts, []
        for cut in cuts:
            stand_in = _UNASSIGNED
            for layer, first, (_, candidate) in zip(spans, firsts, layers):
                i = bisect.bisect_right(first, cut) - 1
                if i >= 0 and layer[i][1] >= cut:
                    stand_in = candidate
            self.stand_ins.append(stand_in)

    def stand_in(self, match: re.Match[str]) -> str:
        return self.stand_ins[bisect.bisect_right(self.starts, ord(match.group())) - 1]


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")
_LLAMA_ASTRAL = _AstralIndex(_LLAMA_LAYERS)


def collapse_astral(text: str) -> str:
    """Replace each astral code point by a BMP member of its llama.cpp class (same length)."""
    return _ASTRAL.sub(_LLAMA_ASTRAL.stand_in, text)


def collapse_astral_hf(text: str) -> str:
    """The same for HF's classes (a letter keeps its subcategory, a digit stays Nd)."""
    return _ASTRAL.sub(_hf_dialect().astral.stand_in, text)


# CPython stores a str with 1, 2 or 4 bytes per code point, 4 only when one is above U+FFFF, so the
# object's size tells in O(1) what max(text) would find in O(n) (a scan of every text, on the hot path).
# The rule is checked once at import; anywhere it does not hold, max() is used.
_COMPACT_BASE = sys.getsizeof("\u0100") - 2 * 2


def _wide_by_size(text: str) -> bool:
    return not text.isascii() and sys.getsizeof(text) - _COMPACT_BASE >= 4 * (len(text) + 1)


def _wide_by_max(text: str) -> bool:
    return bool(text) and max(text) > "\uffff"


_SIZE_RULE_HOLDS = all(_wide_by_size(t) == _wide_by_max(t)
                       for t in ("", "a", "\xe9", "\u4e2d\xe9", "\U0001F600", "a\U0001F600b", "\u4e2d" * 9))
has_astral = _wide_by_size if _SIZE_RULE_HOLDS else _wide_by_max


def _bmp(ranges: Ranges) -> Ranges:
    return tuple((a, min(b, 0xFFFF)) for a, b in ranges if a <= 0xFFFF)


_LLAMA_BODY = {name: _ranges_to_class(_bmp(getattr(ut, name))) for name in ("L", "N", "P", "S", "M")}
# llama.cpp folds the letter subcategories into LETTER (its regex path has no finer classes).
_LLAMA_BODY.update({sub: _LLAMA_BODY["L"] for sub in ("Lu", "Ll", "Lt", "Lm", "Lo")})
_SPACE_BODY = _ranges_to_class(tuple((c, c) for c in ut.WHITESPACE))
#: symbols HF's \w counts as word characters (Other_Alphabetic: circled and squared letters)
_WORD_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))


@dataclass(frozen=True)
class _HFDialect:
    """HF's classes, built on first use (tokenizer.json patterns only; their tables are a module of
    their own, so a GGUF load never reads them)."""

    bodies: dict[str, str]
    word_escapes: dict[str, str]
    word_body: str
    astral: _AstralIndex


@functools.lru_cache(maxsize=1)
def _hf_dialect() -> _HFDialect:
    from . import _unicode_tables_hf as hf

    bodies = dict(_LLAMA_BODY)
    bodies.update({name: _ranges_to_class(_bmp(getattr(hf, name))) for name in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl")})
    # A word character (Oniguruma): a letter, mark, decimal or letter number, connector punctuation,
    # ²³¹¼½¾ or a circled/squared letter (measured against HF over U+0020-U+2FFFF); \b and \B are
    # lookarounds over that class (Python's \w leaves marks out: "1\u20e3" would get a boundary).
    word = (bodies["L"] + bodies["M"] + bodies["Nd"] + bodies["Nl"] + _ranges_to_class(_WORD_SYMBOLS[:1])
            + "_\u203f\u2040\u2054\ufe33\ufe34\ufe4d-\ufe4f\uff3f\u00b2\u00b3\u00b9\u00bc-\u00be")
    escapes = {r"\w": f"[{word}]", r"\W": f"[^{word}]",
               r"\b": f"(?:(?<=[{word}])(?![{word}])|(?<![{word}])(?=[{word}]))",
               r"\B": f"(?:(?<=[{word}])(?=[{word}])|(?<![{word}])(?![{word}]))"}
    layers = [(hf.Lo, "\u00aa"), (hf.Lu, "\u00c0"), (hf.Ll, "\u00df"), (hf.Lt, "\u01c5"), (hf.Lm, "\u02b0"),
              (ut.N, "\u2460"), (hf.Nl, "\u2167"), (hf.Nd, "\u0660"), (ut.P, "\u00a1"), (ut.S, "\u00a2"),
              (_WORD_SYMBOLS, "\u24b6"), (ut.M, "\u0300")]
    return _HFDialect(bodies, escapes, word, _AstralIndex(layers))


_ESCAPE = re.compile(r"\\p\{(\w+)\}|\\[sSd]|\\.|\[|\]|\((?!\?)")


def translate(pattern: str, hf: bool = False) -> str:
    """Rewrite a llama.cpp (``hf``: tokenizer.json) regex for Python's re with generated classes.

    ``\\p{L}`` -> [letters], ``\\s`` -> [its 25 spaces], ``\\S`` -> [^...],
    ``\\d`` -> [0-9] (HF: [decimal digits]); ``\\p{Lu}`` is every letter for llama.cpp, the
    upper-case ones for HF. Capturing groups become non-capturing (findall returns whole
    matches). Inside a [...] class the bodies are spliced in place.
    """
    dialect = _hf_dialect() if hf else None
    bodies = dialect.bodies if dialect else _LLAMA_BODY
    out: list[str] = []
    pos = 0
    depth = 0
    for m in _ESCAPE.finditer(pattern):
        out.append(pattern[pos:m.start()])
        pos = m.end()
        token = m.group(0)
        if m.group(1):
            if m.group(1) not in bodies:
                raise ValueError(f"unsupported Unicode class {token} in pre-split pattern")
            body = bodies[m.group(1)]
            out.append(body if depth else f"[{body}]")
        elif token == r"\s":
            out.append(_SPACE_BODY if depth else f"[{_SPACE_BODY}]")
        elif token == r"\S":
            if depth:
                raise ValueError(r"\S inside a character class is not supported")
            out.append(f"[^{_SPACE_BODY}]")
        elif token == r"\d":
            digits = bodies["Nd"] if hf else "0-9"
            out.append(digits if depth else f"[{digits}]")
        elif dialect and token in dialect.word_escapes:
            if depth and token != r"\w":
                raise ValueError(f"{token} inside a character class is not supported")
            out.append(dialect.word_body if depth else dialect.word_escapes[token])
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


def text_rewrite(pattern: str, hf: bool = False) -> Callable[[str], str | None]:
    """How a text is rewritten before ``pattern`` runs on it (None: not at all), as llama.cpp does for
    that kind of pattern: astral code points to stand-ins when it uses classes; otherwise llama.cpp's
    wregex path sees every non-ASCII space as U+000B. HF's regexes see the text as it is, but for the
    stand-ins their classes need too."""
    if "\\p{" in pattern or (hf and re.search(r"\\[dwWbB]", pattern)):
        collapse = collapse_astral_hf if hf else collapse_astral
        return lambda text: collapse(text) if has_astral(text) else None
    if hf:
        return lambda text: None
    return lambda text: spaces_to_vt(text) if _NON_ASCII_SPACE.search(text) else None


def split_one(regex: re.Pattern[str], rewrite: Callable[[str], str | None], hf: bool = False) -> Splitter:
    """Matches and the text between them, in order, as pieces; matched on ``rewrite(text)`` when that
    is not None (same length, so offsets carry over to the original). ``hf``: empty matches are
    found the way HF's regex engine finds them (``spans``)."""
    findall = regex.findall
    empty = may_match_empty(regex)  # only then can findall give "" pieces (and HF's search order matter)
    careful = hf and empty

    def split(text: str) -> list[str]:
        scan = None if text.isascii() else rewrite(text)  # ASCII holds nothing any rewrite changes
        if scan is None:
            pieces = findall(text)
            # the usual case: they tile the text (a join is cheaper than summing the lengths)
            if "".join(pieces) == text and not (empty and "" in pieces):
                return pieces
        return _cut(text, spans(regex, text if scan is None else scan, careful))

    return split


def may_match_empty(regex: re.Pattern[str]) -> bool:
    """Whether the pattern can match an empty string somewhere: it matches "" itself, or holds an
    assertion (lookaround, anchor, word boundary) that can hold between two characters. Conservative."""
    return regex.fullmatch("") is not None or re.search(r"\(\?<?[=!]|\\[bBAZ]|(?<!\[)\^|\$", regex.pattern) is not None


def spans(regex: re.Pattern[str], text: str, hf_empty: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each match. Python's ``finditer`` and HF's engine (Oniguruma) differ only around
    empty matches: after a match ending at p, HF takes no empty match at p, and after an empty match at
    p it resumes at p + 1 (so ``\\B|b`` on "ab" cuts at 1 and never matches "b"). ``hf_empty``: the
    pattern is HF's and may match empty (``may_match_empty``), so its matches are searched HF's way."""
    if not hf_empty:
        return [m.span() for m in regex.finditer(text)]
    found, resume, last_end = [], 0, -1
    while resume <= len(text):
        m = regex.search(text, resume)
        if m is None:
            break
        start, end = m.span()
        if start == end and last_end == resume:
            resume += 1
            continue
        resume = last_end = end
        found.append((start, end))
    return found


def _cut(text: str, matches: list[tuple[int, int]]) -> list[str]:
    """Pieces of text at the match boundaries, gaps between matches included (empty matches only cut)."""
    pieces = []
    pos = 0
    for start, end in matches:
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


def _compiled_on_first_use(make: Callable[[], Splitter]) -> Splitter:
    """A splitter whose regex is compiled when first used (Kimi K2's is slow to compile: not at import)."""
    made: list[Splitter] = []

    def split(text: str) -> list[str]:
        if not made:
            made.append(make())
        return made[0](text)

    return split


#: pattern text -> splitter, as llama.cpp's ``unicode_regex_split_custom`` picks them (GGUF table rows only).
CUSTOM: dict[str, Splitter] = {
    r"\p{AFMoE_digits}": _digit_groups,
    r"\d{1,3}(?=(?:\d{3})*\b)": _digit_groups,
    r"\p{Han}+": _compiled_on_first_use(lambda: split_one(re.compile(translate(_KIMI_K2)), text_rewrite(_KIMI_K2))),
}
