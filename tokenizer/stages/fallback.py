"""Byte fallback: what a character with no token becomes (SentencePiece), the last stage before the ids.

A SentencePiece vocabulary with ``byte_fallback`` spells such a character as its UTF-8 bytes' ``<0xXX>``
tokens when it has every one of them; otherwise the character is one unknown token (none without an unk
token), and with ``fuse_unk`` (HF) an unk right after another in the same chunk is not repeated.
HF's rule, worked: "😀" in a vocabulary lacking <0xF0> is one unk, not three byte tokens and an unk.

The merge loops mark such a character in their output as ``-1 - code point``; ``fill`` replaces each mark::

    fill([7, -1 - ord("\\n")]) -> (7, 8)        (with <0x0A> = 8)
"""

from __future__ import annotations

from ..spec import ModelKind, TextIndex, TokenizerSpec
from .byte_alphabet import BYTE_TO_CHAR

#: characters whose fallback ids are kept (bounded, whatever characters come)
CACHE_MAX = 4096


def byte_token_ids(spec: TokenizerSpec, index: TextIndex, missing: int) -> list[int]:
    """The token id of each byte value: its spelling in the byte alphabet (byte-level), else its <0xXX>
    token (SentencePiece; an ASCII byte may be its own character); ``missing`` where there is none."""
    get = index.get
    if spec.model.kind is ModelKind.BYTE_LEVEL:
        return [get(BYTE_TO_CHAR[b], missing) for b in range(256)]
    return [get(f"<0x{b:02X}>", get(chr(b), missing) if b < 0x80 else missing) for b in range(256)]


class ByteFallback:
    """The fallback stage of one vocabulary (see the module docstring)."""

    def __init__(self, spec: TokenizerSpec, byte_tokens: list[int], missing: int):
        self.byte_tokens, self.missing = byte_tokens, missing
        self.enabled = spec.model.byte_fallback
        self.unk_alone: tuple[int, ...] = () if spec.vocab.unk_id is None else (spec.vocab.unk_id,)
        self.unk_fuses = bool(spec.model.fuse_unk and spec.vocab.unk_id is not None)
        self.known: dict[str, tuple[int, ...]] = {}  # character -> its ids, for at most CACHE_MAX characters

    def fill(self, ids: list[int]) -> tuple[int, ...]:
        """A chunk's ids with each mark (``-1 - code point``) replaced by that character's fallback ids."""
        if min(ids, default=0) >= 0:
            return tuple(ids)
        out: list[int] = []
        for token in ids:
            if token < 0:
                self._add(chr(-1 - token), out)
            else:
                out.append(token)
        return tuple(out)

    def _add(self, char: str, out: list[int]) -> None:
        ids = self.known.get(char)
        if ids is None:
            if len(self.known) >= CACHE_MAX:
                self.known.clear()
            ids = self.known[char] = self.ids(char)
        if not (self.unk_fuses and ids is self.unk_alone and out and out[-1] == ids[0]):
            out += ids

    def ids(self, char: str) -> tuple[int, ...]:
        """The ids of one character with no token: its byte tokens, else the unk (or nothing)."""
        if self.enabled:
            tokens = tuple(self.byte_tokens[b] for b in char.encode("utf-8"))
            if self.missing not in tokens:
                return tokens
        return self.unk_alone
