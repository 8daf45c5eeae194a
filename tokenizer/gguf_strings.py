"""Bulk reading of a GGUF string array: 10^5 length-prefixed strings in a few C-level calls.

A string array is a run of records, each a u64 little-endian length and that many bytes. Read one by one
(``gguf_reader``'s checked loop), a record costs ~0.35 µs of interpreted work: Llama 3's 128k tokens and
280k merges take 0.15 s, more than a quarter of its load. But almost every length fits in one byte, so
almost every record starts with ``[length] 00 00 00 00 00 00 00``, and token text never holds seven NULs
in a row. One ``bytes.split`` at those seven NULs cuts a window of the file into parts that each hold one
string and then the next record's length byte:

    window  05 0000000000000 h e l l o 03 0000000000000 a b c 02 ...
    parts   [05]             [h e l l o 03]             [a b c 02] ...

Part i holds exactly one string when its length is one more than the length byte that ends part i-1.
That check runs over all parts at once (``map``); where it fails (a string of 256 bytes or more, an empty
one, seven NULs inside one) the records are read one by one from there until a record lines up with a
part again. A string is only ever taken after its own record's length was read, so the result is the
record-by-record reading whatever the bytes are (tests compare the two on random arrays).

Measured (``scripts/bench_instructions.py``, cold load, with merges left undecoded for
``bpe.split_pairs``): GPT-2 913M -> 816M instructions, Llama 3 3952M -> 3478M. For the tokens alone the
gain is small (each C-level pass still costs 20-35 ns per string here); the merges gain most, as they
skip a decode and a split per merge.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from itertools import accumulate, repeat
from operator import add, eq, itemgetter

_SEP = b"\0" * 7
_LAST = itemgetter(-1)
_CHOP = itemgetter(slice(None, -1))
_U64 = struct.Struct("<Q")


def split_strings(window: bytes, count: int) -> tuple[list[bytes], int] | None:
    """The first ``count`` strings of the string records at the start of ``window``, and how many bytes
    of it they span; None when the window ends first (or a length runs past it).

    Example: ``split_strings(b"\\x02" + bytes(7) + b"hi" + b"\\x01" + bytes(7) + b"!", 2)`` is
    ``([b"hi", b"!"], 19)``."""
    parts = window.split(_SEP, count)
    lens = list(map(len, parts))
    if 0 in lens[:-1]:  # a run of 14+ NULs: read every record one by one
        parts, lens = [window], [len(window)]
    lasts = list(map(_LAST, parts[:-1]))
    fits = list(map(eq, lens[1:], map(add, lasts, repeat(1))))  # fits[k]: part k+1 is one string + a length byte
    starts: list[int] = []  # where each part starts in the window, computed once a record does not fit
    out: list[bytes] = []
    part = 1 if lens[0] == 1 else 0  # > 0: the next string starts part `part`, its length is lasts[part-1]
    pos = 0  # otherwise: the next record starts at window[pos]
    end = len(window)
    while len(out) < count:
        if part:
            try:
                stop = fits.index(False, part - 1) + 1
            except ValueError:
                stop = len(parts)
            take = min(stop - part, count - len(out))
            out += map(_CHOP, parts[part:part + take])
            part += take
            if len(out) == count:  # the last part taken ends with the next record's length byte
                return out, sum(lens[:part]) + 7 * part - 8
            if part == len(parts):
                return None
            length = lasts[part - 1]
            if len(out) == count - 1 and lens[part] >= length:  # the last string: what follows does not matter
                out.append(parts[part][:length])
                return out, sum(lens[:part]) + 7 * part + length
            starts = starts or list(accumulate(map(add, lens, repeat(7)), initial=0))
            pos, part = starts[part] - 8, 0
            continue
        if pos + 8 > end:
            return None
        (length,) = _U64.unpack_from(window, pos)
        if length > end - pos - 8:
            return None
        out.append(window[pos + 8:pos + 8 + length])
        pos += 8 + length
        if window[pos + 1:pos + 8] == _SEP and len(parts) > 1:  # realign with the parts if one starts here
            starts = starts or list(accumulate(map(add, lens, repeat(7)), initial=0))
            found = bisect_left(starts, pos + 8)
            if found < len(parts) and starts[found] == pos + 8:
                part = found
    return out, pos


def decode_all(raw: list[bytes]) -> list[str]:
    """UTF-8 text of each string (undecodable bytes kept as surrogate escapes), in one decode when no
    string holds a NUL: joined at NULs, decoded, split again (a NUL ends any broken sequence, so each
    string decodes as it would alone)."""
    joined = b"\0".join(raw)
    if len(raw) > 1 and joined.count(b"\0") == len(raw) - 1:
        return joined.decode("utf-8", "surrogateescape").split("\0")
    return list(map(bytes.decode, raw, repeat("utf-8"), repeat("surrogateescape")))
