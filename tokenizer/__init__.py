"""rml-chat's tokenizer: byte-level and SentencePiece BPE, id-exact with llama.cpp.

    >>> import tokenizer
    >>> tok = tokenizer.load("model.gguf")          # doctest: +SKIP
    >>> tok.encode("Hello world")                   # doctest: +SKIP
    [9906, 1917]
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .spec import ModelKind, TokenizerError, TokenizerSpec, TokenType, Unsupported

if TYPE_CHECKING:
    from .core import Tokenizer

__all__ = ["ModelKind", "Tokenizer", "TokenizerError", "TokenizerSpec", "TokenType", "Unsupported", "load"]


def __getattr__(name: str) -> object:
    """``tokenizer.Tokenizer`` imports the engine on first use: ``import tokenizer`` stays cheap for an app
    that starts loading its model's weights first."""
    if name == "Tokenizer":
        from .core import Tokenizer

        return Tokenizer
    raise AttributeError(f"module 'tokenizer' has no attribute {name!r}")


def load(path: str | Path) -> Tokenizer:
    """Build the tokenizer of a GGUF file, a tokenizer.json file, or a model directory (its tokenizer.json
    and config files, else its single ``.gguf``). The built tables of a big vocabulary are cached on disk
    (``table_cache``): the next load of the same, unchanged file reads them back."""
    from . import table_cache
    from .core import Tokenizer
    from .gguf import load_gguf
    from .hf_config import is_hf_source, load_hf

    p = Path(path)
    if not p.exists():
        raise TokenizerError(f"{p}: no such file or directory")
    if p.is_dir() and not (p / "tokenizer.json").is_file():
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) != 1:
            raise TokenizerError(f"{p}: no tokenizer.json and {len(ggufs)} .gguf files in the directory")
        p = ggufs[0]
    with _no_gc_pauses():
        cached = table_cache.read(p)
        if cached is not None:
            table_cache.replay(cached.warnings)
            return Tokenizer(cached.spec, cached.merge_table)
        with table_cache.captured_warnings() as warnings:
            spec = load_hf(p) if is_hf_source(p) else load_gguf(p)[0]
            tok = Tokenizer.create(spec)
        table_cache.write(p, spec, tok.merge_table, warnings)
        return tok


@contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """Loading makes ~10^6 objects none of which form cycles; the cyclic collector would walk
    them again and again as they pile up (~20 % of load time). It is paused, then restored."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
