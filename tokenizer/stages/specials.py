"""Cutting special tokens out of text before it is tokenized.

Control and user-defined tokens ("<|im_start|>", "<end_of_turn>", ...) are
found first and map straight to their ids; the text between them is tokenized
normally. When two candidates start at the same place the longest wins: with
"<|a|>" and "<|a|>x" both special, "<|a|>xy" yields "<|a|>x" then "y".

The candidates become one regex shaped like a trie (shared prefixes factored
out, each optional tail greedy), so a position costs a walk down the trie
rather than a try of every token: Gemma 3 has 6,000+ specials.

Worked example: {"<s>", "</s>", "<sep>"} compiles to ``<(?:/s>|s(?:>|ep>))``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import cached_property
from itertools import compress

from ..spec import TokenizerSpec, TokenType
from ._unicode_tables import WHITESPACE
from .normalize import normalize
from .token_bytes import SPECIAL_TYPES

#: C isspace() — what llama.cpp strips next to lstrip/rstrip tokens.
ASCII_SPACE = " \t\n\v\f\r"
#: Unicode White_Space (Rust's \s) — what HF strips next to lstrip/rstrip added tokens.
UNICODE_SPACE = "".join(map(chr, WHITESPACE))
#: categories of Rust regex's Unicode \w (Alphabetic ~ letters and Nl, marks, decimal digits, connectors).
_WORD_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Mn", "Mc", "Me", "Nd", "Pc"})


def is_word_char(ch: str) -> bool:
    """HF's test for single_word tokens: "A<mask>" and "é<mask>" touch a word, "-<mask>" does not."""
    return unicodedata.category(ch) in _WORD_CATEGORIES or ch in "\u200c\u200d"


def _trie_pattern(strings: list[str]) -> str:
    trie: dict = {}
    for s in strings:
        node = trie
        for ch in s:
            node = node.setdefault(ch, {})
        node[""] = True

    def emit(node: dict) -> str:
        ends_here = "" in node
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch != ""]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends_here:  # a shorter token ends here: the longer tail is tried first, then dropped
            return "(?:" + body + ")?"
        return body

    return emit(trie)


class SpecialCutter:
    """Splits text into (text, None) and (piece, token_id) parts."""

    def __init__(self, specials: Iterable[tuple[str, int]], lstrip: frozenset[int], rstrip: frozenset[int],
                 single_word: frozenset[int] = frozenset(), spaces: str = ASCII_SPACE):
        self.ids = {text: token_id for text, token_id in specials if text}
        self._lstrip = lstrip
        self._rstrip = rstrip
        self._single_word = single_word
        self._spaces = spaces

    @cached_property
    def _regex(self) -> re.Pattern[str] | None:
        """Compiled on first use: Gemma 3's 6,000-token trie need not cost load time. One capturing
        group around the whole, so that ``split`` keeps the tokens it cuts at."""
        return re.compile(f"({_trie_pattern(sorted(self.ids))})") if self.ids else None

    @cached_property
    def plain(self) -> bool:
        """No token strips the spaces around it or must stand alone as a word: ``split`` is one C-level
        regex split (Gemma 3 cuts every newline and tab run out: ~10 tokens a paragraph)."""
        special = self._lstrip | self._rstrip | self._single_word
        return not any(token_id in special for token_id in self.ids.values())

    def split(self, text: str) -> Iterator[tuple[str, int | None]]:
        """Yield text fragments (id None) and special tokens in order; empty fragments are skipped."""
        if self._regex is None:
            if text:
                yield text, None
            return
        if self.plain:  # nothing to strip or check around a token: the C-level split has the cuts
            parts = self._regex.split(text)
            ids = self.ids
            for at in range(0, len(parts) - 1, 2):
                if parts[at]:
                    yield parts[at], None
                yield parts[at + 1], ids[parts[at + 1]]
            if parts[-1]:
                yield parts[-1], None
            return
        pos = 0
        for m in self._regex.finditer(text):
            start, end = m.span()
            if start < pos:  # inside whitespace an rstrip token already consumed
                continue
            token_id = self.ids[m.group()]
            if token_id in self._single_word and not self._alone(text, start, end):
                continue  # inside a word: stays text (the next match is looked for after it, as in HF)
            left = text[pos:start]
            if token_id in self._lstrip:
                left = left.rstrip(self._spaces)
            if left:
                yield left, None
            yield m.group(), token_id
            pos = end
            if token_id in self._rstrip:
                while pos < len(text) and text[pos] in self._spaces:
                    pos += 1
        if pos < len(text):
            yield text[pos:], None

    def strip_between(self, text: str, after_id: int | None, before_id: int | None) -> str:
        """``text`` as ``split`` leaves it between the special tokens ``after_id`` (before the text) and
        ``before_id`` (after it): spaces after an rstrip token and before an lstrip token removed.
        With "<|end|>" rstrip: strip_between("  hi ", <|end|>, None) -> "hi "."""
        if after_id in self._rstrip:
            text = text.lstrip(self._spaces)
        if before_id in self._lstrip:
            text = text.rstrip(self._spaces)
        return text

    @staticmethod
    def _alone(text: str, start: int, end: int) -> bool:
        return (start == 0 or not is_word_char(text[start - 1])) and (end == len(text) or not is_word_char(text[end]))


