"""The GPT-2 byte alphabet: a printable character for every byte.

Byte-level BPE vocabularies spell each byte of the UTF-8 text as one printable
character, so that every token is a readable string and nothing is ever
unknown. Bytes that already print as themselves (``!``..``~``, ``¡``..``¬``,
``®``..``ÿ``) keep their code point; the other 68 take U+0100, U+0101, ... in
byte order. Worked example: space (0x20) is the 33rd such byte, so it becomes
U+0120 ``Ġ``; newline (0x0A, the 11th) becomes U+010A ``Ċ``::

    >>> spell(" hi\\n".encode())
    'ĠhiĊ'
    >>> unspell('ĠhiĊ')
    b' hi\\n'
"""

from __future__ import annotations

_PRINTABLE = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]


def _build() -> list[str]:
    alphabet = [""] * 256
    next_free = 0x100
    printable = set(_PRINTABLE)
    for byte in range(256):
        if byte in printable:
            alphabet[byte] = chr(byte)
        else:
            alphabet[byte] = chr(next_free)
            next_free += 1
    return alphabet


#: BYTE_TO_CHAR[b] is the printable character that spells byte b.
BYTE_TO_CHAR: list[str] = _build()

# str.translate tables: latin-1 text (one char per byte) -> spelling, and back.
_SPELL_TABLE = {b: ch for b, ch in enumerate(BYTE_TO_CHAR)}
UNSPELL_TABLE = {ord(ch): b for b, ch in enumerate(BYTE_TO_CHAR)}


def spell(data: bytes) -> str:
    """Spell raw bytes in the byte alphabet (one character per byte)."""
    return data.decode("latin-1").translate(_SPELL_TABLE)


def unspell(text: str) -> bytes | None:
    """Raw bytes of a spelled token, or None if a character is not in the alphabet."""
    raw = text.translate(UNSPELL_TABLE)
    try:
        return raw.encode("latin-1")
    except UnicodeEncodeError:
        return None
