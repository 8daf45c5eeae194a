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

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..spec import ModelKind, TokenizerError, TokenizerSpec
from .llama_regex import CUSTOM, Splitter, may_match_empty, spans, split_one, text_rewrite, tiled, translate

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
_UPPER_LOWER_M = r"((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+"
_UPPER_ONLY_M = r"((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*"
_LETTERS_CASED = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
_LETTERS_UPPER = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
_GPT4O_TAIL = r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _T
# AFMoE's Asian scripts, code point for code point as llama.cpp's source spells them (U+8C48, not U+F900).
_AFMOE_ASIAN = ("[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf"
                "\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+")
_PORO = r" ?[^(\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"

_GROUPS: list[tuple[tuple[str, ...], PreSplit]] = [
    (("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"), _LLAMA3),
    (("dbrx", "smaug-bpe"), PreSplit(_LLAMA3.patterns)),
    (("chatglm-bpe",), PreSplit(_LLAMA3.patterns)),
    (("glm4", "glm5"), PreSplit(_LLAMA3.patterns, ignore_merges=True)),
    (("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"), _QWEN2),
    (("qwen35",), PreSplit((_C + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|" + _T,))),
    (("gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "roberta-bpe", "gigachat", "a.x-4.0",
      "exaone4", "modern-bert", "jina-v1-en", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de",
      "jina-v2-code", "mellum"), _GPT2),
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
    (("bailingmoe", "bailingmoe2", "llada-moe"),
     PreSplit((r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",))),
    (("minicpm5",), PreSplit((r"\p{N}{1,3}", _C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _T),
                             ignore_merges=True)),
    (("laguna",), PreSplit(("[^\\n]+|[\\n]+", _QWEN2.patterns[0]))),
    (("gemma4", "granite-embed-multi-311m"),
     PreSplit(("[^\\n]+|[\\n]+",), byte_encode=False, add_bos=True, newline_runs_whole=True)),
    (("sarvam-moe",), PreSplit(("[^\\n]+|[\\n]+",), byte_encode=False)),
    (("jais-2",), PreSplit((_C + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                            + "|".join(f"\\s{{{n}}}(?!\\S)" for n in (512, 256, 128, 64, 32, 16, 8, 4))
                            + r"|\s{1,2}(?!\S)|\s{1}",))),
    (("spark2_5",), PreSplit((r"\p{N}{1,3}", _CJK_KANA,
                              _PUN + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+", r"\p{N}"))),
    (("youtu",), PreSplit(("[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c"
                           "\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                           _LETTERS_CASED + _C + "?|" + _LETTERS_UPPER + _C + r"?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + _T),
                          ignore_merges=True)),
    (("exaone-moe",), PreSplit((_C + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}"
                                     r"| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",))),
    (("granite-embed-multi-97m",),
     PreSplit(("[^\\r\\n\\p{L}\\p{N}]?" + _UPPER_LOWER_M + _C + "?|[^\\r\\n\\p{L}\\p{N}]?" + _UPPER_ONLY_M + _C + "?"
               + _GPT4O_TAIL,), ignore_merges=True)),
    (("tiny_aya", "cohere2moe"), PreSplit((r"\d{1,3}(?=(?:\d{3})*\b)", _LETTERS_CASED + _C + "?|" + _LETTERS_UPPER + _C + "?"
                                           + _GPT4O_TAIL))),
    (("superbpe",), PreSplit((r"\p{N}+", r"(?=(\d{3})+(?!\d))"))),
    (("afmoe",), PreSplit((r"\p{AFMoE_digits}", _AFMOE_ASIAN,
                           _PUN + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|" + _T))),
    (("kimi-k2",), PreSplit((r"\p{Han}+",))),
    (("chameleon",), PreSplit(("<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\t\n]|    |  )", r"\p{N}",
                               r"[\p{P}!-/:-@\[-`{-~]", _G2), add_bos=True)),
    # SentencePiece ("llama" GGUF models): no pre-split, the whole segment is one word.
    (("none",), PreSplit((), byte_encode=False)),
    (("whitespace",), PreSplit((r"\S+",), byte_encode=False)),
]

#: name -> PreSplit, every name of llama.cpp's table we implement.
PRE_SPLITS: dict[str, PreSplit] = {name: pre for names, pre in _GROUPS for name in names}
#: what an unknown or empty name falls back to (llama.cpp does the same, with a warning).
FALLBACK_NAME = "default"


# Possessive twins of the busiest alternatives: the same matches, less backtracking bookkeeping in re
# (a tenth of a warm Llama 3 encode). Applied only to whole top-level alternatives, where nothing in the
# pattern follows them, so a quantifier at an alternative's end never needs to give characters back;
# an optional lead (" ?" or one non-letter) would only give back a character the class after it
# cannot start with (a space is in \s, so never in \p{L}, \p{N} or [^\s...]; [^\r\n\p{L}\p{N}]
# holds no letter). Python >= 3.11 (possessive quantifiers); older ones run the plain alternatives.
_POSSESSIVE_TWINS = {
    r" ?\p{L}+": r" ?+\p{L}++",
    r" ?\p{N}+": r" ?+\p{N}++",
    r" ?[^\s\p{L}\p{N}]+": r" ?+[^\s\p{L}\p{N}]++",
    r"[^\r\n\p{L}\p{N}]?\p{L}+": r"[^\r\n\p{L}\p{N}]?+\p{L}++",
    r"\p{N}{1,3}": r"\p{N}{1,3}+",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*": r" ?+[^\s\p{L}\p{N}]++[\r\n]*+",
}
try:
    re.compile("a++")
    _PLUS, _STAR = "++", "*+"
except re.error:  # Python 3.10
    _POSSESSIVE_TWINS = {}
    _PLUS, _STAR = "+", "*"
_TOP_LEVEL_PART = re.compile(r"(?:\\.|\[(?:\\.|[^\]\\])*\]|\((?:\\.|\[(?:\\.|[^\]\\])*\]|[^()\\\[])*\)|[^|\\\[(])+")


def top_level_alternatives(pattern: str) -> list[str] | None:
    """The alternatives of a pattern's outermost ``|`` (None when it has nested groups or an empty one):
    ``(?:a|b)c|d`` -> ["(?:a|b)c", "d"]."""
    alternatives = _TOP_LEVEL_PART.findall(pattern)
    return alternatives if "|".join(alternatives) == pattern else None


def with_possessive_twins(pattern: str) -> str:
    r"""``pattern`` with each whole top-level alternative that has a possessive twin replaced by it:
    ``'s| ?\p{L}+|\s+`` -> ``'s| ?+\p{L}++|\s+``."""
    alternatives = top_level_alternatives(pattern)
    if not alternatives or not _POSSESSIVE_TWINS:
        return pattern
    return "|".join(_POSSESSIVE_TWINS.get(part, part) for part in alternatives)


def splitter_for(pre: PreSplit) -> Splitter:
    """The fastest exact splitter of a table row: its fused regex if it has one. A pattern that llama.cpp
    runs through a hand-written splitter (``llama_regex.CUSTOM``) gets ours."""
    return compile_split((pre.fused,) if pre.fused else pre.patterns, table_row=True)


def _merge_matches(parts: list[tuple[str, bool]], behavior: str) -> list[str]:
    """HF's SplitDelimiterBehavior on (piece, is_delimiter) parts. With delimiter " " and "a  b":
    Isolated a| | |b, Removed a|b, MergedWithPrevious "a "|" "|b, MergedWithNext a|" "|" b",
    Contiguous a|"  "|b (parts of one kind next to each other join: a run of delimiters, or of the
    non-delimiters an inverted split or an empty match leaves side by side)."""
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
        joins = delimiter == previous if behavior == "Contiguous" else delimiter and not previous
        if joins and out:
            out[-1] += piece
        else:
            out.append(piece)
        previous = delimiter
    return out


def _split_with(regex: re.Pattern[str], behavior: str, invert: bool, rewrite: Callable[[str], str | None]) -> Splitter:
    careful = may_match_empty(regex)

    def split(text: str) -> list[str]:
        parts: list[tuple[str, bool]] = []
        pos = 0
        scan = rewrite(text)
        for start, end in spans(regex, text if scan is None else scan, careful):
            if start > pos:
                parts.append((text[pos:start], invert))
            parts.append((text[start:end], not invert))  # an empty match still cuts, as in HF
            pos = end
        if pos < len(text):
            parts.append((text[pos:], invert))
        return [piece for piece in _merge_matches(parts, behavior) if piece]

    return split


def compile_split(patterns: tuple[str, ...], behaviors: tuple[tuple[str, bool], ...] | None = None,
                  table_row: bool = False) -> Splitter:
    """A function text -> pieces applying the patterns in sequence (each with its HF Split behavior).
    ``table_row``: llama.cpp's dialect (letter subcategories folded into L, ``\\d`` = 0-9) and its
    hand-written splitters (``llama_regex.CUSTOM``); else HF's, as a tokenizer.json means its regexes."""
    hf = not table_row

    def one(pattern: str, step: tuple[str, bool]) -> Splitter:
        if table_row and pattern in CUSTOM:
            return CUSTOM[pattern]
        rewrite = text_rewrite(pattern, hf)
        if table_row:
            pattern = with_possessive_twins(pattern)
        if step == ("Isolated", False):
            return split_one(re.compile(translate(tiled(pattern), hf)), rewrite, hf)
        return _split_with(re.compile(translate(pattern, hf)), *step, rewrite)

    steps = behaviors or (("Isolated", False),) * len(patterns)
    splitters = [one(p, step) for p, step in zip(patterns, steps)]
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


def sentencepiece_splitter(tokens: list[str], pre: Splitter | None) -> Splitter:
    """SentencePiece text ("▁" for spaces) -> chunks that merge apart, for the word cache: the pre-split
    ``pre`` (None: none), then a cut before each "▁" that no token joins to the character before it.
    "▁the▁cat" -> "▁the", "▁cat" — unless some token holds "e▁", which blocks cuts after "e"
    (a merge never crosses a cut, so each chunk's ids are its own). Over 4,000 blocked characters:
    no cuts.

    The chunks are found, not cut (one ``findall``; a split at lookarounds tries them at every
    character: 1.4x the instructions): a chunk is its leading "▁" run, then characters other than "▁", each
    blocked one taking the "▁" run after it along; a "▁" run that ends the text is a chunk of its own.
    """
    blocked = sorted({tok[i - 1] for tok in tokens if "\u2581" in tok[1:]
                      for i in range(1, len(tok)) if tok[i] == "\u2581" and tok[i - 1] != "\u2581"})
    if len(blocked) > 4000:
        return pre or (lambda text: [text])
    cls = "".join(re.escape(ch) for ch in blocked)
    body = f"[^\u2581{cls}]{_PLUS}" + (f"|[{cls}]\u2581{_STAR}" if cls else "")
    chunker = re.compile(f"\u2581{_STAR}(?:{body}){_PLUS}|\u2581{_PLUS}").findall
    if pre is None:
        return chunker

    def split(text: str) -> list[str]:
        return [chunk for piece in pre(text) for chunk in chunker(piece)]

    return split


def pre_splitter(spec: TokenizerSpec) -> tuple[PreSplit, Splitter]:
    """The pre-split stage of a spec: its table row, and the function that splits a fragment into the
    words (byte-level) or chunks (SentencePiece, "▁" for spaces) the merge model takes one by one."""
    default = "default" if spec.model.kind is ModelKind.BYTE_LEVEL else "none"
    row = lookup(spec.pre_split.name or default)[0]
    if spec.pre_split.patterns:
        try:
            split = compile_split(spec.pre_split.patterns, spec.pre_split.behaviors)
        except (re.error, ValueError, TypeError) as err:
            raise TokenizerError(f"{spec.source}: a pre-split pattern is not a valid regex ({err})") from None
    else:
        split = splitter_for(row)
    if spec.model.kind is ModelKind.BYTE_LEVEL:
        return row, split
    no_pre_split = not spec.pre_split.patterns and not row.patterns and not row.fused
    return row, sentencepiece_splitter(spec.vocab.tokens, None if no_pre_split else split)
