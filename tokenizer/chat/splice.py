"""Render with the template itself, with message contents spliced in as literal text.

For a template no table or fit reproduces (and for conversations outside a fitted table, such as a tool
message). The conversation is rendered twice:

1. with every content's text replaced by a *sentinel* — a private-use character — that keeps the
   content's leading and trailing whitespace (and an assistant's ``<think>``/``</think>`` tags), so that
   the template's strips and reasoning splits act on it exactly as on the real text;
2. with the real contents.

Everything in rendering 1 outside the sentinels is template text (special tokens in it are parsed);
each sentinel becomes its content's text, literal — as the template wrote it: a content the template
hands to ``tojson`` (Llama 3.x and gpt-oss write a tool's result so) is its JSON-escaped text, still
literal. The splice is used only when it reproduces
rendering 2 exactly; otherwise the conversation is refused, naming the difference. Example::

    content " Hi <|im_end|> " -> rendered as " \\U000f0200 " -> segments … Segment("Hi <|im_end|>", False) …

Every other string the template reads from the conversation is data too: a tool call's name and arguments
(keys and values, at any depth, or the arguments' JSON text), a tool message's name, the reasoning, and
every string of the tool definitions (names, descriptions, parameter names, enums). A template compares
some of those (``param.type == "string"``, a call's name against the tools'), so they keep their text, and
only the ones that hold a special token's text (``holds_special``, the tokenizer's own test) are replaced
by a sentinel, the same sentinel for the same text wherever it appears::

    arguments {"city": "Paris<|im_end|>"} -> {"city": "\\U000f0201"} -> … Segment("Paris<|im_end|>", False) …
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .errors import ChatFormatError
from .probe import HOLES
from .segments import Segment, segments_text
from .template import compiled
from .verify import first_difference

_BASE = HOLES["splice"]  # (its holes: the probe's scheme, its own range)
_TAGS = re.compile(r"(</?think>)")


@dataclass(frozen=True)
class TemplateFormat:
    """A format that renders with the model's template each turn (contents spliced in literally)."""

    name: str
    template: str
    #: the template's own text around contents, and what it writes after an assistant message, as
    #: rendered for a probe conversation (for the special tokens to protect and the stop ids)
    texts: tuple[str, ...] = ()
    after_assistant: tuple[str, ...] = ()
    writes_bos: bool = False

    @property
    def thinking_switch(self) -> bool:
        return compiled(self.template).reads_thinking

    def template_texts(self) -> list[str]:
        return list(self.texts)

    def after_assistant_texts(self) -> list[str]:
        return list(self.after_assistant)


@dataclass
class _Sentinels:
    """The texts replaced so far (``cores[n]`` is sentinel n), one sentinel per distinct text."""

    cores: list[str] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)

    def of(self, core: str) -> str:
        if core not in self._index:
            self._index[core] = len(self.cores)
            self.cores.append(core)
        return chr(_BASE + self._index[core])

    def mark(self, text: str, reasoning: bool = False) -> str:
        """``text`` with its text replaced by a sentinel (its surrounding whitespace kept), each run between
        reasoning tags apart when ``reasoning`` (an assistant's content: the template may parse them)."""
        parts = []
        for part in _TAGS.split(text) if reasoning else (text,):
            core = part.strip()
            if not core or _TAGS.fullmatch(part):
                parts.append(part)
                continue
            at = part.index(core)
            parts.append(part[:at] + self.of(core) + part[at + len(core):])
        return "".join(parts)

    def mark_data(self, value: object, holds_special: Callable[[str], bool]) -> object:
        """``value`` (strings, lists and mappings, at any depth) with each string, key or value, that holds a
        special token's text marked; the rest as it was."""
        if isinstance(value, str):
            return self.mark(value) if holds_special(value) else value
        if isinstance(value, Mapping):
            return {self.mark_data(k, holds_special): self.mark_data(v, holds_special) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.mark_data(item, holds_special) for item in value]
        return value


def _marked_message(message: Mapping[str, object], sentinels: _Sentinels,
                    holds_special: Callable[[str], bool] | None) -> dict:
    """A message with its content marked, and every other field's strings that hold a special token's text."""
    marked = {}
    for key, value in message.items():
        if key == "content" and isinstance(value, str):
            marked[key] = sentinels.mark(value, message.get("role") == "assistant")
        elif key == "role" or holds_special is None:
            marked[key] = value
        else:
            marked[key] = sentinels.mark_data(value, holds_special)
    return marked


#: what a switch a template reads in a message is, as a flag (a needle holding the word: the hint)
_SWITCHES = {"think": " (for thinking on or off: --think on|off, /set think in the chat)",
             "effort": " (for the reasoning effort: --reasoning-effort)"}


def write_spliced(template: str, messages: Sequence[Mapping[str, object]], add_generation_prompt: bool = True, *,
                  bos_token: str = "<s>", eos_token: str = "</s>", thinking: bool | None = None,
                  now: datetime.datetime | None = None, effort: str | None = None,
                  tools: Sequence[Mapping[str, object]] | None = None,
                  holds_special: Callable[[str], bool] | None = None) -> list[Segment]:
    """The template's prompt for ``messages`` as segments, contents literal (see the module docstring);
    ``effort`` is the template's ``reasoning_effort``, ``tools`` its tool definitions. ``holds_special``:
    whether a text holds a special token's (the tokenizer's test); where given, every other string of the
    messages and the tools that holds one is literal too (None: contents alone)."""
    tpl = compiled(template)
    now = now or datetime.datetime.now()
    options = {"bos_token": bos_token, "eos_token": eos_token, "thinking": thinking, "now": now, "effort": effort,
               "tools": tools}
    sentinels = _Sentinels()
    marked = [_marked_message(m, sentinels, holds_special) for m in messages]
    marked_options = dict(options)
    if tools is not None and holds_special is not None:
        marked_options["tools"] = sentinels.mark_data(list(tools), holds_special)
    real = tpl.render(messages, add_generation_prompt, **options)  # the template's refusal, if any, is raised here
    segments: list[Segment] = []
    cores = sentinels.cores
    if cores:
        marks = re.compile("([" + chr(_BASE) + "-" + chr(_BASE + len(cores) - 1) + "])")
        at = 0  # where the real rendering is, part by part
        for part in marks.split(tpl.render(marked, add_generation_prompt, **marked_options)):
            if len(part) == 1 and _BASE <= ord(part) < _BASE + len(cores):
                core = cores[ord(part) - _BASE]
                quoted = json.dumps(core, ensure_ascii=False)[1:-1]  # inside a string the template's tojson wrote
                part = quoted if not real.startswith(core, at) and real.startswith(quoted, at) else core
                segments.append(Segment(part, False))
            elif part:
                segments.append(Segment(part, True))
            at += len(part)
    elif real:
        segments.append(Segment(real, True))
    spliced = segments_text(segments)
    if spliced != real:
        needle = tpl.needle_in(messages)
        if needle:  # (a switch the template reads in a message: SmolLM3's /no_think, Ling's detailed thinking on)
            hint = next((flag for word, flag in _SWITCHES.items() if word in needle.lower()), "")
            raise ChatFormatError(f"the chat template reads {needle!r} in a message and writes the prompt its own "
                                  f"way for it, so the message can't be kept as you wrote it; take it out{hint}")
        raise ChatFormatError(f"the template changes this conversation's text, so its contents can't be kept "
                              f"literal: {first_difference(spliced, real)}")
    return segments
