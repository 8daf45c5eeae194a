"""One file of a hub repository fetched into the Hugging Face cache's ``blobs/`` folder so that an interrupted
download resumes.

``huggingface_hub`` downloads each file into a temporary file of its own and deletes it when the download
fails: a Ctrl-C at 90 % of 5 GB starts again from 0. So the blob is fetched here, with the client's own
session, headers (``HF_TOKEN``) and metadata call, into ``blobs/ETAG.incomplete``; a rerun finds that part and
asks for the rest (an HTTP range). Only when the part is whole, and its digest is the one the hub names (the
ETag: the sha256 of an LFS file, the git blob id of a plain one), is it renamed to ``blobs/ETAG``.
``hf_hub_download`` then finds the blob and writes the rest of the cache's layout (the snapshot's link,
``refs/main``), as for any file it fetched itself.

A part is never the model: the loader only ever opens a snapshot's link, made after the rename.

Where this code does what the client does, it does it the client's way (``file_download.http_get``):

* **The token stays with the hub.** The hub answers a large file's address with a redirect to a CDN on
  another host; ``authorization`` (``HF_TOKEN``) is sent only to the hub's own origin, never there.
* **One lock with the client**: ``.locks/models--ORG--REPO/ETAG.lock``, the client's own path, so a
  ``hf download`` of the same file at the same time waits for this one (and this one for it).
* **A stalled body times out** after ``HF_HUB_DOWNLOAD_TIMEOUT`` seconds (10) without a byte, and a broken
  or stalled transfer is **tried again within the run** from where it stopped (a range), up to 5 times in a
  row without progress.
* **A body longer than the size named is refused**: nothing past that size is written, and the part is
  removed, so a later run against a good hub starts clean.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ModelError
from ..terminal import one_row, visible

CHUNK = 1 << 20
TRIES = 5           # transfers in a row that may break or stall without a byte of progress (the client's 5)
RETRY_PAUSE_S = 1.0  # the pause before the next try (the client's 1 s)


def fetch_blob(repo: str, path: str, revision: str | None, progress: bool) -> int:
    """Make sure the blob of ``repo``'s ``path`` is whole in the cache; the bytes fetched now."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    url = hf_hub_url(repo, path, revision=revision)
    meta = get_hf_file_metadata(url, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    if not meta.etag or not re.fullmatch(r"[0-9A-Za-z._-]+", meta.etag):
        return 0  # (nothing to name a part by: the client fetches it whole)
    repo_folder = f"models--{repo.replace('/', '--')}"
    blobs = Path(constants.HF_HUB_CACHE) / repo_folder / "blobs"
    blob = blobs / meta.etag
    if blob.exists():
        return 0
    blobs.mkdir(parents=True, exist_ok=True)
    part = blobs / f"{meta.etag}.incomplete"
    with client_lock(Path(constants.HF_HUB_CACHE), repo_folder, meta.etag):
        if blob.exists():  # (another run, or the client, finished it while this one waited)
            return 0
        headers = headers_for(url, meta.location, build_hf_headers())
        bar = _Progress(path, meta.size, _size(part)) if progress else None
        try:
            fetched = _fetch_with_retries(meta.location, headers, part, meta.size, path, bar)
        finally:
            if bar is not None:
                bar.end_line()
        _check(part, meta.etag, meta.size, path)
        os.replace(part, blob)
    return fetched


def client_lock(cache: Path, repo_folder: str, etag: str):  # type: ignore[no-untyped-def]
    """The lock ``hf_hub_download`` takes for this blob (``file_download.py``: ``.locks/REPO_FOLDER/ETAG.lock``)."""
    from filelock import FileLock

    folder = cache / ".locks" / repo_folder
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{etag}.lock"))


def same_origin(url: str, other: str) -> bool:
    """Whether two addresses share scheme, host and port (an absent port is the scheme's own).

    >>> same_origin("https://huggingface.co/a", "https://huggingface.co:443/b"), same_origin("https://huggingface.co/a", "https://cdn-lfs.hf.co/b")
    (True, False)
    """
    def origin(address: str) -> tuple[str, str, int | None]:
        parts = urlsplit(address)
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)

    return origin(url) == origin(other)


def headers_for(url: str, location: str, headers: dict[str, str]) -> dict[str, str]:
    """The headers for fetching ``location``, the address the hub sent ``url`` to: the token only where
    ``location`` is on the hub's own origin (a CDN on another host never sees it, as with the client).

    >>> headers_for("http://hub/x", "http://cdn/x?sig=1", {"authorization": "Bearer hf_x", "user-agent": "u"})
    {'user-agent': 'u'}
    """
    if same_origin(url, location):
        return dict(headers)
    return {k: v for k, v in headers.items() if k.lower() != "authorization"}


