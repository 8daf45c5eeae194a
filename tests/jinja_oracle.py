"""Render chat templates the way transformers does (the oracle for our chat formats)."""

from __future__ import annotations

import datetime
import json

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 7, 26, 9, 30)


class TemplateRaised(Exception):
    """The template called raise_exception (a conversation it refuses)."""


def _raise(message: str) -> None:
    raise TemplateRaised(message)


def _tojson(value, indent=None, ensure_ascii=False, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


_ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
_ENV.filters["tojson"] = _tojson
_ENV.globals["raise_exception"] = _raise
_ENV.globals["strftime_now"] = NOW.strftime


def render(template: str, messages, add_generation_prompt: bool, bos_token: str = "<s>", eos_token: str = "</s>",
           **extra) -> str:
    return _ENV.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                             bos_token=bos_token, eos_token=eos_token, **extra)
