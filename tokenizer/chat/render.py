"""Messages -> prompt segments: ``format_chat`` writes with the format's own writer, and the table
records' writer lives here; no Jinja at run time for a table record or a fitted format.

A segment is literal text or template text. Message content is always literal: a user who types
``<|im_end|>`` gets those eleven characters, never the control token.

A format established from the model's template keeps the template: a conversation its writer can't
write (a tool message, roles that don't alternate …) is rendered by the template itself, contents
spliced in literally (``splice.py``), and a conversation the template refuses is refused with the
template's own message.

Worked example, format "gemma" (system folded into the first user turn, contents trimmed)::

    >>> from tokenizer.chat.formats import FORMATS
    >>> format_text(FORMATS["gemma"], [{"role": "system", "content": "Be brief."},
    ...                                {"role": "user", "content": " Hi "}], bos_token="<bos>")
    '<bos><start_of_turn>user\\nBe brief.\\n\\nHi<end_of_turn>\\n<start_of_turn>model\\n'
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from .errors import ChatFormatError
from .fitted import FittedFormat, check_domain
from .formats import (
    SYSTEM_FOLD_FIRST,
    SYSTEM_FOLD_LAST,
    SYSTEM_FORBIDDEN,
    SYSTEM_TURN,
    TRIM_CONTENT,
    TRIM_FOLDED,
    ChatFormat,
)
from .markers import THINK_CLOSE
from .segments import Segment, segments_text
from .splice import TemplateFormat, write_spliced
from .template import compiled

ROLES = ("system", "user", "assistant", "tool")


_TODAY = r"\{today:([^}]*)\}"  # a date written with strftime, e.g. {today:%d %b %Y}
_HOLE = re.compile(r"\{(content|bos|eos)\}|" + _TODAY)


def _fill_today(text: str, now: datetime.datetime) -> str:
    return re.sub(_TODAY, lambda m: now.strftime(m.group(1)), text)


class _Writer:
    """Collects segments, cutting the format's marker texts out of template strings."""

    def __init__(self, fmt: ChatFormat, bos_token: str, eos_token: str, now: datetime.datetime):
        self.segments: list[Segment] = []
        self._fmt = fmt
        self._special = {"bos": bos_token, "eos": eos_token}
        self._now = now
        markers = sorted(fmt.markers, key=len, reverse=True)
        self._marker_re = re.compile("|".join(map(re.escape, markers))) if markers else None

    def template(self, text: str) -> None:
        """Template text: marker texts become special segments, the rest literal."""
        if not text:
            return
        if self._marker_re is None:
            self.literal(text)
            return
        pos = 0
        for m in self._marker_re.finditer(text):
            self.literal(text[pos:m.start()])
            self.segments.append(Segment(m.group(), True))
            pos = m.end()
        self.literal(text[pos:])

    def literal(self, text: str) -> None:
        if text:
            self.segments.append(Segment(text, False))

    def turn(self, pattern: str, role: str, content: str) -> None:
        """Write one role string, its {content} hole filled with literal text. The role name goes in
        first, so that a marker spelled around it ("<|{role}|>") is cut whole."""
        pattern = pattern.replace("{role}", self._fmt.role_names.get(role, role))
        pos = 0
        for m in _HOLE.finditer(pattern):
            self.template(pattern[pos:m.start()])
            hole = m.group(1)
            if hole == "content":
                self.literal(content)
            elif hole in self._special:
                self._write_special(self._special[hole])
            else:
                self.template(self._now.strftime(m.group(2)))
            pos = m.end()
        self.template(pattern[pos:])

    def _write_special(self, text: str) -> None:
        if text:
            self.segments.append(Segment(text, True))


def _check_roles(fmt: ChatFormat, messages: Sequence[Mapping[str, object]]) -> None:
    if fmt.system == SYSTEM_FORBIDDEN and any(m.get("role") == "system" for m in messages):
        raise ChatFormatError(f"chat format {fmt.name!r}: the model's template does not support a system message")
    allowed = set(fmt.roles) | {"system"}
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in allowed:
            raise ChatFormatError(f"chat format {fmt.name!r}: message {i} has role {role!r}; "
                                  f"this format takes {', '.join(sorted(allowed))}")
        if not isinstance(content, str):
            raise ChatFormatError(f"chat format {fmt.name!r}: message {i} content must be a string, "
                                  f"not {type(content).__name__}")
        if role == "system" and i > 0 and fmt.system != SYSTEM_TURN:
            raise ChatFormatError(f"chat format {fmt.name!r}: a system message may only come first")


def _check_alternation(fmt: ChatFormat, turns: Sequence[Mapping[str, str]]) -> None:
    for i, message in enumerate(turns):
        expected = "user" if i % 2 == 0 else "assistant"
        if message["role"] != expected:
            raise ChatFormatError(f"chat format {fmt.name!r}: after the optional system message, roles must "
                                  f"alternate user/assistant/user/…; message {i + 1} is {message['role']!r}")


def _strip_think(mode: str, content: str) -> str:
    """Reasoning is not kept in history: "<think>…</think>answer" -> "answer" (as the templates do)."""
    if not mode or THINK_CLOSE not in content:
        return content
    content = content.split(THINK_CLOSE)[-1]
    return content.lstrip("\n") if mode == "split_lstrip" else content


PromptFormat = ChatFormat | FittedFormat | TemplateFormat