def _fetch_with_retries(location: str, headers: dict[str, str], part: Path, size: int | None, path: str,
                        bar: _Progress | None) -> int:
    """Fetch the rest of ``part``, trying again from where a broken or stalled transfer stopped; the bytes
    fetched."""
    retryable = _retryable_errors()
    fetched, tries = 0, 0
    while True:
        before = _size(part)
        try:
            fetched += _fetch_rest(location, headers, part, size, path, bar)
            break
        except retryable as err:
            got = _size(part) - before
            fetched += max(got, 0)
            tries = 0 if got > 0 else tries + 1
            if tries >= TRIES:
                raise ModelError(f"{path}: the transfer broke or stalled {TRIES} times in a row "
                                 f"({type(err).__name__}); the part fetched is kept, the same command resumes it") from None
            time.sleep(RETRY_PAUSE_S)
    if bar:
        bar.show(_size(part), final=True)
    return fetched


def _fetch_rest(location: str, headers: dict[str, str], part: Path, size: int | None, path: str,
                bar: _Progress | None) -> int:
    """One transfer: the bytes after the part's end (all of them when the hub ignores the range), written
    to the part; the bytes written. Nothing past ``size`` is ever written."""
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    have = _size(part)
    if size is not None and have > size:  # (an older part that outgrew its file: it can't be the file)
        part.unlink()
        have = 0
    if size is not None and have == size:
        return 0
    request = dict(headers, **({"Range": f"bytes={have}-"} if have else {}))
    with get_session().stream("GET", location, headers=request, follow_redirects=True,
                              timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT) as answer:
        if answer.status_code == 416 and have:  # (the part is whole already)
            return 0
        answer.raise_for_status()
        if answer.status_code != 206:
            have = 0  # the server sends it all again: start over
        written = _write(answer.iter_bytes(CHUNK), part, have, size, path, lambda done: bar.show(done) if bar else None)
    if size is not None and have + written < size:  # (the body ended early without an error: a closed connection)
        raise ConnectionAbortedError(f"the body ended at {have + written:,} of {size:,} bytes")
    return written


def _write(chunks, part: Path, have: int, size: int | None, path: str,  # type: ignore[no-untyped-def]
           shown: Callable[[int], None]) -> int:
    """``chunks`` written to ``part`` from ``have`` on; the bytes written. A body that runs past ``size`` is
    refused and the part removed (a later run starts clean)."""
    written = 0
    with open(part, "r+b" if have else "wb") as out:
        out.truncate(have)
        out.seek(have)
        for chunk in chunks:
            if size is not None and have + written + len(chunk) > size:
                out.close()
                part.unlink()
                raise ModelError(f"{path}: the hub sent more than the {size:,} bytes it named for the file; the "
                                 "part was removed")
            out.write(chunk)
            written += len(chunk)
            shown(have + written)
    return written


def _size(part: Path) -> int:
    return part.stat().st_size if part.exists() else 0


def _retryable_errors() -> tuple[type[BaseException], ...]:
    """A transfer that broke or stalled (the client's: a connect error, a timeout, a connection closed early)."""
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module in ("httpx2", "httpx"):
        try:
            client = __import__(module)
        except ImportError:
            continue
        found += [getattr(client, name) for name in ("TransportError",) if hasattr(client, name)]
    return tuple(found)


class _Progress:
    """One line on stderr, redrawn at most 10 times a second: the file, how much of its size, the speed and the
    time left (``SmolLM2-Q4_1.gguf  45.2/98.4 MB  18.3 MB/s  3 s left``)."""

    def __init__(self, path: str, size: int | None, have: int):
        self.name, self.size, self.start_bytes = visible(path.rsplit("/", 1)[-1][-48:]), size, have
        self.started = self.shown_at = time.monotonic()
        self.open = False  # a line is on screen, not ended

    def show(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.shown_at < 0.1:
            return
        self.shown_at = now
        speed = (done - self.start_bytes) / max(now - self.started, 1e-3)
        of = f"/{self.size / 1e6:,.1f}" if self.size else ""
        left = f"  {(self.size - done) / speed:,.0f} s left" if self.size and speed > 0 and not final else ""
        figures = f"{done / 1e6:,.1f}{of} MB  {speed / 1e6:,.1f} MB/s"
        room = shutil.get_terminal_size().columns - 1 - len(figures) - len(left) - 2  # (the figures first)
        name = self.name if len(self.name) <= room else "…" + self.name[len(self.name) - room + 1:] if room > 8 else ""
        line = one_row([f"{name}  {figures}{left}".lstrip(), f"{figures}{left}", figures])
        sys.stderr.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
        sys.stderr.flush()
        self.open = not final

    def end_line(self) -> None:
        """The line ended where it stands (a Ctrl-C or an error comes next: its note on a line of its own)."""
        if self.open:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.open = False


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

