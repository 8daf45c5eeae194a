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

**State.** ``save_state(engine, path, model)`` writes llama.cpp's whole state (the KV cache of the prompt
so far) with a stamp: the weights file's identity (path, size, mtime), the context size and the cached
ids, and a CRC32. ``load_state`` restores it only when every part of the stamp matches; a stale, foreign
or damaged file is ignored with a one-line reason, and the conversation is simply evaluated again.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import struct
import tempfile
import zlib
from array import array
from collections.abc import Sequence
from pathlib import Path

from .engine import Engine, common_prefix
from .runtime import bindings

#: a shift must keep at least this many tokens to be worth it (else the rest is simply evaluated again)
MIN_KEPT = 16
_MAGIC = b"RMLKV\x00\x01\x00"


def _find(haystack: Sequence[int], needle: Sequence[int], start: int) -> int:
    """The first index >= ``start`` where ``needle`` occurs in ``haystack`` (-1: nowhere), by a byte search."""
    hay, pin = array("i", haystack).tobytes(), array("i", needle).tobytes()
    at = hay.find(pin, start * 4)
    while at >= 0 and at % 4:
        at = hay.find(pin, at + 1)
    return at // 4 if at >= 0 else -1


def kv_shift(engine: Engine, ids: Sequence[int]) -> int:
    """Make the cache hold ``ids``' longest prefix it can without evaluating: the common prefix, then the
    cached tokens that continue the new prompt, shifted into place. Returns the tokens so kept after the
    prefix (0: nothing to keep, -1: this model's memory can't shift)."""
    llama_cpp = bindings()

    if engine.remote:  # a server's cache is its own (its prompt cache still reuses the common prefix)
        return -1
    old = engine.cached_ids()
    p = common_prefix(old, ids)
    if p >= len(old) or p >= len(ids) - MIN_KEPT:
        return 0
    q = _find(old, ids[p:p + MIN_KEPT], p + 1)
    if q < 0:
        return 0
    k = common_prefix(old[q:], ids[p:])
    memory = llama_cpp.llama_get_memory(engine.ctx)
    if not llama_cpp.llama_memory_can_shift(memory):
        return -1
    llama_cpp.llama_memory_seq_rm(memory, -1, p, q)
    llama_cpp.llama_memory_seq_add(memory, 0, q, q + k, -(q - p))
    llama_cpp.llama_memory_seq_rm(memory, -1, p + k, -1)
    engine.set_cached(old[:p] + old[q:q + k])
    return k


# ----- saved state -----------------------------------------------------------------------------------

def state_path(conversation_file: Path) -> Path:
    """Where the state of a saved conversation lives: beside it, ``chat.json`` -> ``chat.json.kv``."""
    return conversation_file.with_name(conversation_file.name + ".kv")


def _identity(weights: Path) -> dict:
    st = weights.stat()
    return {"weights": str(weights.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def save_state(engine: Engine, path: Path, weights: Path) -> int:
    """Write the cache's state atomically; its size in bytes (0: a server's, which keeps its own). OSError
    when it can't be written."""
    llama_cpp = bindings()

    if engine.remote:
        return 0

    ctx = engine.ctx
    size = llama_cpp.llama_state_get_size(ctx)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_get_data(ctx, buffer, size)
    header = json.dumps({**_identity(weights), "n_ctx": engine.n_ctx, "ids": engine.cached_ids()}).encode()
    body = struct.pack("<I", len(header)) + header + bytes(buffer[:written])
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC + body + struct.pack("<I", zlib.crc32(body)))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return written


def load_state(engine: Engine, path: Path, weights: Path) -> tuple[int, str]:
    """Restore a saved state: (the ids restored, "") or (0, why it was not used)."""
    llama_cpp = bindings()

    if engine.remote:
        return 0, "the server keeps its own cache"

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0, "no saved state beside it"
    except OSError as err:
        return 0, f"its state can't be read ({err.strerror})"
    if len(data) < len(_MAGIC) + 8 or not data.startswith(_MAGIC):
        return 0, "its state file is not one of rml-chat's"
    body, crc = data[len(_MAGIC):-4], struct.unpack("<I", data[-4:])[0]
    if zlib.crc32(body) != crc:
        return 0, "its state file is damaged"
    (length,) = struct.unpack_from("<I", body)
    try:
        stamp = json.loads(body[4:4 + length])
        ids = [int(i) for i in stamp["ids"]]
        expected = {**_identity(weights), "n_ctx": engine.n_ctx}
    except (ValueError, KeyError, TypeError, OSError):
        return 0, "its state file is damaged"
    if any(stamp.get(key) != value for key, value in expected.items()):
        changed = next(key for key, value in expected.items() if stamp.get(key) != value)
        return 0, f"its state was saved with {'another context size' if changed == 'n_ctx' else 'other weights'}"
    state = body[4 + length:]
    buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
    if not ids or len(ids) > engine.n_ctx or llama_cpp.llama_state_set_data(engine.ctx, buffer, len(state)) == 0:
        engine.reset()
        return 0, "llama.cpp refused its state"
    engine.set_cached(ids)
    return len(ids), ""
