"""What ``--models`` says of a model beyond its file: the quantization (from the GGUF's ``general.file_type``
when the file name says none, as for ollama's blobs) and the chat format family its template establishes.

Only the GGUF's header is read (the metadata, not the vocabulary or the tensors), and a template's format is
established once and cached, so listing a folder of large models takes about a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# llama.cpp's ``enum llama_ftype`` (``general.file_type``): value -> the name its files are given
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
              12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
              19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
              26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
              36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE"}


@dataclass(frozen=True)
class ModelFacts:
    quant: str   # "" when neither the name nor the header says
    family: str  # the chat format's name ("chatml", "gemma" …), "?" when it can't be read


def facts_of(weights: Path, quant: str = "") -> ModelFacts:
    """Read ``weights``' header: its file type when ``quant`` is not known, and its chat format family."""
    from tokenizer import TokenizerError
    from tokenizer.chat import ChatFormatError, detect_chat_format
    from tokenizer.loaders.gguf_reader import read_metadata

    try:
        meta = read_metadata(weights, ("general.file_type", "tokenizer.chat_template", "tokenizer.ggml.tokens"),
                             raw=frozenset({"tokenizer.ggml.tokens"}))
    except TokenizerError:
        return ModelFacts(quant, "?")
    if not quant and "general.file_type" in meta:
        quant = FILE_TYPES.get(meta["general.file_type"][1], "")
    template = meta.get("tokenizer.chat_template", (0, None))[1]
    vocab = [t.decode("utf-8", "replace") for t in meta.get("tokenizer.ggml.tokens", (0, []))[1]] if not template else None
    try:
        family = detect_chat_format(template if isinstance(template, str) else None, vocab).format.name
    except (ChatFormatError, TokenizerError, RecursionError, MemoryError):
        family = "?"
    return ModelFacts(quant, family)
