"""rml-chat's tokenizer: byte-level and SentencePiece BPE, id-exact with llama.cpp.

    >>> import tokenizer
    >>> tok = tokenizer.load("model.gguf")          # doctest: +SKIP
    >>> tok.encode("Hello world")                   # doctest: +SKIP
    [9906, 1917]
"""

from __future__ import annotations

from pathlib import Path

from .core import Tokenizer
from .spec import ModelKind, TokenizerError, TokenizerSpec, TokenType, Unsupported

__all__ = ["ModelKind", "Tokenizer", "TokenizerError", "TokenizerSpec", "TokenType", "Unsupported", "load"]


def load(path: str | Path) -> Tokenizer:
    """Build the tokenizer of a GGUF file (``*.gguf``)."""
    from .gguf import load_gguf

    p = Path(path)
    if not p.exists():
        raise TokenizerError(f"{p}: no such file or directory")
    spec, _extras = load_gguf(p)
    return Tokenizer.create(spec)
