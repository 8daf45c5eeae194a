"""Which files ``-hf ORG/REPO[:QUANT]`` names in a repository, by llama.cpp's rules (``common/download.cpp``).

- The repository id is ``ORG/REPO``: letters, digits and ``_``, with ``/ . -`` only between them and exactly
  one ``/`` (so ``../../x`` is refused before anything is asked of the hub).
- The quantization is a tag matched case-insensitively in a file name, followed by ``.`` or ``-``
  (``Q4_K_M`` finds ``model-Q4_K_M.gguf`` and ``model.q4_k_m-00001-of-00003.gguf``).
- Without a tag: ``Q4_K_M``, then ``Q8_0``, then the first model file.
- Files that are not a model are never chosen: a vision projector (``mmproj``), an importance matrix
  (``imatrix``), draft heads (``mtp-``, ``eagle3-``, ``dflash-``, ``dspark-``).
- A split GGUF (``…-00001-of-00003.gguf``) is chosen by its first part and brings all its parts.

>>> files = ["README.md", "m-Q4_1.gguf", "m-Q8_0.gguf", "mmproj-m-F16.gguf"]
>>> choose_files(files, HubSpec.parse("org/m-GGUF:q4_1"))
['m-Q4_1.gguf']
>>> choose_files(files, HubSpec.parse("org/m-GGUF"))
['m-Q8_0.gguf']
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ModelError

DEFAULT_TAGS = ("Q4_K_M", "Q8_0")  # llama.cpp's choice when no quantization is named, in order
NOT_A_MODEL = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")  # parts of a file name

_REPO_ID = re.compile(r"[A-Za-z0-9_]+(?:[./-][A-Za-z0-9_]+)*")
_SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.]([A-Z0-9_]+)$", re.IGNORECASE)
_TAG_TEXT = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class HubSpec:
    """``ORG/REPO[:QUANT]`` as typed (with ``--hf-file`` when given). A name that is not one is a model that
    can't be found (exit 1, as a missing file is), checked before the hub is asked."""

    repo: str
    tag: str = ""
    file: str = ""

    @classmethod
    def parse(cls, text: str, file: str = "") -> HubSpec:
        """
        >>> HubSpec.parse("bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M")
        HubSpec(repo='bartowski/SmolLM2-135M-Instruct-GGUF', tag='Q4_K_M', file='')
        >>> HubSpec.parse("../../x")
        Traceback (most recent call last):
        rml_chat.errors.ModelError: -hf '../../x': expected ORG/REPO[:QUANT] (letters, digits, _ . -, one /)
        """
        repo, _, tag = text.partition(":")
        if not valid_repo_id(repo) or (tag and not _TAG_TEXT.fullmatch(tag)):
            raise ModelError(f"-hf {text!r}: expected ORG/REPO[:QUANT] (letters, digits, _ . -, one /)")
        if file and (file.startswith("/") or ".." in file.split("/") or "\\" in file):
            raise ModelError(f"--hf-file {file!r}: a file's path inside the repository, without '..'")
        return cls(repo, tag, file)

    def __str__(self) -> str:
        return self.repo + (f":{self.tag}" if self.tag else "")


def valid_repo_id(repo: str) -> bool:
    """llama.cpp's rule: base characters ``[A-Za-z0-9_]``; ``/ . -`` only between two of them; one ``/``.

    >>> [valid_repo_id(r) for r in ("org/model", "org/model.v1-GGUF", "org//m", "../x", "org/m/extra", "o/m.")]
    [True, True, False, False, False, False]
    """
    return len(repo) <= 256 and bool(_REPO_ID.fullmatch(repo)) and repo.count("/") == 1


@dataclass(frozen=True)
class SplitName:
    """A GGUF file name's stem, quantization tag and split position (1 of 1 when not split).

    >>> SplitName.of("sub/Model.Q4_K_M-00002-of-00003.gguf")
    SplitName(prefix='sub/Model.Q4_K_M', tag='Q4_K_M', index=2, count=3)
    """

    prefix: str
    tag: str
    index: int = 1
    count: int = 1

    @classmethod
    def of(cls, path: str) -> SplitName:
        stem = path[:-5] if path.lower().endswith(".gguf") else path
        index = count = 1
        if m := _SPLIT.match(stem):
            stem, index, count = m["prefix"], int(m["index"]), int(m["count"])
        tag = m[1].upper() if (m := _TAG.search(stem)) else ""
        return cls(stem, tag, index, count)


