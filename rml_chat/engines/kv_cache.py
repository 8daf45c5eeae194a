"""llama.cpp's KV cache kept across what a chat does to its prompt: a context shift when old exchanges
are dropped, and a saved state that makes a resumed chat start where it stopped.

**Shift.** Dropping the oldest exchange removes tokens from the middle of the prompt::

    cached  [system][exchange 1][exchange 2][exchange 3]
    new     [system][exchange 2][exchange 3][new message]

The cache keeps the common prefix, removes exactly the dropped tokens and moves what follows them back by
as many positions (llama.cpp's memory API: ``seq_rm``, ``seq_add``; the keys are re-rotated, as its own
context shift does). Then only the new message is evaluated. The cache's ids stay exactly the new
prompt's ids: the kept part is matched token for token, never assumed. Where a model's memory can't
shift, the rest is evaluated again, and the caller says so.

**State.** ``write_state(path, state, stamp)`` writes llama.cpp's whole state (the KV cache of the prompt
so far) with a stamp: the weights file's identity (path, size, mtime), the context size and the cached
ids, and a CRC32. ``read_state`` gives it back only when every part of the stamp matches; a stale, foreign
or damaged file is ignored with a one-line reason, and the conversation is simply evaluated again.

Here is only the plan of a shift and the state file's format, over plain ids and bytes; the C calls that
carry them out are ``runtime.LlamaModel``'s, and ``local.LocalEngine`` joins the two.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import tempfile
import zlib
from array import array
from collections.abc import Sequence
from pathlib import Path

from ..errors import NOT_A_FILE
from .base import common_prefix, state_path  # noqa: F401  (state_path: where a state lives, defined in base)

#: a shift must keep at least this many tokens to be worth it (else the rest is simply evaluated again)
MIN_KEPT = 16
_MAGIC = b"RMLKV\x00\x01\x00"
_MAX_HEADER = 1 << 26  # bytes of a state's stamp and ids (a 128k context's ids are about 1 MB)


def _find(haystack: Sequence[int], needle: Sequence[int], start: int) -> int:
    """The first index >= ``start`` where ``needle`` occurs in ``haystack`` (-1: nowhere), by a byte search."""
    hay, pin = array("i", haystack).tobytes(), array("i", needle).tobytes()
    at = hay.find(pin, start * 4)
    while at >= 0 and at % 4:
        at = hay.find(pin, at + 1)
    return at // 4 if at >= 0 else -1


def plan_shift(old: Sequence[int], ids: Sequence[int]) -> tuple[int, int, int] | None:
    """How to turn a cache holding ``old`` into one holding the longest prefix of ``ids``: keep the common
    prefix ``p``, drop ``old[p:q]`` and move the ``k`` cached tokens after it back by ``q - p``. None: no
    shift is worth it (the prefix is everything, or fewer than MIN_KEPT tokens continue ``ids``).

        >>> plan_shift([1, 2, 3, 4] + list(range(10, 30)), [1, 2] + list(range(10, 30)) + [99])
        (2, 4, 20)
    """
    p = common_prefix(old, ids)
    if p >= len(old) or p >= len(ids) - MIN_KEPT:
        return None
    q = _find(old, ids[p:p + MIN_KEPT], p + 1)
    if q < 0:
        return None
    return p, q, common_prefix(old[q:], ids[p:])


# ----- saved state -----------------------------------------------------------------------------------

def stamp_of(weights: Path, n_ctx: int) -> dict:
    """What a state belongs to: the weights file's identity and the context size."""
    st = weights.stat()
    return {"weights": str(weights.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "n_ctx": n_ctx}


def write_state(path: Path, state: bytes, stamp: dict, ids: Sequence[int]) -> None:
    """Write ``state`` with its stamp and the cached ``ids``, atomically. OSError when it can't be written."""
    header = json.dumps({**stamp, "ids": list(ids)}).encode()
    body = struct.pack("<I", len(header)) + header + state
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC + body + struct.pack("<I", zlib.crc32(body)))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_state(path: Path, expected: dict) -> tuple[list[int], bytes, str]:
    """A state ``write_state`` wrote, if its stamp is ``expected``: (the ids, the state, "") or ([], b"",
    why it can't be used)."""
    if path.exists() and not path.is_file():  # (a FIFO would wait for a writer, /dev/zero never end)
        return [], b"", f"its state file is {NOT_A_FILE}"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], b"", "no saved state beside it"
    except OSError as err:
        return [], b"", f"its state can't be read ({err.strerror})"
    if len(data) < len(_MAGIC) + 8 or not data.startswith(_MAGIC):
        return [], b"", "its state file is not one of rml-chat's"
    body, crc = data[len(_MAGIC):-4], struct.unpack("<I", data[-4:])[0]
    if zlib.crc32(body) != crc:
        return [], b"", "its state file is damaged"
    (length,) = struct.unpack_from("<I", body)
    try:
        stamp = json.loads(body[4:4 + length])
        ids = [int(i) for i in stamp["ids"]]
    except (ValueError, KeyError, TypeError, RecursionError, OverflowError):
        return [], b"", "its state file is damaged"
    changed = next((key for key, value in expected.items() if stamp.get(key) != value), None)
    if changed is not None:
        return [], b"", f"its state was saved with {'another context size' if changed == 'n_ctx' else 'other weights'}"
    return ids, body[4 + length:], ""


def read_header(path: Path) -> dict | None:
    """A state file's stamp and ids (``"ids"``) without its state, or None when it is not one of ours
    (its CRC is checked when the whole file is read)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_MAGIC) + 4)
            if len(head) < len(_MAGIC) + 4 or not head.startswith(_MAGIC):
                return None
            (length,) = struct.unpack_from("<I", head, len(_MAGIC))
            if length > _MAX_HEADER:
                return None
            header = json.loads(handle.read(length))
    except (OSError, ValueError, RecursionError):
        return None
    return header if isinstance(header, dict) and isinstance(header.get("ids"), list) else None
