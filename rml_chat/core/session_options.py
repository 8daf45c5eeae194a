"""What a chat session's turns run under, in four parts (sampling, reasoning, context, tools), with the
user's stop strings and a shape every reply follows. The front ends build one (``launch.py`` from the
flags), and ``ChatSession.apply`` changes it for ``/set``::

    >>> options = SessionOptions(reasoning=ReasoningOptions(thinking=False), context=ContextOptions(shift=True))
    >>> options.sampling.temp, options.context.overflow, options.tools is None
    (0.8, 'drop-oldest', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tokenizer.chat.tool_calls import CallSyntax

from ..engines.base import Sampling
from .structured import Constraint

OVERFLOW_POLICIES = ("drop-oldest", "error")


class Toolbox(Protocol):
    """What a session holds of its tools (rml_chat/tools/toolbox.py): the template's call syntax, and
    ``markers``, its special tokens (a reply's call is read with those that are control tokens)."""

    syntax: CallSyntax
    markers: Mapping[str, int]

    def definitions(self) -> list[dict]: ...

    def schemas(self) -> dict[str, Mapping]: ...

    def listing(self) -> list[str]: ...

    def switch(self, name: str, on: bool) -> str: ...


@dataclass
class ReasoningOptions:
    """``thinking``: the template's thinking switch (None: the template's default); ``effort``: its
    ``reasoning_effort`` (None: its default). The budget is a sampling setting (``--reasoning-budget``)."""

    thinking: bool | None = None
    effort: str | None = None


@dataclass
class ContextOptions:
    """``overflow``: what a prompt that does not fit does (``drop-oldest``: old exchanges leave the model's
    window; ``error``: the turn is refused); ``shift``: a reply that fills the context moves the window and
    goes on (``--context-shift on``)."""

    overflow: str = "drop-oldest"
    shift: bool = False

    def __post_init__(self) -> None:
        if self.overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"overflow: {self.overflow!r} is not one of {', '.join(OVERFLOW_POLICIES)}")


@dataclass
class SessionOptions:
    """Everything a session's turns run under. ``stop_strings``: the user's (``--stop``; a reply they end
    was cut, where the format's own stop strings end it); ``constraint``: a JSON schema or grammar every
    reply follows; ``tools``: the tools the model may call (None: none); ``sampling_sources``: where each
    sampling setting came from (``core/sampling_sources.py``: a flag, ``/set``, the model, llama.cpp)."""

    sampling: Sampling = field(default_factory=Sampling)
    reasoning: ReasoningOptions = field(default_factory=ReasoningOptions)
    context: ContextOptions = field(default_factory=ContextOptions)
    stop_strings: tuple[str, ...] = ()
    constraint: Constraint | None = None
    tools: Toolbox | None = None
    sampling_sources: dict[str, str] = field(default_factory=dict)
