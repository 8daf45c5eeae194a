"""One file of a hub repository fetched into the Hugging Face cache's ``blobs/`` folder so that an interrupted
download resumes.

``huggingface_hub`` 2.x downloads each file into a temporary file of its own and deletes it when the
download fails: a Ctrl-C at 90 % of 5 GB starts again from 0. So the blob is fetched here, with the
client's own session, headers (``HF_TOKEN``) and metadata call, into ``blobs/ETAG.incomplete``; a rerun finds
that part and asks for the rest (an HTTP range). Only when the part is whole, and its digest is the one the
hub names (the ETag: the sha256 of an LFS file, the git blob id of a plain one), is it renamed to
``blobs/ETAG``. ``hf_hub_download`` then finds the blob and writes the rest of the cache's layout (the
snapshot's link, ``refs/main``), as for any file it fetched itself.

A part is never the model: the loader only ever opens a snapshot's link, made after the rename.

Two runs fetching the same file at once take turns (a lock beside the part); the second finds the blob.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import time
from pathlib import Path

from ..errors import ModelError

CHUNK = 1 << 20


def fetch_blob(repo: str, path: str, revision: str | None, progress: bool) -> int:
    """Make sure the blob of ``repo``'s ``path`` is whole in the cache; the bytes fetched now."""
    from filelock import FileLock
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    meta = get_hf_file_metadata(hf_hub_url(repo, path, revision=revision))
    if not meta.etag or not re.fullmatch(r"[0-9A-Za-z._-]+", meta.etag):
        return 0  # (nothing to name a part by: the client fetches it whole)
    blobs = Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}" / "blobs"
    blob = blobs / meta.etag
    if blob.exists():
        return 0
    blobs.mkdir(parents=True, exist_ok=True)
    part = blobs / f"{meta.etag}.incomplete"
    locks = Path(constants.HF_HUB_CACHE) / ".locks" / blobs.parent.name  # (where the client keeps its own)
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{meta.etag}.incomplete.lock")):
        if blob.exists():  # (another run finished it while this one waited)
            return 0
        have = part.stat().st_size if part.exists() else 0
        fetched = 0
        if meta.size is None or have < meta.size:
            headers = build_hf_headers()
            if have:
                headers["Range"] = f"bytes={have}-"
            with get_session().stream("GET", meta.location, headers=headers, follow_redirects=True) as answer:
                if answer.status_code == 416 and have:  # (the part is whole already)
                    pass
                else:
                    answer.raise_for_status()
                    if answer.status_code != 206:
                        have = 0  # the server sends it all again: start over
                    fetched = _write(answer, part, have, meta.size, path, progress)
        _check(part, meta.etag, meta.size, path)
        os.replace(part, blob)
    return fetched


def _write(answer, part: Path, have: int, size: int | None, path: str, progress: bool) -> int:  # type: ignore[no-untyped-def]
    written = 0
    bar = _Progress(path, size, have) if progress else None
    with open(part, "ab" if have else "wb") as out:
        for chunk in answer.iter_bytes(CHUNK):
            out.write(chunk)
            written += len(chunk)
            if bar:
                bar.show(have + written)
    if bar:
        bar.show(have + written, final=True)
    return written


class _Progress:
    """One line on stderr, redrawn at most 10 times a second: the file, how much of its size, the speed and the
    time left (``SmolLM2-Q4_1.gguf  45.2/98.4 MB  18.3 MB/s  3 s left``)."""

    def __init__(self, path: str, size: int | None, have: int):
        self.name, self.size, self.start_bytes = path.rsplit("/", 1)[-1][-48:], size, have
        self.started = self.shown_at = time.monotonic()

    def show(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.shown_at < 0.1:
            return
        self.shown_at = now
        speed = (done - self.start_bytes) / max(now - self.started, 1e-3)
        of = f"/{self.size / 1e6:,.1f}" if self.size else ""
        left = f"  {(self.size - done) / speed:,.0f} s left" if self.size and speed > 0 and not final else ""
        line = f"{self.name}  {done / 1e6:,.1f}{of} MB  {speed / 1e6:,.1f} MB/s{left}"
        width = shutil.get_terminal_size().columns
        sys.stderr.write("\r" + line[:max(width - 1, 20)] + "\x1b[K" + ("\n" if final else ""))
        sys.stderr.flush()


def _check(part: Path, etag: str, size: int | None, path: str) -> None:
    """The part is the file the hub names: its size, and its digest where the ETag is one."""
    got = part.stat().st_size
    if size is not None and got != size:
        raise ModelError(f"{path}: the download stopped at {got:,} of {size:,} bytes; the same command resumes it")
    digest = _digest(part, etag)
    if digest is not None and digest != etag.lower():
        part.unlink()
        raise ModelError(f"{path} arrived with another digest than the hub names ({etag[:12]}…); the part was "
                         "removed, run the command again")


def _digest(part: Path, etag: str) -> str | None:
    """sha256 for a 64-hex ETag (an LFS file), git's blob id for a 40-hex one, None for anything else."""
    if re.fullmatch(r"[0-9a-fA-F]{64}", etag):
        digest = hashlib.sha256()
    elif re.fullmatch(r"[0-9a-fA-F]{40}", etag):
        digest = hashlib.sha1(f"blob {part.stat().st_size}\0".encode(), usedforsecurity=False)
    else:
        return None
    with open(part, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()

