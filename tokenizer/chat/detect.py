"""Which chat format a model uses: a name given by flag, its Jinja template, or its special tokens.

Order of evidence:
1. a name (``--chat-format``) wins;
2. a Jinja template is matched against every record's fingerprint (``detect`` texts all present,
   ``exclude`` texts all absent), in table order, most specific first;
3. a template no record fingerprints exactly gets the closest family (by marker) and a warning;
4. no template: the vocabulary's special tokens pick the family (``<start_of_turn>`` -> gemma), with a note;
5. otherwise "raw", with a warning.

Example: Qwen2.5's template holds "<|im_start|>" and its default system text, so it is "qwen2.5"
(exact); a ChatML template with tool handling no record knows is "chatml" (closest, with a warning).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from .formats import FAMILY_MARKERS, FORMATS, ChatFormat
from .render import ChatFormatError

SOURCE_FLAG = "flag"
SOURCE_TEMPLATE = "template"
SOURCE_CLOSEST = "template (closest)"
SOURCE_VOCAB = "vocabulary"
SOURCE_NONE = "none"


@dataclass(frozen=True)
class Detection:
    """The chosen format, where it came from, and a warning for the user when it is a guess."""

    format: ChatFormat
    source: str
    warning: str = ""

    @property
    def exact(self) -> bool:
        return self.source in (SOURCE_FLAG, SOURCE_TEMPLATE)


def _fingerprint_matches(fmt: ChatFormat, template: str, unescaped: str) -> bool:
    def has(text: str) -> bool:
        return text in template or text in unescaped
    return bool(fmt.detect) and all(map(has, fmt.detect)) and not any(map(has, fmt.exclude))


def _family(texts: Collection[str] | str) -> str | None:
    for marker, name in FAMILY_MARKERS:
        if marker in texts:
            return name
    return None


def format_by_name(name: str) -> ChatFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ChatFormatError(f"unknown chat format {name!r}; known: {', '.join(FORMATS)}") from None


def detect_chat_format(name_or_template: str | None, vocab: Collection[str] | None = None) -> Detection:
    """Pick a format. ``name_or_template`` is a format name or a Jinja template (or None);
    ``vocab`` the token texts, consulted when there is no template."""
    if name_or_template and "{" not in name_or_template and "<" not in name_or_template:
        return Detection(format_by_name(name_or_template.strip()), SOURCE_FLAG)
    template = name_or_template or ""
    if template:
        unescaped = template.replace("\\n", "\n")
        for fmt in FORMATS.values():
            if _fingerprint_matches(fmt, template, unescaped):
                return Detection(fmt, SOURCE_TEMPLATE)
        family = _family(template)
        if family:
            return Detection(FORMATS[family], SOURCE_CLOSEST,
                             f"chat template not recognised exactly; using the closest format {family!r} "
                             f"(prompts may differ from the model's own template; --chat-format picks another)")
        return Detection(FORMATS["raw"], SOURCE_CLOSEST,
                         "chat template not recognised (no known markers); using 'raw' — pass --chat-format")
    if vocab is not None:
        family = _family(set(vocab) & {marker for marker, _ in FAMILY_MARKERS})
        if family:
            return Detection(FORMATS[family], SOURCE_VOCAB,
                             f"the model has no chat template; format {family!r} chosen from its special tokens")
    return Detection(FORMATS["raw"], SOURCE_NONE,
                     "the model has no chat template and no known chat tokens; using 'raw' (plain text)")
