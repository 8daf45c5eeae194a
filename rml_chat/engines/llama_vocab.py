"""llama.cpp's vocabulary of a GGUF alone, as the model doctor's oracle (``--check``): loaded with
``vocab_only``, so no weights come into memory. The C calls are the bindings' (``bindings.bindings``), as
everywhere in the engines; this is apart from ``runtime.LlamaModel`` because the chat path never uses it."""

from __future__ import annotations

import os
from pathlib import Path

from .bindings import backend, llama_log
from .runtime import LoadError, _tokenize


class LlamaVocab:
    """llama.cpp's vocabulary alone (``vocab_only``: no weights in memory), the model doctor's oracle:
    its tokenization, which ids end generation, which are control tokens, whether it adds a BOS."""

    def __init__(self, weights: Path):
        lib = self._lib = backend()
        llama_log()
        params = lib.llama_model_default_params()
        params.vocab_only = True
        self.model = lib.llama_model_load_from_file(os.fsencode(weights), params)
        if not self.model:
            raise LoadError(f"failed to load the vocabulary of {weights}")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self.add_bos = bool(lib.llama_vocab_get_add_bos(self.vocab))

    def tokenize(self, text: str, special: bool) -> list[int]:
        return _tokenize(self._lib, self.vocab, text.encode("utf-8"), special)

    def is_eog(self, token_id: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self.vocab, token_id))

    def is_control(self, token_id: int) -> bool:
        return bool(self._lib.llama_vocab_is_control(self.vocab, token_id))

    def close(self) -> None:
        if self.model:
            self._lib.llama_model_free(self.model)
            self.model = None
