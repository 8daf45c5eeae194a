"""The decode table: the raw bytes each token stands for, as llama.cpp's token_to_piece gives them.

    byte-level   "Ġhello" -> b" hello"   (the byte alphabet undone)
    SentencePiece "▁hello" -> b" hello", "<0x0A>" -> b"\\n" (byte tokens)
    special      "<|im_end|>" -> its text;  unused / undefined tokens -> b""

Built on the first decode of a sequence (encoding never needs it): every token converted as a normal one
in bulk (one C-level ``translate``/``replace`` + ``encode`` each), then the few other tokens fixed up. A
reply streamed token by token asks for one token at a time (``one_token``): Gemma 3's 262k-entry table
is never built for it.
"""

from __future__ import annotations

import re

from ..spec import ModelKind, TokenType
from .byte_alphabet import UNSPELL_TABLE, unspell

SPECIAL_TYPES = frozenset({TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN})
BYTE_TOKEN = re.compile("<0x[0-9A-Fa-f]{2}>")


def utf8(text: str) -> bytes:
    """UTF-8 of a token string; undecodable bytes kept by the loaders come back as they were."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _normal_bytes(kind: ModelKind, text: str) -> bytes:
    if kind is ModelKind.BYTE_LEVEL:
        raw = unspell(text)
        return raw if raw is not None else utf8(text)
    return utf8(text.replace("\u2581", " "))


def _other_bytes(text: str, token_type: int, as_normal: bytes) -> bytes:
    if token_type in SPECIAL_TYPES:
        return utf8(text)
    if token_type == TokenType.BYTE:
        return bytes([int(text[3:5], 16)]) if BYTE_TOKEN.fullmatch(text) else as_normal
    return b""  # unused / undefined tokens print nothing, as in llama.cpp


def one_token(kind: ModelKind, text: str, token_type: int) -> bytes:
    """The bytes of one token, as ``byte_table`` gives them (a stream's first tokens need no table)."""
    as_normal = _normal_bytes(kind, text)
    return as_normal if token_type == TokenType.NORMAL else _other_bytes(text, token_type, as_normal)


def byte_table(kind: ModelKind, tokens: list[str], types: list[int]) -> list[bytes]:
    """Raw bytes of every token, by id."""
    try:
        if kind is ModelKind.BYTE_LEVEL:
            table = [t.translate(UNSPELL_TABLE).encode("latin-1") for t in tokens]
        else:
            table = [t.replace("\u2581", " ").encode("utf-8") for t in tokens]
    except UnicodeError:  # a token outside the byte alphabet, or one with undecodable bytes
        table = [_normal_bytes(kind, t) for t in tokens]
    for i, token_type in enumerate(types):
        if token_type != TokenType.NORMAL:
            table[i] = _other_bytes(tokens[i], token_type, table[i])
    return table


def byte_fallback_text(parts: list[bytes], is_byte: list[bool]) -> str:
    """HF's ByteFallback decoder over token bytes: a run of byte tokens is UTF-8 text when valid, else one
    U+FFFD per token ("<0xDC><0x53>" -> "\ufffd\ufffd", where decoding the bytes at once gives "\ufffdS");
    other tokens decode on their own, errors replaced."""
    out: list[str] = []
    run: list[bytes] = []
    for part, byte in zip(parts, is_byte):
        if byte:
            run.append(part)
            continue
        if run:
            out.append(_run_text(run))
            run = []
        out.append(part.decode("utf-8", "replace"))
    if run:
        out.append(_run_text(run))
    return "".join(out)


def _run_text(run: list[bytes]) -> str:
    try:
        return b"".join(run).decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd" * len(run)
