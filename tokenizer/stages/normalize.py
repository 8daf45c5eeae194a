"""The normalizer stage: a fragment of text (between special tokens) as the merge model reads it.

1. the Unicode forms: ``steps`` come from the spec (``hf.py`` reads them; a GGUF has none, as llama.cpp
   normalizes nothing): "NFC", "NFKC", "NFD", "NFKD" (``unicodedata``) and "lowercase", in order.
   ``normalize("Ｈeﬁ", ("NFKC", "lowercase"))`` -> "hefi" (the fullwidth H and the "ﬁ" ligature folded);
2. the space prefix (``SpacePrefix``), and for SentencePiece every space written "▁":
   ``FragmentNormalizer.spaces("Hello world", first=True)`` -> "▁Hello▁world" (Llama 2).
"""

from __future__ import annotations

import unicodedata

from ..spec import ModelKind, SpacePrefix, TokenizerSpec

_SPACE_LEADS = {ModelKind.SENTENCEPIECE: (" ", "\u2581"), ModelKind.BYTE_LEVEL: " "}


def normalize(text: str, steps: tuple[str, ...]) -> str:
    for step in steps:
        text = text.lower() if step == "lowercase" else unicodedata.normalize(step, text)
    return text


class FragmentNormalizer:
    """The normalizer stage of one vocabulary (see the module docstring)."""

    def __init__(self, spec: TokenizerSpec):
        self.forms = spec.normalizer.forms
        self.prefix = spec.normalizer.space_prefix
        self._leads = _SPACE_LEADS[spec.model.kind]
        self._sentencepiece = spec.model.kind is ModelKind.SENTENCEPIECE

    def apply_forms(self, fragment: str) -> str:
        return normalize(fragment, self.forms) if self.forms else fragment

    def spaces(self, fragment: str, first: bool) -> str:
        """The space prefix where it applies (``first``: the fragment starts the text or follows a special
        token), then SentencePiece's "▁" for every space."""
        prefix = self.prefix
        if prefix is not SpacePrefix.NONE:
            if prefix is SpacePrefix.EVERY_FRAGMENT:
                fragment = " " + fragment
            # HF: not before a space (Metaspace: nor before a literal "▁", its space)
            elif not fragment.startswith(self._leads) and (first or prefix is SpacePrefix.UNLESS_SPACE):
                fragment = " " + fragment
        return fragment.replace(" ", "\u2581") if self._sentencepiece else fragment
