"""Loaders: a model file or folder -> a validated ``TokenizerSpec``, as its own engine reads it.

| module | reads | as |
|---|---|---|
| ``gguf_reader.py`` | a GGUF's metadata section, bounded (every count checked against the bytes left) | — |
| ``gguf.py`` | ``tokenizer.ggml.*`` | llama.cpp (``llama-vocab.cpp``) |
| ``hf.py`` | ``tokenizer.json`` | HF ``tokenizers`` |
| ``hf_config.py`` | a model directory's config files around it | transformers |

Every error is a ``TokenizerError`` that names the file.
"""

from __future__ import annotations

from pathlib import Path

from ..spec import TokenizerError, TokenizerSpec
from ..speedups import REFERENCE, Speedups


def find_source(path: str | Path) -> Path:
    """The file ``load_spec`` reads for ``path``: the path itself, or for a directory without tokenizer.json
    its one ``.gguf``."""
    p = Path(path)
    if not p.exists():
        raise TokenizerError(f"{p}: no such file or directory")
    if p.is_dir() and not (p / "tokenizer.json").is_file():
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) != 1:
            raise TokenizerError(f"{p}: no tokenizer.json and {len(ggufs)} .gguf files in the directory")
        p = ggufs[0]
    return p


def load_spec(source: Path, speedups: Speedups = REFERENCE) -> TokenizerSpec:
    """The spec of a GGUF file, a tokenizer.json, or a directory holding one (``find_source`` first).
    ``speedups``: the accelerator's hooks (``tokenizer.speedups``); the default reads as the reference
    path alone, into plain lists, dicts and ints."""
    from .gguf import load_gguf
    from .hf_config import is_hf_source, load_hf

    return load_hf(source, speedups) if is_hf_source(source) else load_gguf(source, speedups)[0]


def source_files(source: Path) -> list[Path]:
    """Every file ``load_spec(source)`` reads: the GGUF, or tokenizer.json and the config files beside it."""
    from .hf_config import is_hf_source
    from .hf_config import source_files as hf_files

    return hf_files(source) if is_hf_source(source) else [source]
