"""A bounded reader for the metadata section of a GGUF file.

Layout (little-endian): magic "GGUF", version u32 (2 or 3), tensor count u64,
metadata count u64, then each entry as key (u64 length + UTF-8 bytes), value
type u32 and value. Arrays are element type u32, count u64, elements.

We read only what the tokenizer needs, from a memory map, with every length
and count checked against the bytes that remain: a truncated or corrupt file
raises ``TokenizerError`` naming the path and the offset, never a hang or a
huge allocation. Why not ``gguf.GGUFReader``: it builds numpy views for every
field, which is slow on Gemma 3's 262k-token vocabulary (docs/performance.md).
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
from pathlib import Path
from typing import Any

from ..spec import TokenizerError
from ..speedups import REFERENCE, Speedups

_SCALARS: dict[int, struct.Struct] = {
    0: struct.Struct("<B"), 1: struct.Struct("<b"), 2: struct.Struct("<H"), 3: struct.Struct("<h"),
    4: struct.Struct("<I"), 5: struct.Struct("<i"), 6: struct.Struct("<f"), 7: struct.Struct("<?"),
    10: struct.Struct("<Q"), 11: struct.Struct("<q"), 12: struct.Struct("<d"),
}
_ARRAY_CODES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
TYPE_NAMES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32",
              7: "bool", 8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64"}


class _Cursor:
    """Reads little-endian values from a buffer, checking every bound."""

    def __init__(self, path: str, buf: Any, raw: frozenset[str] = frozenset(), bulk: frozenset[str] = frozenset(),
                 speedups: Speedups = REFERENCE):
        self.path, self.buf, self.pos, self.end = path, buf, 0, len(buf)
        self.raw = raw  # keys whose strings are returned as bytes, undecoded
        self.bulk = bulk  # keys whose big string arrays the accelerator may keep in their bytes
        self.speedups = speedups

    def fail(self, message: str, at: int | None = None) -> TokenizerError:
        return TokenizerError(f"{self.path}: offset {self.pos if at is None else at}: {message}")

    def need(self, size: int, what: str) -> None:
        if size > self.end - self.pos:
            raise self.fail(f"{what} needs {size} bytes but the file ends {self.end - self.pos} bytes later (truncated?)")

    def u32(self, what: str) -> int:
        self.need(4, what)
        (value,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def u64(self, what: str) -> int:
        self.need(8, what)
        (value,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return value

    def string(self, what: str) -> str:
        start = self.pos
        length = self.u64(f"{what} length")
        self.need(length, f"{what} of {length} bytes")
        raw = bytes(self.buf[self.pos:self.pos + length])
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            if what.startswith("key"):
                raise self.fail(f"{what} is not valid UTF-8", start) from None
            return raw.decode("utf-8", "surrogateescape")

    def value(self, vtype: int, key: str, keep: bool) -> Any:
        if vtype in _SCALARS:
            fmt = _SCALARS[vtype]
            self.need(fmt.size, f"value of {key}")
            (value,) = fmt.unpack_from(self.buf, self.pos)
            self.pos += fmt.size
            return value
        if vtype == STRING:
            return self.string(f"value of {key}")
        if vtype == ARRAY:
            return self.array(key, keep)
        raise self.fail(f"{key}: unknown value type {vtype}", self.pos - 4)

    def array(self, key: str, keep: bool) -> Any:
        etype = self.u32(f"element type of {key}")
        count = self.u64(f"element count of {key}")
        if etype in _SCALARS:
            size = _SCALARS[etype].size * count
            self.need(size, f"{key} ({count} x {TYPE_NAMES[etype]})")
            start, self.pos = self.pos, self.pos + size
            if not keep:
                return None
            view = memoryview(self.buf)[start:start + size]
            return view.cast(_ARRAY_CODES[etype]).tolist()  # GGUF is little-endian, as is every host we run on
        if etype == STRING:
            self.need(8 * count, f"{key} ({count} strings)")  # each string is at least its 8-byte length
            return self._strings(key, count, keep)
        if etype == ARRAY:
            self.need(12 * count, f"{key} ({count} arrays)")
            return [self.array(key, keep) for _ in range(count)]
        raise self.fail(f"{key}: unknown array element type {etype}", self.pos - 12)

    def _strings(self, key: str, count: int, keep: bool) -> list[str] | list[bytes] | None:
        decode = key not in self.raw
        if keep:  # the accelerator's reader first (speedups.strings); None: the loop below
            found = self.speedups.strings(self.buf, self.pos, self.end, count, decode=decode, bulk=key in self.bulk)
            if found is not None:
                strings, self.pos = found
                return strings  # type: ignore[return-value]
        # The loop: locals only, one bounds check per string; it also names what is wrong with a record.
        buf, end, unpack = self.buf, self.end, _U64.unpack_from
        pos = self.pos
        out: list[Any] = []
        append = out.append
        for index in range(count):
            if pos + 8 > end:
                self.pos = pos
                raise self.fail(f"{key}[{index}]: string length runs past the end of the file")
            (length,) = unpack(buf, pos)
            pos += 8
            if length > end - pos:
                raise self.fail(f"{key}[{index}]: string of {length} bytes runs past the end of the file", pos - 8)
            if keep:
                raw = buf[pos:pos + length]
                append(raw.decode("utf-8", "surrogateescape") if decode else raw)
            pos += length
        self.pos = pos
        return out if keep else None


def read_metadata(path: str | Path, wanted: tuple[str, ...] = ("tokenizer.", "general."),
                  raw: frozenset[str] = frozenset(), bulk: frozenset[str] = frozenset(),
                  speedups: Speedups = REFERENCE) -> dict[str, tuple[int, Any]]:
    """Metadata entries whose key starts with one of ``wanted``: key -> (type, value).

    For arrays the type is ``(9, element_type)`` folded as 9 * 100 + element type. String arrays of the
    keys in ``raw`` come back as bytes, undecoded. With the reference ``speedups`` every string array is
    a plain list; the accelerator's may give a sequence that keeps the array's bytes, for the keys in
    ``bulk`` (``speedups.strings``).
    """
    name = str(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # (opening a FIFO would wait for a writer for ever)
            raise TokenizerError(f"{name}: not a regular file (a folder, a FIFO or a device), not a GGUF file")
        with open(path, "rb") as handle:
            if info.st_size == 0:
                raise TokenizerError(f"{name}: offset 0: the file is empty, not a GGUF file")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(name, buf, wanted, raw, bulk, speedups)
    except OSError as exc:
        raise TokenizerError(f"{name}: cannot read: {exc.strerror or exc}") from None


def _parse(name: str, buf: Any, wanted: tuple[str, ...], raw: frozenset[str],
           bulk: frozenset[str] = frozenset(), speedups: Speedups = REFERENCE) -> dict[str, tuple[int, Any]]:
    cur = _Cursor(name, buf, raw, bulk, speedups)
    cur.need(4, "the GGUF magic")
    magic = bytes(buf[0:4])
    if magic != b"GGUF":
        raise cur.fail(f"not a GGUF file (magic {magic!r}, expected b'GGUF')")
    cur.pos = 4
    version = cur.u32("version")
    if version not in (2, 3):
        raise cur.fail(f"unsupported GGUF version {version} (2 and 3 are supported)", 4)
    cur.u64("tensor count")
    count = cur.u64("metadata count")
    cur.need(count * 13, f"{count} metadata entries")  # key length 8 + type 4 + at least 1 byte value
    out: dict[str, tuple[int, Any]] = {}
    for _ in range(count):
        key_at = cur.pos
        key = cur.string("key")
        vtype = cur.u32(f"type of {key}")
        keep = key.startswith(wanted)
        elem = None
        if vtype == ARRAY and cur.pos + 4 <= cur.end:
            (elem,) = _U32.unpack_from(buf, cur.pos)
        value = cur.value(vtype, key, keep)
        if keep:
            if key in out:
                raise cur.fail(f"duplicate key {key}", key_at)
            out[key] = (vtype * 100 + elem if vtype == ARRAY else vtype, value)
    return out
