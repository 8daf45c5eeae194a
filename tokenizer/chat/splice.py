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
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import ChatFormatError
from .segments import Segment, segments_text
from .template import compiled
from .verify import first_difference

_BASE = 0xF0200
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


def _mark(content: str, cores: list[str], reasoning: bool) -> str:
    """``content`` with its text replaced by a new sentinel (its surrounding whitespace kept), each run
    between reasoning tags apart when ``reasoning`` (an assistant's: the template may parse them); the
    texts replaced are appended to ``cores``."""
    parts = []
    for part in _TAGS.split(content) if reasoning else (content,):
        core = part.strip()
        if not core or _TAGS.fullmatch(part):
            parts.append(part)
            continue
        at = part.index(core)
        parts.append(part[:at] + chr(_BASE + len(cores)) + part[at + len(core):])
        cores.append(core)
    return "".join(parts)


def write_spliced(template: str, messages: Sequence[Mapping[str, object]], add_generation_prompt: bool = True, *,
                  bos_token: str = "<s>", eos_token: str = "</s>", thinking: bool | None = None,
                  now: datetime.datetime | None = None, effort: str | None = None,
                  tools: Sequence[Mapping[str, object]] | None = None) -> list[Segment]:
    """The template's prompt for ``messages`` as segments, contents literal (see the module docstring);
    ``effort`` is the template's ``reasoning_effort``, ``tools`` its tool definitions."""
    tpl = compiled(template)
    now = now or datetime.datetime.now()
    options = {"bos_token": bos_token, "eos_token": eos_token, "thinking": thinking, "now": now, "effort": effort,
               "tools": tools}
    cores: list[str] = []
    marked = [{**m, "content": _mark(m["content"], cores, m.get("role") == "assistant")}
              if isinstance(m.get("content"), str) else dict(m) for m in messages]
    real = tpl.render(messages, add_generation_prompt, **options)  # the template's refusal, if any, is raised here
    segments: list[Segment] = []
    if cores:
        sentinels = re.compile("([" + chr(_BASE) + "-" + chr(_BASE + len(cores) - 1) + "])")
        at = 0  # where the real rendering is, part by part
        for part in sentinels.split(tpl.render(marked, add_generation_prompt, **options)):
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
        raise ChatFormatError(f"the template changes this conversation's text, so its contents can't be kept "
                              f"literal: {first_difference(spliced, real)}")
    return segments