class SpecialTokens:
    """The special-token stage of one vocabulary: which tokens are cut out of text, and by which cutter.

    * ``all``: control, user-defined and unknown tokens (and the byte tokens an added-token list names):
      what ``encode(parse_special=True)`` cuts;
    * ``user``: the user-defined ones alone, cut whatever ``parse_special`` says;
    * ``normalized``: added tokens matched on normalized text, cut after the normalizer (None: none).

    Worked example (SmolLM2, ChatML): ``all.split("<|im_start|>user")`` -> ("<|im_start|>", 1), ("user", None);
    ``user`` holds no turn marker, so the same text encoded literally stays text.
    """

    def __init__(self, spec: TokenizerSpec, types: list[int]):
        tokens, added = spec.vocab.tokens, spec.added
        self._added = added
        specials = [(tokens[i], i) for i in compress(range(len(tokens)), map(SPECIAL_TYPES.__contains__, types))]
        specials += [(tokens[i], i) for i in sorted(added.byte_ids)]
        self.texts = {text: i for text, i in specials if text}  # every token parse_special cuts, by text
        raw = [(text, i) for text, i in specials if i not in added.normalized_ids]
        self.all = self.cutter(raw)
        self.user = self.cutter([(text, i) for text, i in raw if types[i] == TokenType.USER_DEFINED])
        self.normalized = self.cutter([(normalize(text, spec.normalizer.forms), i) for text, i in specials
                                       if i in added.normalized_ids]) if added.normalized_ids else None
        self._few: dict[frozenset[str], SpecialCutter] = {}

    def cutter(self, specials: Iterable[tuple[str, int]]) -> SpecialCutter:
        """A cutter of these (text, id) pairs with this vocabulary's strip and single-word rules."""
        added = self._added
        return SpecialCutter(specials, added.lstrip_ids, added.rstrip_ids, added.single_word_ids,
                             UNICODE_SPACE if added.unicode_strip else ASCII_SPACE)

    def among(self, texts: Iterable[str]) -> SpecialCutter:
        """A cutter of only these special texts (kept: Gemma's 6,000-token cutter is slow to build)."""
        key = frozenset(texts)
        cutter = self._few.get(key)
        if cutter is None:
            cutter = self._few[key] = self.cutter((t, self.texts[t]) for t in key
                                                  if t in self.texts and t in self.all.ids)
        return cutter

    def literal(self, protected: frozenset[int]) -> tuple[SpecialCutter, SpecialCutter | None]:
        """The cutters for literal text in which the ``protected`` ids stay text: ``user`` and
        ``normalized`` without them."""
        normalized = None if self.normalized is None else self.cutter(
            (t, i) for t, i in self.normalized.ids.items() if i not in protected)
        return self.cutter((t, i) for t, i in self.user.ids.items() if i not in protected), normalized
