"""``-hf ORG/REPO[:QUANT]``: the model's files fetched from the Hugging Face hub into the hub's own cache.

The official client (``huggingface_hub``, the ``[hub]`` extra) does the fetching, so every tool that reads the
Hugging Face cache shares the files, and its settings mean what they mean everywhere: ``HF_ENDPOINT`` (a
mirror), ``HF_TOKEN`` (gated and private repositories), ``HF_HUB_OFFLINE=1`` (the cache only),
``HF_HUB_CACHE``/``HF_HOME`` (where).

1. The repository's file list and revision are asked of the hub (offline, or when the hub can't be reached:
   read from the cache, as llama.cpp does).
2. :func:`~.hub_spec.choose_files` picks the files, by llama.cpp's rules; a model-directory repository
   (``tokenizer.json`` beside its GGUFs) brings the files our loader reads too.
3. Before a byte is fetched, the free space is compared with what is missing.
4. Each file is fetched with a progress bar (size, speed) on a terminal. A file is written as
   ``blobs/….incomplete`` and linked into the snapshot only once whole: a Ctrl-C or a dropped connection
   leaves the part, the next run resumes it, and a part is never taken for a model. A finished file is not
   fetched again.
   (``hub_blob.py``: the client itself would start an interrupted file over.)
5. A file fetched now is checked against the digest the hub names for it (its ETag) before it is used.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenizer.loaders.hf_config import CONFIG_FILES

from ..errors import STOPPED, ModelError
from .hub_spec import HubSpec, choose_files
from .stores import hf_hub_cache, snapshot_of

INSTALL_HUB = "pip install 'rml-chat[hub]'"
LOADER_FILES = ("tokenizer.json", *CONFIG_FILES)  # what the loader reads from a model directory


@dataclass(frozen=True)
class Fetched:
    """Where the fetched model is: ``path`` for the loader (the GGUF, or the snapshot folder of a model directory)
    and ``weights``, the GGUF (the first part of a split one)."""

    path: Path
    weights: Path


@dataclass(frozen=True)
class RepoFile:
    path: str
    size: int | None = None  # (None: the hub did not say)


def fetch(spec: HubSpec, say: Callable[[str], None], progress: bool | None = None) -> Fetched:
    """Fetch what ``spec`` names (or find it in the cache) and say where it is. ModelError: one line."""
    try:
        from huggingface_hub import constants  # (the [hub] extra)
    except ImportError:
        raise ModelError(f"-hf needs the Hugging Face client: {INSTALL_HUB}") from None
    except ValueError as err:  # (it reads its HF_* variables as it is imported: HF_HUB_DOWNLOAD_TIMEOUT=abc)
        raise ModelError(f"-hf: the Hugging Face client can't start: {_bad_setting(err)}") from None

    if progress is None:
        progress = sys.stderr.isatty()
    listing, revision = _listing(spec)
    chosen = choose_files([f.path for f in listing], spec)
    by_path = {f.path: f for f in listing}
    directory = "tokenizer.json" in by_path
    wanted = [*(name for name in LOADER_FILES if name in by_path and directory), *chosen]
    missing = [name for name in wanted if _cached(spec.repo, revision, name) is None]
    if missing and constants.HF_HUB_OFFLINE:
        raise ModelError(f"{spec}: HF_HUB_OFFLINE is set and {missing[0]} is not in the cache ({hf_hub_cache()})")
    _check_space(spec, [by_path[name] for name in missing])
    fetched = 0
    paths = {}
    for name in wanted:
        got, paths[name] = _download(spec, revision, by_path[name], progress, name in missing)
        fetched += got
    weights = paths[chosen[0]]
    if missing:
        say(f"{spec}: {len(missing)} file{'s' if len(missing) > 1 else ''} fetched, {fetched / 1e6:,.1f} MB, into "
            f"{hf_hub_cache()}")
    return Fetched(weights.parent if directory else weights, weights)


def _listing(spec: HubSpec) -> tuple[list[RepoFile], str | None]:
    """The repository's files and revision: from the hub, else (offline, unreachable) from the cache."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    host = constants.ENDPOINT.split("://")[-1].rstrip("/")
    if not constants.HF_HUB_OFFLINE:
        try:
            info = HfApi().model_info(spec.repo, revision="main", files_metadata=True,
                                      timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT)
            files = [RepoFile(s.rfilename, _size(s.size)) for s in info.siblings or [] if safe_name(s.rfilename)]
            return files, info.sha
        except GatedRepoError:
            raise ModelError(f"{spec.repo} is gated on {host}: accept its terms there, then set HF_TOKEN") from None
        except RepositoryNotFoundError:
            raise ModelError(f"{spec.repo}: no such repository on {host} (a private one needs HF_TOKEN)") from None
        except RevisionNotFoundError:
            raise ModelError(f"{spec.repo}: its main revision is not on {host}") from None
        except HfHubHTTPError as err:
            unreachable = f"{host} answered {_status(err)}"
        except (OSError, *_network_errors()) as err:
            unreachable = f"cannot reach {host} ({type(err).__name__})"
        except (ValueError, TypeError, AttributeError, KeyError):  # (HTML, or JSON of another shape)
            unreachable = f"{host} answered the file listing with something other than the hub's JSON"
    else:
        unreachable = "HF_HUB_OFFLINE is set"
    files, revision = _cached_listing(spec.repo)
    if not files:
        raise ModelError(f"{spec.repo}: {unreachable}, and the repository is not in the cache ({hf_hub_cache()})")
    return files, revision


