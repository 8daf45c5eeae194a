"""A prompt as segments: template text, whose special-token texts become tokens, and message content,
which is always literal (a user who types ``<|im_end|>`` sends those eleven characters)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class Segment(NamedTuple):
    """A piece of the prompt. ``special=True``: text the template wrote (a special token's text, or text
    in which special-token texts are tokens); ``special=False``: message content, encoded literally."""

    text: str
    special: bool = False


def segments_text(segments: Iterable[Segment]) -> str:
    """The prompt as one string (what the Jinja template renders)."""
    return "".join(s.text for s in segments)
