"""Pre-split patterns, keyed by llama.cpp's ``tokenizer.ggml.pre`` names.

Byte-level BPE never merges across a pre-split boundary, so the split decides
what a token can be: " hello" may become one token, "hello world" never does.
Each family's split is a list of regexes in llama.cpp's syntax, applied in
sequence: the first splits the text, each next one splits every piece of the
one before, and text between two matches stays a piece of its own (HF's
"Isolated" behaviour). Worked example, GPT-2's pattern on "I'm 42!"::

    >>> compile_split(PRE_SPLITS["gpt-2"].patterns)("I'm 42!")
    ['I', "'m", ' 42', '!']

The table is data: adding a family is adding a row. The regexes run on
Python's ``re`` after ``\\p{L}``, ``\\p{N}``, ``\\s`` ... are rewritten into
explicit code point ranges taken from llama.cpp's own Unicode tables
(``_unicode_tables.py``, generated), so a character is a letter here exactly
when it is one for llama.cpp, whatever Unicode version this Python ships.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import _unicode_tables as ut

_C = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
# GPT-2's regex ends in \s+(?!\S), which leaves a lone space before a non-space unmatched; that gap is
# a piece of its own (llama.cpp's custom splitter emits it as \s+). The trailing |\s+ matches exactly
# that one character, so findall tiles the text and the slower gap-aware path is never needed.
_G2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_T = r"\s*[\r\n]+|\s+(?!\S)|\s+"
_PUN = r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
_UPPER_LOWER = r"((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
_UPPER_ONLY = r"((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
_DEEPSEEK_LLM_LETTERS = (  # escaped: copied as text, NFC would rewrite some of these code points
    r"A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    r"\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481"
    r"\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf"
    r"\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d"
    r"\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4"
    r"\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
    r"\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
    r"\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    r"\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17"
    r"\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
    r"\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943"
)
_CJK = r"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_CJK_KANA = r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"


@dataclass(frozen=True)
class PreSplit:
    """One family's pre-split and the llama.cpp flags that go with it.

    byte_encode: spell words in the GPT-2 byte alphabet (False: raw UTF-8, spaces as "▁").
    ignore_merges: a word that is already a token is emitted whole, unmerged.
    add_bos: llama.cpp's default for add_bos_token when the GGUF does not say.
    newline_runs_whole: a word made only of newlines is emitted whole when it is a token (Gemma 4).
    fused: one regex that splits exactly as the sequence ``patterns`` does, run instead of it for
        speed (one findall instead of one per piece); the differential tests hold it to llama.cpp.
    """

    patterns: tuple[str, ...]
    byte_encode: bool = True
    ignore_merges: bool = False
    add_bos: bool = False
    newline_runs_whole: bool = False
    fused: str | None = None


_LLAMA3 = PreSplit((_C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _T,),
                   ignore_merges=True, add_bos=True)
_QWEN2 = PreSplit((_C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _T,))
_GPT2 = PreSplit((_G2,))
# StarCoder: digits split one by one, then GPT-2's split on the rest. Fused: a digit is its own
# piece, and a space run before a digit ends there as it would at the end of a piece.
_STARCODER = PreSplit((r"\p{N}", _G2), fused=r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                                              r"|\s+(?![^\s\p{N}])|\s+")
_GPT4O_TAIL = r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _T
_PORO = r" ?[^(\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"

_GROUPS: list[tuple[tuple[str, ...], PreSplit]] = [
    (("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"), _LLAMA3),
    (("dbrx", "smaug-bpe"), PreSplit(_LLAMA3.patterns)),
    (("chatglm-bpe", "glm4"), PreSplit(_LLAMA3.patterns)),
    (("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"), _QWEN2),
    (("qwen35",), PreSplit((_C + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|" + _T,))),
    (("gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "roberta-bpe", "gigachat", "a.x-4.0",
      "exaone4", "modern-bert", "jina-v1-en", "jina-v2-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "mellum"), _GPT2),
    (("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"), _STARCODER),
    (("falcon",), PreSplit((r"[\p{P}\$\+<=>\^~\|`]+", _G2, "[0-9][0-9][0-9]"))),
    (("default",), PreSplit((r"[\p{P}\$\+<=>\^~\|]+", _G2, r"\p{N}+", "[0-9][0-9][0-9]"))),
    (("deepseek-coder",), PreSplit(("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}"))),
    (("deepseek-llm",), PreSplit(("[\r\n]", r"\s?[" + _DEEPSEEK_LLM_LETTERS + "]+",
                                  r"\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
                                  r"\s+$", _CJK, r"\p{N}+"))),
    (("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"),
     PreSplit((r"\p{N}{1,3}", _CJK_KANA,
               _PUN + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|" + _T))),
    (("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"),
     PreSplit(("[^\\r\\n\\p{L}\\p{N}]?" + _UPPER_LOWER + _C + "?|[^\\r\\n\\p{L}\\p{N}]?" + _UPPER_ONLY + _C + "?"
               + _GPT4O_TAIL,))),
    (("tekken",), PreSplit(("[^\\r\\n\\p{L}\\p{N}]?" + _UPPER_LOWER + "|[^\\r\\n\\p{L}\\p{N}]?" + _UPPER_ONLY
                            + r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _T,), ignore_merges=True, add_bos=True)),
    (("seed-coder",), PreSplit((_C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|" + _T,))),
    (("poro-chat", "bloom", "gpt3-finnish"), PreSplit((_PORO,))),
    (("viking",), PreSplit((_PORO, r"\p{N}"))),
    (("ufakzeka",), PreSplit((r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _T,))),
    (("bailingmoe", "llada-moe"), PreSplit((r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                                           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",))),
    (("minicpm5",), PreSplit((r"\p{N}{1,3}", _C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _T),
                             ignore_merges=True)),
    (("laguna",), PreSplit(("[^\\n]+|[\\n]+", _QWEN2.patterns[0]))),
    (("gemma4",), PreSplit(("[^\\n]+|[\\n]+",), byte_encode=False, add_bos=True, newline_runs_whole=True)),
    (("sarvam-moe",), PreSplit(("[^\\n]+|[\\n]+",), byte_encode=False)),
    # SentencePiece ("llama" GGUF models): no pre-split, the whole segment is one word.
    (("none",), PreSplit((), byte_encode=False)),
    (("whitespace",), PreSplit((r"\S+",), byte_encode=False)),
]

#: name -> PreSplit, every name of llama.cpp's table we implement.
PRE_SPLITS: dict[str, PreSplit] = {name: pre for names, pre in _GROUPS for name in names}
#: what an unknown or empty name falls back to (llama.cpp does the same, with a warning).
FALLBACK_NAME = "default"


# --- translation of llama.cpp regex syntax to Python's re -------------------------

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
_ASTRAL_STARTS: list[int] = []
_ASTRAL_STAND_INS: list[str] = []


def _build_astral_index() -> None:
    spans = sorted((max(a, 0x10000), b, name) for name, rs in _CLASSES.items() for a, b in rs if b > 0xFFFF)
    pos = 0x10000
    for a, b, name in spans:
        if a > pos:
            _ASTRAL_STARTS.append(pos)
            _ASTRAL_STAND_INS.append(_STAND_IN[None])
        _ASTRAL_STARTS.append(a)
        _ASTRAL_STAND_INS.append(_STAND_IN[name])
        pos = b + 1
    _ASTRAL_STARTS.append(pos)
    _ASTRAL_STAND_INS.append(_STAND_IN[None])


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


def _split_one(regex: re.Pattern[str], uses_classes: bool) -> Splitter:
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


def _tiled(pattern: str) -> str:
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


def splitter_for(pre: PreSplit) -> Splitter:
    """The fastest exact splitter of a table row: its fused regex if it has one."""
    return compile_split((pre.fused,) if pre.fused else pre.patterns)


def _merge_matches(parts: list[tuple[str, bool]], behavior: str) -> list[str]:
    """HF's SplitDelimiterBehavior on (piece, is_delimiter) parts. With delimiter " " and "a  b":
    Isolated a| | |b, Removed a|b, MergedWithPrevious "a "|" "|b, MergedWithNext a|" "|" b",
    Contiguous a|"  "|b (a delimiter joins a neighbour only if that neighbour is not one)."""
    if behavior == "Isolated":
        return [p for p, _ in parts]
    if behavior == "Removed":
        return [p for p, delimiter in parts if not delimiter]
    if behavior == "MergedWithNext":
        return [p[::-1] for p in reversed(_merge_matches([(p[::-1], d) for p, d in reversed(parts)],
                                                          "MergedWithPrevious"))]
    out: list[str] = []
    previous = False
    for piece, delimiter in parts:
        joins = previous if behavior == "Contiguous" else not previous
        if delimiter and joins and out:
            out[-1] += piece
        else:
            out.append(piece)
        previous = delimiter
    return out


def _split_with(regex: re.Pattern[str], behavior: str, invert: bool) -> Splitter:
    def split(text: str) -> list[str]:
        parts: list[tuple[str, bool]] = []
        pos = 0
        for m in regex.finditer(text):
            start, end = m.span()
            if end == start:
                continue
            if start > pos:
                parts.append((text[pos:start], invert))
            parts.append((text[start:end], not invert))
            pos = end
        if pos < len(text):
            parts.append((text[pos:], invert))
        return _merge_matches(parts, behavior)

    return split


def compile_split(patterns: tuple[str, ...], behaviors: tuple[tuple[str, bool], ...] | None = None) -> Splitter:
    """A function text -> pieces applying the patterns in sequence (each with its HF Split behavior)."""
    steps = behaviors or (("Isolated", False),) * len(patterns)
    splitters = [_split_one(re.compile(translate(_tiled(p))), "\\p{" in p) if step == ("Isolated", False)
                 else _split_with(re.compile(translate(p)), *step) for p, step in zip(patterns, steps)]
    if not splitters:
        return lambda text: [text]
    if len(splitters) == 1:
        return splitters[0]

    def split(text: str) -> list[str]:
        pieces = [text]
        for splitter in splitters:
            pieces = [sub for piece in pieces for sub in splitter(piece)]
        return pieces

    return split


def lookup(name: str) -> tuple[PreSplit, bool]:
    """The PreSplit for a llama.cpp pre name, and whether it was known."""
    if name in PRE_SPLITS:
        return PRE_SPLITS[name], True
    return PRE_SPLITS[FALLBACK_NAME], False
