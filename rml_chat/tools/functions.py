"""``--functions FILE.py``: a Python file's public functions as tools (llm's convention).

Each function defined in the file whose name does not start with ``_`` becomes a tool: its name, its
docstring as the description, and a JSON Schema of its parameters built from the signature's type hints
(``str`` string, ``int`` integer, ``float`` number, ``bool`` boolean, ``list`` array, ``dict`` object; a
parameter with a default is optional). A docstring's ``Args:`` section (Google style, as transformers'
``get_json_schema`` reads it) describes the parameters; some templates write every parameter's description
(Command R+). Example::

    def get_weather(city: str, days: int = 1) -> str:
        '''The weather of a city.

        Args:
            city: The city's name.
        '''
    -> {"name": "get_weather", "description": "The weather of a city.", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "description": "The city's name."}, "days": {"type": "integer"}},
        "required": ["city"]}}

The file runs when it is loaded, as ``llm --functions`` runs it: it is the user's own code.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import io
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass

from ..core.paths import user_path
from ..errors import NOT_A_FILE, Terminated, UsageError

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


@dataclass(frozen=True)
class Tool:
    """One tool: what the template is told of it, and how to run it (``run(arguments)``)."""

    name: str
    description: str
    parameters: dict
    run: Callable[[dict], object]
    source: str
    apart: bool = False  # the user's Python: each call in a process of its own (``apart.py``)

    def definition(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


def _schema(hint: object) -> dict:
    """A type hint as JSON schema: the plain types, ``list[X]``, ``Literal`` (an enum), ``Optional[X]`` and
    unions (``anyOf``); a hint it can't say anything of allows any value::

        >>> _schema(typing.Optional[typing.Literal["c", "f"]])
        {'anyOf': [{'type': 'string', 'enum': ['c', 'f']}, {'type': 'null'}]}
        >>> _schema(list[int]), _schema(object)
        ({'type': 'array', 'items': {'type': 'integer'}}, {})
    """
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return {"type": "null"}
    if origin is typing.Literal:
        kinds = {JSON_TYPES.get(type(a)) for a in arguments}
        return {**({"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}), "enum": list(arguments)}
    if origin is typing.Union or origin is types.UnionType:
        return {"anyOf": [_schema(a) for a in arguments]}
    kind = JSON_TYPES.get(origin or hint)  # type: ignore[call-overload]
    if kind == "array" and arguments:
        return {"type": kind, "items": _schema(arguments[0])}
    return {"type": kind} if kind else {}


def _hints(function: Callable) -> dict[str, object]:
    """The function's type hints; where some can't be resolved (a name imported only under
    ``TYPE_CHECKING``), each that can, the rest ``object`` (any value)."""
    try:
        return typing.get_type_hints(function)
    except Exception:  # (NameError, or whatever a hint's own code raises)
        hints: dict[str, object] = {}
        for name, annotation in getattr(function, "__annotations__", {}).items():
            try:
                hints[name] = eval(annotation, function.__globals__) if isinstance(annotation, str) else annotation  # noqa: S307
            except Exception:  # (the user's own names and code): any value
                hints[name] = object
        return hints


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?):\s*$", re.M)
_ARG = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def _documented(doc: str) -> tuple[str, dict[str, str]]:
    """(the docstring's text before its sections, each parameter's description from its ``Args:``)."""
    sections = _SECTION.split(doc)
    described: dict[str, str] = {}
    for title, body in zip(sections[1::2], sections[2::2]):
        if title not in ("Args", "Arguments", "Parameters"):
            continue
        name, indent = "", 0
        for line in body.splitlines():
            arg = _ARG.match(line.strip())
            if arg and (not name or len(line) - len(line.lstrip()) <= indent):
                name, indent = arg.group(1), len(line) - len(line.lstrip())
                described[name] = arg.group(2).strip()
            elif name and line.strip():
                described[name] = f"{described[name]} {line.strip()}".strip()
    return sections[0].strip(), described


def tool_of(function: Callable, source: str) -> Tool:
    """A function as a tool, its schema read off its signature and its docstring; an ``async def`` runs to
    its end. UsageError for one that can't be called by its arguments' names (a lambda has no name to
    call, a positional-only parameter takes no name)."""
    if function.__name__ == "<lambda>":
        raise UsageError(f"{source}: a lambda can't be a tool (it has no name the model can call); give it a def")
    positional = [n for n, p in inspect.signature(function).parameters.items() if p.kind == p.POSITIONAL_ONLY]
    if positional:
        raise UsageError(f"{source}: {function.__name__!r} can't be a tool: its parameter {positional[0]!r} is "
                         "positional-only, and a call names every argument")
    hints = _hints(function)
    description, described = _documented(inspect.getdoc(function) or "")
    properties, required = {}, []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        properties[name] = _schema(hints.get(name, str))
        if described.get(name):
            properties[name]["description"] = described[name]
        if parameter.default is parameter.empty:
            required.append(name)
    schema = {"type": "object", "properties": properties, "required": required}
    if inspect.iscoroutinefunction(function):
        return Tool(function.__name__, description, schema, lambda arguments: asyncio.run(function(**arguments)), source,
                    apart=True)
    return Tool(function.__name__, description, schema, lambda arguments: function(**arguments), source, apart=True)


def load_functions(path: str, note: Callable[[str], None] = lambda line: None) -> list[Tool]:
    """The public functions of a Python file as tools; UsageError for a file that can't be read or run.
    What the file prints while it loads goes to ``note``, never to stdout (where the reply goes)."""
    file = user_path(path)
    if not file.exists():
        raise UsageError(f"--functions {path}: no such file")
    if not file.is_file():
        raise UsageError(f"--functions {path}: {NOT_A_FILE}; give a Python file's path")
    spec = importlib.util.spec_from_file_location(f"rml_chat_functions_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise UsageError(f"--functions {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    printed = io.StringIO()  # (the file's own prints are none of our stdout's: a note)
    try:
        with contextlib.redirect_stdout(printed):
            spec.loader.exec_module(module)
    except Exception as err:  # the user's code: whatever it raises is one line
        raise UsageError(f"--functions {path}: the file failed to run ({type(err).__name__}: {err})") from None
    except SystemExit as err:
        if isinstance(err, Terminated):  # (a signal while the file ran: the run ends, as anywhere)
            raise
        raise UsageError(f"--functions {path}: the file called exit() while loading") from None
    tools = [tool_of(f, f"--functions {file.name}") for name, f in vars(module).items()
             if inspect.isfunction(f) and f.__module__ == module.__name__ and not name.startswith("_")]
    if printed.getvalue():
        note(f"note: --functions {file.name} printed while it loaded: {one_line(printed.getvalue())}")
    if not tools:
        raise UsageError(f"--functions {path}: the file defines no public function")
    return tools


def one_line(text: str, limit: int = 200) -> str:
    """Printed text as one line of a note: its lines joined, cut at ``limit`` characters."""
    joined = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."
