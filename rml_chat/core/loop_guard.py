"""The repeated-span guard: a reply whose tail has become one span written over and over is ended, with
a stop reason of its own ("repetition"), before it costs more than ``--repeat-guard`` tokens of loop.

A small model that loops writes the same sentence until ``-n`` or a full context ("He had returned home
to his home." 1,300 tokens long). A sampler can make such loops rarer (docs/performance.md measures DRY
and the repeat penalty); the guard bounds what one costs. It reads the text written so far: the tail is
a loop when its last MIN_TAIL characters equal the MIN_TAIL before them shifted by a period of 1 to
MAX_PERIOD characters; the loop is as long as that holds going back. A span longer than SHORT_PERIOD (a
paragraph, two long sentences) is a loop only once it is written three times: a model asked to rewrite a
block writes it twice on purpose. A refrain, a table's rows or a list of like items differ somewhere within
the period, so they don't count; an exact repeat of ``limit`` tokens does (about 4 characters a token; the
tokens per character of the reply itself are used).

Example::

    >>> guard = LoopGuard(limit=64)
    >>> guard.loop_tokens("Once upon a time. " + "He went home. " * 10, tokens=50)
    0
    >>> guard.loop_tokens("Once upon a time. " + "He went home. " * 60, tokens=200) >= 64
    True
"""

from __future__ import annotations

MIN_TAIL = 300      # characters of the tail compared (a loop is at least this long before it is one)
SHORT_PERIOD = 200  # a span up to this long (a sentence or two) is a loop from its second writing
MAX_PERIOD = 1200   # the longest span looked for (a paragraph), a loop from its third writing
CHECK_EVERY = 16    # tokens between two looks (a look costs microseconds)


class LoopGuard:
    """``limit``: the loop tokens a reply may write before it is ended (0: the guard is off)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._next_look = CHECK_EVERY

    def loop_tokens(self, text: str, tokens: int) -> int:
        """The tokens of the repeated tail of ``text`` (``tokens``: how many the reply has so far), 0 for none."""
        if len(text) <= MIN_TAIL:
            return 0
        tail = text[-MIN_TAIL:]
        for period in range(1, min(MAX_PERIOD, len(text) - MIN_TAIL) + 1):
            if tail == text[-MIN_TAIL - period:-period]:
                start = len(text) - MIN_TAIL - period
                while start >= period and text[start - period:start] == text[start:start + period]:
                    start -= period
                while start > 0 and text[start - 1] == text[start - 1 + period]:
                    start -= 1
                if period > SHORT_PERIOD and len(text) - start < 3 * period:
                    continue  # (a long span written twice: a rewrite, not yet a loop)
                return (len(text) - start) * tokens // len(text)
        return 0

    def tripped(self, text: str, tokens: int) -> int:
        """Every CHECK_EVERY tokens: the loop's tokens when they reach the limit, else 0."""
        if self.limit <= 0 or tokens < self._next_look:
            return 0
        self._next_look = tokens + CHECK_EVERY
        looped = self.loop_tokens(text, tokens)
        return looped if looped >= self.limit else 0
