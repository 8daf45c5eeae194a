"""rml-chat's tokenizer: byte-level and SentencePiece BPE, id for id with llama.cpp (GGUF) and HF
``tokenizers`` (tokenizer.json).

    >>> import tokenizer
    >>> tok = tokenizer.load("model.gguf")          # doctest: +SKIP
    >>> tok.encode("Hello world")                   # doctest: +SKIP
    [9906, 1917]

The public API is what ``__all__`` names, the ``Tokenizer`` methods without a leading underscore, and
``tokenizer.chat``. How it is built: docs/design.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .spec import ModelKind, TokenizerError, TokenizerSpec, TokenType, Unsupported

if TYPE_CHECKING:
    from .core import Tokenizer
    from .stages.decode import StreamDecoder

__all__ = ["ModelKind", "StreamDecoder", "Tokenizer", "TokenizerError", "TokenizerSpec", "TokenType", "Unsupported",
           "load"]


def __getattr__(name: str) -> object:
    """``tokenizer.Tokenizer`` imports the engine on first use: ``import tokenizer`` stays cheap for an app
    that starts loading its model's weights first."""
    if name == "Tokenizer":
        from .core import Tokenizer

        return Tokenizer
    if name == "StreamDecoder":
        from .stages.decode import StreamDecoder

        return StreamDecoder
    raise AttributeError(f"module 'tokenizer' has no attribute {name!r}")


def load(path: str | Path) -> Tokenizer:
    """The tokenizer of a GGUF file, a tokenizer.json file, or a model directory (its tokenizer.json and
    config files, else its single ``.gguf``). ``TokenizerError`` (``Unsupported`` for a component we do not
    implement) names the file and what is wrong.

    The reference path is ``loaders.load_spec`` then ``Tokenizer(spec)``. The accelerator, where it is
    there, comes in at one seam (``speedups.py``): handed to both, it may do their steps faster, and it
    keeps what a load built so that the next load of the same unchanged file reads it back."""
    from .core import Tokenizer
    from .loaders import find_source, load_spec, source_files
    from .speedups import captured_warnings, installed, replay

    speedups = installed()
    source = find_source(path)
    files = source_files(source)
    cached = speedups.cached(source, files)
    if cached is not None:
        spec, warnings = cached
        replay(warnings)
        return Tokenizer(spec, speedups)  # its merges answer with the cached merge table
    with captured_warnings() as warnings:
        tok = Tokenizer(load_spec(source, speedups), speedups)
    speedups.keep(source, files, tok.spec, tok.model.table, warnings)
    return tok
