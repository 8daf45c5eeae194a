"""The normalizer stage: what a tokenizer.json's normalizer does to text before it is split.

``steps`` come from the spec (``hf.py`` reads them; a GGUF has none, as llama.cpp normalizes nothing):
"NFC", "NFKC", "NFD", "NFKD" (``unicodedata``) and "lowercase", applied in order.
``normalize("Ｈeﬁ", ("NFKC", "lowercase"))`` -> "hefi" (the fullwidth H and the "ﬁ" ligature folded).
"""

from __future__ import annotations

import unicodedata


def normalize(text: str, steps: tuple[str, ...]) -> str:
    for step in steps:
        text = text.lower() if step == "lowercase" else unicodedata.normalize(step, text)
    return text
