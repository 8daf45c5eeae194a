"""A text that grows at its end a piece at a time and is read whole only now and then: a reply, token by token.

Why not ``self.text += piece``: CPython appends to a string in place only when nothing else holds it, which a
local name allows and an attribute never does (the object holds it). So an attribute's append copies the whole
text, and a reply read a token at a time costs the square of its length: at 80,000 tokens (350 KB of text) an
append costs about 100 µs, and the reply parser keeps half a dozen such texts. Here the pieces go into a list
(an append costs the same at any length) and are joined when the text is read; the joined text is kept, so a
second read costs nothing until the next piece. ``tail(n)`` reads the end alone, without joining::

    >>> text = GrownText("He")
    >>> text += "l"
    >>> text += "lo"
    >>> str(text), len(text), text.tail(3), bool(GrownText())
    ('Hello', 5, 'llo', False)
"""

from __future__ import annotations

from itertools import chain

PIECES_KEPT = 64  # small pieces held apart before they are joined into one chunk (a str object each: ~50 bytes)


class GrownText:
    __slots__ = ("_chunks", "_recent", "_size")

    def __init__(self, text: str = "") -> None:
        self._chunks = [text] if text else []  # the text's start, in chunks of PIECES_KEPT pieces (or one, once read)
        self._recent: list[str] = []           # the pieces since, as they came
        self._size = len(text)

    def __iadd__(self, piece: str) -> GrownText:
        if piece:
            self._recent.append(piece)
            self._size += len(piece)
            if len(self._recent) == PIECES_KEPT:  # (a token's piece a str: a long reply would hold thousands)
                self._chunks.append("".join(self._recent))
                self._recent.clear()
        return self

    def __str__(self) -> str:
        if len(self._chunks) + len(self._recent) > 1:
            self._chunks, self._recent = ["".join(self._chunks + self._recent)], []
        return (self._chunks or self._recent or [""])[0]

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def tail(self, size: int) -> str:
        """The last ``size`` characters (all of them where there are fewer), from the pieces at the end."""
        taken, need = [], size
        for part in chain(reversed(self._recent), reversed(self._chunks)):
            if need <= 0:
                break
            taken.append(part[max(len(part) - need, 0):])  # (only the end of a long chunk is copied)
            need -= len(part)
        return "".join(reversed(taken))
