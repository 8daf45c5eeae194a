"""The established format of a template, kept by hash: a model's second load renders nothing.

Establishing a format compiles the template and renders ~200 probe conversations with jinja2 (figures:
docs/chat-formats.md); the result is a small dict (a record's name, or a fitted table of pieces, and the
verdict). It is kept in memory and in one JSON file per template under
``$RML_CHAT_FORMAT_CACHE`` (a directory, or ``off``), else ``cache_dir() / "chat-formats"``. The key
hashes the template, the BOS and EOS texts and this package's source, so a new version of the chat code
establishes it again. A missing, damaged or foreign file is a miss; a write that fails is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..cache_dirs import cache_folder, source_hash

_MEMORY: dict[str, dict] = {}


def formats_dir() -> Path | None:
    return cache_folder("RML_CHAT_FORMAT_CACHE", "chat-formats")


def _key(template: str, bos_token: str, eos_token: str) -> str:
    text = "\0".join((template, bos_token, eos_token, source_hash(Path(__file__).parent)))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read(template: str, bos_token: str, eos_token: str) -> dict | None:
    key = _key(template, bos_token, eos_token)
    if key in _MEMORY:
        return _MEMORY[key]
    folder = formats_dir()
    if folder is None:
        return None
    try:
        record = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key or not isinstance(record.get("source"), str):
        return None
    _MEMORY[key] = record
    return record


def write(template: str, bos_token: str, eos_token: str, record: dict) -> None:
    key = _key(template, bos_token, eos_token)
    record = {**record, "key": key}
    _MEMORY[key] = record
    folder = formats_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=folder)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(tmp, folder / f"{key}.json")
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
