"""``rml-chat NAME``: a name from ``rml-chat --models`` to the model it names.

The rules, tried in order until one finds something (letter case never matters):

1. ``SOURCE:NAME`` keeps to one source (``ollama:smollm2``, ``hf:org/repo:Q4_K_M``).
2. The name as listed.
3. ollama's ``NAME`` for ``NAME:latest``.
4. ``ORG/REPO`` for that repository's one file, ``NAME`` for an ollama model's one tag.
5. Part of one name (``smol`` for ``smollm2``).

Two or more models found by the same rule: an ambiguous name, and the error lists them.

>>> from pathlib import Path
>>> here = [LocalModel("org/m-GGUF:Q4_1", "hf", Path("a"), Path("a"), 1, "Q4_1"),
...         LocalModel("org/m-GGUF:Q8_0", "hf", Path("b"), Path("b"), 1, "Q8_0"),
...         LocalModel("qwen3:latest", "ollama", Path("c"), Path("c"), 1)]
>>> find_model("QWEN3", here).name, find_model("org/m-gguf:q8_0", here).name
('qwen3:latest', 'org/m-GGUF:Q8_0')
>>> find_model("org/m-GGUF", here)
Traceback (most recent call last):
rml_chat.errors.ModelError: 'org/m-GGUF' names 2 models here: org/m-GGUF:Q4_1, org/m-GGUF:Q8_0 (name one of them)
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ModelError
from .stores import LocalModel

SOURCES = ("default", "hf", "llama.cpp", "lmstudio", "ollama")


def find_model(text: str, models: list[LocalModel]) -> LocalModel | None:
    """The model ``text`` names, None when it names none; ModelError when it names several."""
    source, _, rest = text.partition(":")
    if source in SOURCES and rest:
        text, models = rest, [m for m in models if m.source == source]
    wanted = text.casefold()
    rules: list[Callable[[LocalModel], bool]] = [
        lambda m: m.name.casefold() == wanted,
        lambda m: m.source == "ollama" and m.name.casefold() == wanted + ":latest",
        lambda m: m.name.casefold().rpartition(":")[0] == wanted,
        lambda m: wanted in m.name.casefold(),
    ]
    for rule in rules:
        found = [m for m in models if rule(m)]
        if len(found) == 1:
            return found[0]
        if found:
            names = [m.name for m in found]
            shown = [m.qualified if names.count(m.name) > 1 else m.name for m in found]
            raise ModelError(f"{text!r} names {len(found)} models here: {', '.join(shown[:8])}"
                             f"{' …' if len(shown) > 8 else ''} (name one of them)")
    return None


def looks_like_a_path(text: str) -> bool:
    """Typed as a path (``./m.gguf``, ``~/models``, ``/abs``, ``x.gguf``) rather than as a name.

    >>> [looks_like_a_path(t) for t in ("./m", "~/x", "/a", "m.GGUF", "org/repo:Q4_1", "smollm2")]
    [True, True, True, True, False, False]
    """
    return text.startswith(("/", "./", "../", "~")) or text.lower().endswith((".gguf", ".json"))
