"""What the checks look at: one model, loaded the way a chat loads it, with llama.cpp's vocabulary of the
same file beside it and the GGUF's metadata as written (``meta``: what other tools read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizer.loaders.gguf_reader import read_metadata

from ..core.model import Model
from ..engines.llama_vocab import LlamaVocab

#: the GGUF keys the checks read as written (no token arrays: those are the tokenizer's)
META_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
             "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
             "tokenizer.ggml.add_bos_token", "general.name", "general.basename", "general.architecture")


@dataclass
class Patient:
    model: Model
    oracle: LlamaVocab
    meta: dict[str, Any] = field(default_factory=dict)
    llama_log: list[str] = field(default_factory=list)  # what llama.cpp warned while loading the vocabulary
    facts: dict[str, Any] = field(default_factory=dict)  # what the checks measured, for the report

    @classmethod
    def of(cls, model: Model, oracle: LlamaVocab, log: list[str]) -> Patient:
        entries = read_metadata(model.weights, META_KEYS)
        return cls(model, oracle, {key: value for key, (_, value) in entries.items() if key in META_KEYS}, log)

    @property
    def tokenizer(self):  # type: ignore[no-untyped-def]
        return self.model.tokenizer

    @property
    def is_directory(self) -> bool:
        return Path(self.model.source).is_dir()

    def token(self, token_id: int | None) -> list:
        """An id as evidence: ``[id, text]``."""
        return [token_id, self.tokenizer.id_to_token(token_id)] if token_id is not None else [None, None]

    def declared_ends(self) -> dict[str, int]:
        """The GGUF's own EOS/EOT/EOM ids, as written (what tools that read the metadata stop on)."""
        names = {"eos": "tokenizer.ggml.eos_token_id", "eot": "tokenizer.ggml.eot_token_id",
                 "eom": "tokenizer.ggml.eom_token_id"}
        return {name: int(self.meta[key]) for name, key in names.items() if key in self.meta}
