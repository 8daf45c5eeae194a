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
from collections.abc import Iterable, Iterator
from functools import cached_property

#: C isspace() — what llama.cpp strips next to lstrip/rstrip tokens.
ASCII_SPACE = " \t\n\v\f\r"


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

    def __init__(self, specials: Iterable[tuple[str, int]], lstrip: frozenset[int], rstrip: frozenset[int]):
        self.ids = {text: token_id for text, token_id in specials if text}
        self._lstrip = lstrip
        self._rstrip = rstrip

    @cached_property
    def _regex(self) -> re.Pattern[str] | None:
        """Compiled on first use: Gemma 3's 6,000-token trie need not cost load time."""
        return re.compile(_trie_pattern(sorted(self.ids))) if self.ids else None

    def split(self, text: str) -> Iterator[tuple[str, int | None]]:
        """Yield text fragments (id None) and special tokens in order; empty fragments are skipped."""
        if self._regex is None:
            if text:
                yield text, None
            return
        pos = 0
        for m in self._regex.finditer(text):
            start, end = m.span()
            if start < pos:  # inside whitespace an rstrip token already consumed
                continue
            token_id = self.ids[m.group()]
            left = text[pos:start]
            if token_id in self._lstrip:
                left = left.rstrip(ASCII_SPACE)
            if left:
                yield left, None
            yield m.group(), token_id
            pos = end
            if token_id in self._rstrip:
                while pos < len(text) and text[pos] in ASCII_SPACE:
                    pos += 1
        if pos < len(text):
            yield text[pos:], None