def safe_name(path: object) -> bool:
    """A file name a listing may hold: a relative path inside the repository, in printable characters.

    >>> [safe_name(p) for p in ("m-Q4_K_M.gguf", "sub/m.gguf", "../m.gguf", "/etc/m.gguf", "a\\b", "m\x1b]0;x\x07.gguf")]
    [True, True, False, False, False, False]
    """
    return (isinstance(path, str) and 0 < len(path) <= 1024 and not path.startswith("/") and "\\" not in path
            and ".." not in path.split("/") and path.isprintable())


def _size(said: object) -> int | None:
    """A listing's size of a file, where it is one (a string, a negative number or a boolean is not: the
    client passes the hub's JSON on unchecked); None: the hub did not say."""
    return said if isinstance(said, int) and not isinstance(said, bool) and said >= 0 else None


def _cached_listing(repo: str) -> tuple[list[RepoFile], str | None]:
    snapshot = snapshot_of(hf_hub_cache() / f"models--{repo.replace('/', '--')}")
    if snapshot is None:
        return [], None
    return [RepoFile(str(p.relative_to(snapshot))) for p in sorted(snapshot.rglob("*")) if p.is_file()], snapshot.name


def _cached(repo: str, revision: str | None, name: str) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, name, revision=revision)
    return Path(found) if isinstance(found, str) else None


def _check_space(spec: HubSpec, missing: list[RepoFile]) -> None:
    need = sum(f.size or 0 for f in missing)
    folder = hf_hub_cache()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if need > free:
        raise ModelError(f"{spec}: {', '.join(f.path for f in missing)} need {need / 1e9:,.2f} GB and {folder} has "
                         f"{free / 1e9:,.2f} GB free (HF_HUB_CACHE chooses another place)")


def _download(spec: HubSpec, revision: str | None, file: RepoFile, progress: bool, missing: bool) -> tuple[int, Path]:
    """(bytes fetched now, the file's path in the snapshot)."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

    from .hub_blob import fetch_blob

    (enable_progress_bars if progress else disable_progress_bars)()
    try:
        fetched = fetch_blob(spec.repo, file.path, revision, progress) if missing and not constants.HF_HUB_OFFLINE else 0
        return fetched, Path(hf_hub_download(spec.repo, file.path, revision=revision))
    except STOPPED:
        if missing:
            print(f"rml-chat: {file.path}: the download stopped; the same command resumes it", file=sys.stderr)
        raise
    except (EntryNotFoundError, LocalEntryNotFoundError):
        raise ModelError(f"{spec.repo}: {file.path} can't be fetched (not on the hub, not in the cache)") from None
    except HfHubHTTPError as err:
        raise ModelError(f"{spec.repo}: {file.path}: the hub answered {_status(err)}; the same command resumes "
                         f"it") from None
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise ModelError(f"{spec.repo}: {file.path}: the disk is full or a file size limit is reached "
                             f"({hf_hub_cache()}); the part fetched is kept, the same command resumes it") from None
        raise ModelError(f"{spec.repo}: {file.path}: {err.strerror or type(err).__name__}; the same command "
                         "resumes it") from None
    except _network_errors() as err:
        raise ModelError(f"{spec.repo}: {file.path}: the connection broke ({type(err).__name__}); the same command "
                         "resumes it") from None


def _bad_setting(err: ValueError) -> str:
    """The client's complaint, with the variable whose value it is where one holds it.

        >>> import os; os.environ["HF_HUB_DOWNLOAD_TIMEOUT"] = "abc"
        >>> _bad_setting(ValueError("invalid literal for int() with base 10: 'abc'"))
        "HF_HUB_DOWNLOAD_TIMEOUT=abc is not a number (invalid literal for int() with base 10: 'abc')"
        >>> del os.environ["HF_HUB_DOWNLOAD_TIMEOUT"]
    """
    said = str(err)
    value = said.rsplit(": ", 1)[-1].strip("'\"")
    named = sorted(name for name, given in os.environ.items() if name.startswith("HF_") and given == value)
    return f"{named[0]}={value} is not a number ({said})" if named else said


def _status(err: Exception) -> str:
    response = getattr(err, "response", None)
    code = getattr(response, "status_code", None)
    return f"HTTP {code}" if code else type(err).__name__


def _network_errors() -> tuple[type[BaseException], ...]:
    """The client's transport errors (httpx in huggingface_hub 1.x, requests before)."""
    found: list[type[BaseException]] = []
    for module, name in (("httpx2", "HTTPError"), ("httpx", "HTTPError"), ("requests", "RequestException")):
        try:
            found.append(getattr(__import__(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)