def writer_of(fmt: PromptFormat) -> Callable[..., list[Segment]]:
    """The format's own writer: ``writer(messages, add_generation_prompt, bos_token=, eos_token=,
    thinking=, now=)``."""
    if isinstance(fmt, FittedFormat):
        return fmt.write
    if isinstance(fmt, TemplateFormat):
        return partial(write_spliced, fmt.template)
    return partial(write_record, fmt)


def format_chat(fmt: PromptFormat, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True, *,
                bos_token: str = "<s>", eos_token: str = "</s>", thinking: bool | None = None,
                now: datetime.datetime | None = None, effort: str | None = None,
                tools: Sequence[Mapping[str, object]] | None = None,
                holds_special: Callable[[str], bool] | None = None) -> list[Segment]:
    """The prompt for ``messages`` as segments, exactly as the model's template writes it.

    ``bos_token``/``eos_token`` are the texts of the model's BOS and EOS tokens; ``thinking`` selects
    a reasoning model's thinking (None: the template's default); ``now`` fixes the date that some
    formats write. ``effort`` is the template's ``reasoning_effort`` (None: its default); the template
    itself writes a prompt with one (tables and fits are read off it with the default). ``tools``: tool
    definitions (OpenAI's shape), written by the template itself, as is a conversation with tool calls.
    ``holds_special`` (the encoder's test of a text) makes every string of the tools and of the messages'
    other fields that holds a special token's text literal too, where the template renders them
    (``splice.py``); a content is always literal.
    """
    now = now or datetime.datetime.now()
    options = {"bos_token": bos_token, "eos_token": eos_token, "thinking": thinking, "now": now}
    spliced = partial(write_spliced, holds_special=holds_special)
    if effort is not None or tools is not None:
        if fmt.template is None:
            raise ChatFormatError(f"the chat format {fmt.name!r} has no template to write "
                                  + ("tools" if tools is not None else "a reasoning effort"))
        if effort is not None and not compiled(fmt.template).reads_effort:
            raise ChatFormatError(f"the chat format {fmt.name!r} reads no reasoning effort")
        return spliced(fmt.template, messages, add_generation_prompt, effort=effort, tools=tools, **options)
    if isinstance(fmt, TemplateFormat):
        return spliced(fmt.template, messages, add_generation_prompt, **options)
    if fmt.template is None:
        return writer_of(fmt)(messages, add_generation_prompt, **options)
    try:
        if isinstance(fmt, ChatFormat):  # what the record was verified on (a fitted table checks it itself)
            check_domain(messages)
        if compiled(fmt.template).needle_in(messages):  # (the template may write this one its own way)
            raise ChatFormatError("a message holds a text the template looks for")
        return writer_of(fmt)(messages, add_generation_prompt, **options)
    except ChatFormatError:
        return spliced(fmt.template, messages, add_generation_prompt, **options)


def write_record(fmt: ChatFormat, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True, *,
                 bos_token: str = "<s>", eos_token: str = "</s>", thinking: bool | None = None,
                 now: datetime.datetime | None = None) -> list[Segment]:
    """The table record's writer (see the module docstring of ``formats.py``)."""
    _check_roles(fmt, messages)
    now = now or datetime.datetime.now()
    writer = _Writer(fmt, bos_token, eos_token, now)
    system: str | None = None
    turns = [dict(m) for m in messages]
    if turns and turns[0]["role"] == "system":
        system = turns.pop(0)["content"]
    if fmt.alternate:
        _check_alternation(fmt, turns)
    if system is None and fmt.default_system is not None:
        system = _fill_today(fmt.default_system, now)
    last_user = max((i for i, m in enumerate(turns) if m["role"] == "user"), default=-1)
    for message in turns:
        if message["role"] == "assistant":
            message["content"] = _strip_think(fmt.strip_think, message["content"])
        if fmt.trim == TRIM_CONTENT:
            message["content"] = message["content"].strip()
    if system is not None and fmt.system in (SYSTEM_FOLD_FIRST, SYSTEM_FOLD_LAST):
        target = last_user if fmt.system == SYSTEM_FOLD_LAST else (0 if turns and turns[0]["role"] == "user" else -1)
        if target >= 0:
            turns[target]["content"] = fmt.fold.replace("{system}", system).replace(
                "{content}", turns[target]["content"])
        system = None
    if fmt.trim == TRIM_FOLDED:
        for message in turns:
            message["content"] = message["content"].strip()
    if fmt.bos:
        writer.turn("{bos}", "", "")
    if system is not None and not (fmt.skip_empty_system and not system):
        if fmt.trim == TRIM_CONTENT and fmt.trim_system:
            system = system.strip()
        writer.turn(fmt.roles["system"], "system", system)
    for message in turns:
        if message["role"] == "system" and fmt.skip_empty_system and not message["content"]:
            continue
        writer.turn(fmt.roles[message["role"]], message["role"], message["content"])
    if add_generation_prompt:
        writer.turn(fmt.generation_prompt, "assistant", "")
        writer.turn(fmt.think[{None: 0, True: 1, False: 2}[thinking]], "assistant", "")
    else:
        writer.turn(fmt.end_without_prompt, "assistant", "")
    return writer.segments


def format_text(fmt: PromptFormat, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                **options: object) -> str:
    """``format_chat`` joined into one string."""
    return segments_text(format_chat(fmt, messages, add_generation_prompt, **options))  # type: ignore[arg-type]