def is_model_file(path: str) -> bool:
    """A ``.gguf`` that holds a model (not a projector, an importance matrix or a draft head)."""
    name = path.rsplit("/", 1)[-1]
    return name.lower().endswith(".gguf") and not any(part in name for part in NOT_A_MODEL)


def gguf_files(files: list[str]) -> list[str]:
    """The model files, a split GGUF by its first part only: what a user can choose between."""
    return [f for f in files if is_model_file(f) and SplitName.of(f).index == 1]


def quant_of(path: str) -> str:
    """The quantization a file name says (``""`` when it says none).

    >>> quant_of("SmolLM2-135M-Instruct.Q4_1.gguf"), quant_of("model-00001-of-00002.gguf")
    ('Q4_1', '')
    """
    tag = SplitName.of(path).tag
    return tag if any(ch.isdigit() for ch in tag) or tag in ("BF16", "F16", "F32") else ""


def choose_files(files: list[str], spec: HubSpec) -> list[str]:
    """The files to fetch for ``spec``: the chosen model file and, for a split GGUF, all its parts in order.

    Raises ModelError naming what the repository holds when nothing fits.

    >>> choose_files(["a/x-Q4_K_M-00002-of-00002.gguf", "a/x-Q4_K_M-00001-of-00002.gguf"], HubSpec("o/r"))
    ['a/x-Q4_K_M-00001-of-00002.gguf', 'a/x-Q4_K_M-00002-of-00002.gguf']
    >>> choose_files(["x-Q4_1.gguf", "x-Q8_0.gguf"], HubSpec("o/r", "IQ2_XS"))
    Traceback (most recent call last):
    rml_chat.errors.ModelError: o/r has no IQ2_XS file; it has Q4_1, Q8_0 (-hf o/r:Q4_1)
    """
    models = gguf_files(files)
    if spec.file:
        primary = next((f for f in files if f.lower() == spec.file.lower()), None)
        if primary is None:
            raise ModelError(f"{spec.repo} has no file {spec.file!r}; " + _holds(models, spec.repo))
    else:
        primary = _best(models, spec.tag)
        if primary is None:
            if not models:
                raise ModelError(f"{spec.repo} holds no GGUF model file" + _listing(files))
            raise ModelError(f"{spec.repo} has no {spec.tag} file; " + _holds(models, spec.repo))
    split = SplitName.of(primary)
    if split.count == 1:
        return [primary]
    parts = sorted((f for f in files if (s := SplitName.of(f)).prefix == split.prefix and s.count == split.count),
                   key=lambda f: SplitName.of(f).index)
    if [SplitName.of(f).index for f in parts] != list(range(1, split.count + 1)):
        raise ModelError(f"{spec.repo}: {primary} is split in {split.count} parts, but the repository holds "
                         f"{len(parts)} of them")
    return parts


def _best(models: list[str], tag: str) -> str | None:
    for wanted in (tag,) if tag else DEFAULT_TAGS:
        pattern = re.compile(re.escape(wanted) + r"[.-]", re.IGNORECASE)
        if found := next((f for f in models if pattern.search(f)), None):
            return found
    return None if tag else (models[0] if models else None)


def _holds(models: list[str], repo: str) -> str:
    quants = sorted({quant_of(f) for f in models} - {""})
    if quants:
        return f"it has {', '.join(quants)} (-hf {repo}:{quants[0]})"
    return "its GGUF files: " + ", ".join(models[:8]) + (" …" if len(models) > 8 else "")


def _listing(files: list[str]) -> str:
    shown = [f for f in files if not f.startswith(".")][:8]
    return f" (it has {', '.join(shown)}{' …' if len(files) > 8 else ''})" if shown else " (it is empty)"
