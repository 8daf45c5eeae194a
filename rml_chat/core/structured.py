"""Structured output: a JSON schema or a GBNF grammar, enforced by llama.cpp's grammar sampler.

``-j/--json-schema SCHEMA`` (inline JSON, or ``@FILE``) is converted to GBNF by llama-cpp-python's
``json_schema_to_gbnf`` (llama.cpp's converter, ported); ``--grammar GBNF`` and ``--grammar-file FILE``
are GBNF as written. Both are checked before the first token: a schema the converter can't take, or a
grammar llama.cpp can't parse, is one line naming what is wrong.

The grammar guarantees the syntax, and lets the model end its turn only where the grammar is complete.
So a reply is *complete* when it ended on a stop token; one cut by ``-n`` or a full context (or a
``--stop`` string) is incomplete, reported as such (exit code 3), never passed off as valid. A schema's
reply is also checked after the fact: it must parse as JSON, and validate with ``jsonschema`` where that
is installed (the test extras install it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .. import text_input
from ..engines.base import Engine
from ..errors import AppError, UsageError
from .grammar_depth import depth
from .paths import typed_path, user_path


@dataclass(frozen=True)
class Constraint:
    """What a reply must follow: the GBNF text, and the schema it came from (None for a grammar)."""

    gbnf: str
    schema: dict | None = None
    flag: str = "--grammar"

    def describe(self) -> str:
        return "a JSON schema" if self.schema is not None else "a grammar"


def text_or_file(value: str, flag: str) -> str:
    """``@FILE`` -> the file's text (under the text policy); anything else as it is. FILE may be quoted or
    escaped, as at the chat's prompt (``/schema @'my schema.json'``: ``typed_path``)."""
    if not value.startswith("@"):
        return value
    if not (typed := typed_path(value[1:])):
        raise UsageError(f"{flag}: @ names no file (@FILE: the text of FILE)")
    path = user_path(typed)
    try:
        return text_input.from_bytes(text_input.read_limited(path), str(path))
    except OSError as err:
        raise UsageError(f"{flag}: {path}: {err.strerror}") from None


def from_schema(value: str, flag: str = "--json-schema") -> Constraint:
    """A JSON schema (inline or ``@FILE``) as a constraint, or UsageError naming what can't be converted."""
    from ..engines.runtime import schema_to_gbnf

    text = text_or_file(value, flag)
    try:
        schema = text_input.from_json(text, flag, numbers_only=True)
    except ValueError as err:  # (JSONDecodeError, or NaN and the like)
        raise UsageError(f"{flag}: not valid JSON ({err})") from None
    except RecursionError:
        raise UsageError(f"{flag}: not read: its JSON is nested too deeply") from None
    if not isinstance(schema, dict):
        raise UsageError(f"{flag}: a JSON schema is an object, not {type(schema).__name__}")
    try:
        gbnf = schema_to_gbnf(json.dumps(schema))
    except AppError:  # (llama-cpp-python missing: said as such, not as the schema's fault)
        raise
    except Exception as err:  # the converter raises what it likes (AssertionError, KeyError, ValueError …)
        raise UsageError(f"{flag}: llama.cpp's converter can't take this schema "
                         f"({type(err).__name__}: {err or 'unsupported'})") from None
    return Constraint(gbnf, schema, flag)


def from_grammar(value: str, flag: str = "--grammar") -> Constraint:
    """GBNF text (inline or ``@FILE``) as a constraint (checked against llama.cpp's parser by ``check``)."""
    text = text_or_file(value, flag)
    if not text.strip():
        raise UsageError(f"{flag}: the grammar is empty")
    return Constraint(text, None, flag)


def check(constraint: Constraint, engine: Engine) -> None:
    """The grammar parsed by the engine's own parser, so that a bad grammar is a UsageError now, not a
    crash of the sampler later."""
    what = "the grammar made from the schema" if constraint.schema is not None else "the grammar"
    too_deep = depth(constraint.gbnf).problem()  # (llama.cpp would recurse off its stack: the process would die)
    if too_deep:
        raise UsageError(f"{constraint.flag}: {what} goes too deep: {too_deep}")
    reason = engine.grammar_problem(constraint.gbnf)
    if reason:
        raise UsageError(f"{constraint.flag}: {what} does not parse: {reason}")


@dataclass(frozen=True)
class Outcome:
    complete: bool
    valid: bool | None  # the schema's verdict (None: no schema)
    problem: str = ""


def judge(constraint: Constraint | None, reply: str, stop_reason: str) -> Outcome:
    """Whether a constrained reply is complete and, for a schema, valid."""
    if constraint is None:
        return Outcome(True, None)
    if stop_reason != "stop":
        why = {"length": "-n/--max-tokens", "context": "a full context", "stop_string": "a --stop string",
               "interrupted": "Ctrl-C"}.get(stop_reason, stop_reason)
        return Outcome(False, False if constraint.schema is not None else None,
                       f"the reply was cut by {why} before {constraint.describe()} was complete")
    if constraint.schema is None:
        return Outcome(True, None)
    try:
        value = json.loads(reply)
    except json.JSONDecodeError as err:
        return Outcome(True, False, f"the reply is not valid JSON ({err})")
    except RecursionError:
        return Outcome(True, None, "the reply is JSON nested too deeply to check against the schema")
    try:
        import jsonschema
    except ImportError:
        return Outcome(True, True)  # parsed; the grammar enforced the shape
    try:
        jsonschema.validate(value, constraint.schema)
    except jsonschema.ValidationError as err:
        return Outcome(True, False, f"the reply does not follow the schema ({err.message})")
    except jsonschema.SchemaError as err:
        return Outcome(True, None, f"the schema itself is not valid ({err.message})")
    except RecursionError:
        return Outcome(True, None, "the schema is nested too deeply to check the reply against it")
    return Outcome(True, True)
