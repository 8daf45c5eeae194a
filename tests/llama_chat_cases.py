"""llama.cpp's own reply-parser cases, read out of its ``tests/test-chat.cpp`` (in the llama-cpp-python sdist
the suite fetches): each ``tst.test(INPUT)….run()`` chain of a ``peg_tester("models/templates/X.jinja")``
becomes a ``Case``, its expected message built by the file's own helpers (``simple_assist_msg`` and the
constants made with it) and tools (``static common_chat_tool …{name, description, parameters}``).

The C++ read here is the small part those tests use: string literals (raw, escaped, adjacent ones
joined), brace lists, names defined earlier in the file, calls of the message helpers, loops over
templates (``for (… path : {…})``), test functions given a template's path, and messages built field by
field. A chain that uses anything else is returned as unreadable, with the line and why, never guessed::

    >>> cases, unreadable = extract('''
    ... static common_chat_tool t{ "f", "d", R"({"type": "object"})" };
    ... const common_chat_msg m = simple_assist_msg("", "", "f", "{\\\\"a\\\\": 1}");
    ... auto tst = peg_tester("models/templates/X.jinja");
    ... tst.test("<call>f</call>").tools({ t }).expect(m).run();''')
    >>> (cases[0].template, cases[0].input, cases[0].tools[0]["name"], cases[0].expect.calls, unreadable)
    ('X', '<call>f</call>', 'f', (('f', '{"a": 1}', ''),), [])
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<raw>R"(?P<delim>[^(\s]*)\((?P<body>.*?)\)(?P=delim)")
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<char>'(?:[^'\\]|\\.)')
  | (?P<name>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)
  | (?P<number>\d+(?:\.\d+)?[fFuUlL]*)
  | (?P<punct>.)
""", re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", '"': b'"', "'": b"'", "\\": b"\\", "?": b"?", "a": b"\a",
            "b": b"\b", "f": b"\f", "v": b"\v"}


class Unreadable(Exception):
    """A construct this reader does not take."""


@dataclass(frozen=True)
class Token:
    kind: str  # string, name, number, punct
    value: str
    line: int


@dataclass(frozen=True)
class Message:
    """What llama.cpp's parser is to produce (``common_chat_msg``): calls as (name, arguments JSON, id)."""

    content: str = ""
    reasoning: str = ""
    calls: tuple[tuple[str, str, str], ...] = ()
    role: str = "assistant"
    tool_name: str = ""
    tool_call_id: str = ""


@dataclass(frozen=True)
class Case:
    """One ``tst.test(input)…run()`` chain: the template's stem, the model's text, the options set."""

    template: str
    line: int
    input: str
    expect: Message = Message()
    tools: tuple[dict, ...] = ()
    messages: tuple[Message, ...] = ()
    reasoning_format: str = "NONE"
    enable_thinking: bool = True
    parallel_tool_calls: bool = False
    add_generation_prompt: bool = True
    continuation: str = ""  # continue_final_message's kind; "" where the case does not continue a message
    json_schema: str = ""
    is_partial: bool = False
    tool_choice: str = ""


def _unescape(literal: str) -> str:
    """A C string literal's text (its bytes read as UTF-8)."""
    out, i, body = bytearray(), 0, literal[1:-1]
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e == "x":
            digits = re.match(r"[0-9a-fA-F]+", body[i + 2:]).group()
            out.append(int(digits, 16) & 0xFF)
            i += 2 + len(digits)
        elif e in "uU":
            n = 4 if e == "u" else 8
            out += chr(int(body[i + 2:i + 2 + n], 16)).encode("utf-8")
            i += 2 + n
        elif e in "01234567" and re.match(r"[0-7]{2,3}", body[i + 1:]):
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group()
            out.append(int(digits, 8) & 0xFF)
            i += 1 + len(digits)
        else:
            out += _ESCAPES.get(e, e.encode("utf-8"))
            i += 2
    return out.decode("utf-8", "replace")


def tokens(source: str) -> list[Token]:
    found, line = [], 1
    for m in _TOKEN.finditer(source):
        kind = m.lastgroup if m.lastgroup not in ("delim", "body") else "raw"
        if m.group("raw") is not None:
            found.append(Token("string", m.group("body"), line))
        elif m.group("string") is not None:
            found.append(Token("string", _unescape(m.group("string")), line))
        elif kind in ("name", "number", "punct"):
            found.append(Token(kind, m.group(), line))
        line += m.group().count("\n")
    return found


def _message(items: list) -> Message:
    """A message from a brace list, in ``common_chat_msg``'s field order."""
    if len(items) == 0:
        return Message()
    role, content = items[0], items[1] if len(items) > 1 else ""
    calls = tuple(_call(c) for c in items[3]) if len(items) > 3 else ()
    rest = [x if isinstance(x, str) else "" for x in items[4:7]] + ["", "", ""]
    return Message(content, rest[0], calls, role, rest[1], rest[2])


def _call(value: object) -> tuple[str, str, str]:
    """A call from a brace list: name, arguments, id (``{}``: an empty string)."""
    if isinstance(value, list):
        value = ["" if v == [] else v for v in value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Unreadable(f"a tool call given as {value!r}")
    name, arguments, call_id = (value + ["", "", ""])[:3]
    return name, arguments, call_id


def _assist(content: str, reasoning: str = "", name: str = "", arguments: str = "", call_id: str = "") -> Message:
    return Message(content, reasoning, ((name, arguments, call_id),) if name or call_id else ())


_HELPERS = {
    "simple_assist_msg": _assist,
    "message_with_tool_calls": lambda name, args: _assist("", "", name, args),
    "message_with_tool_calls_and_reasoning": lambda name, args, reasoning: _assist("", reasoning, name, args),
    "message_with_content_and_tool_call": lambda content, name, args: _assist(content, "", name, args),
    "message_with_reasoning_and_tool_call": lambda reasoning, name, args: _assist("", reasoning, name, args),
    "message_with_reasoning_content_and_multiple_tool_calls": lambda reasoning, content, calls: Message(
        content, reasoning, tuple((n, a, "") for n, a in calls)),
    "std::string": lambda text="": text,
}
_MESSAGE_FIELDS = {"role": "role", "content": "content", "reasoning_content": "reasoning", "tool_name": "tool_name",
                   "tool_call_id": "tool_call_id"}


@dataclass
class _Reader:
    toks: list[Token]
    names: dict[str, object] = field(default_factory=dict)
    testers: dict[str, list[str]] = field(default_factory=dict)
    cases: list[Case] = field(default_factory=list)
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    i: int = 0

    # --- the tokens ---------------------------------------------------------------------------------
    def at(self, *values: str, offset: int = 0) -> bool:
        j = self.i + offset
        return all(j + k < len(self.toks) and self.toks[j + k].value == v for k, v in enumerate(values))

    def take(self, value: str | None = None) -> Token:
        tok = self.toks[self.i]
        if value is not None and tok.value != value:
            raise Unreadable(f"{value!r} expected, {tok.value!r} found")
        self.i += 1
        return tok

    def skip_to(self, value: str) -> None:
        """Past the next ``value`` at this nesting depth."""
        depth = 0
        while self.i < len(self.toks):
            v = self.take().value
            if v in "({[":
                depth += 1
            elif v in ")}]":
                depth -= 1
            elif v == value and depth <= 0:
                return

    # --- expressions --------------------------------------------------------------------------------
    def expression(self) -> object:
        value = self.primary()
        while self.at("+"):
            self.take()
            right = self.primary()
            if not (isinstance(value, str) and isinstance(right, str)):
                raise Unreadable("a + of other than strings")
            value += right
        return value

    def items(self, opener: str, closer: str) -> list:
        """``opener item, item, … closer``: a brace list, or a call's arguments."""
        self.take(opener)
        found = []
        while not self.at(closer):
            found.append(self.expression())
            if self.at(","):
                self.take()
        self.take(closer)
        return found

    def primary(self) -> object:
        tok = self.take()
        if tok.kind == "string":
            text = tok.value
            while self.i < len(self.toks) and self.toks[self.i].kind == "string":
                text += self.take().value
            return text
        if tok.value == "{":
            self.i -= 1
            return self.items("{", "}")
        if tok.kind == "number":
            return int(tok.value) if tok.value.isdigit() else tok.value
        if tok.kind != "name":
            raise Unreadable(f"{tok.value!r} in an expression")
        if tok.value in ("true", "false"):
            return tok.value == "true"
        if tok.value.startswith(("COMMON_", "common_")) and not self.at("("):
            return tok.value
        if self.at("("):
            helper = _HELPERS.get(tok.value)
            if helper is None:
                raise Unreadable(f"a call of {tok.value}")
            return helper(*self.items("(", ")"))
        if tok.value not in self.names:
            raise Unreadable(f"the name {tok.value}")
        value = self.names[tok.value]
        if isinstance(value, Unreadable):
            raise value
        if self.at("."):
            raise Unreadable(f"{tok.value}.{self.toks[self.i + 1].value}")
        return value

    # --- statements ---------------------------------------------------------------------------------
    def run(self) -> None:
        loops: list[tuple[int, str]] = []  # (brace depth of the body, the loop's name)
        depth = 0
        while self.i < len(self.toks):
            start = self.i
            tok = self.toks[self.i]
            try:
                if tok.value == "{":
                    depth += 1
                elif tok.value == "}":
                    depth -= 1
                    while loops and loops[-1][0] > depth:
                        self.names.pop(loops.pop()[1], None)
                elif tok.value == "for" and self.at("(", offset=1) and self._loop(depth, loops):
                    continue
                elif tok.kind == "name" and self._statement(tok):
                    continue
            except (Unreadable, IndexError, ValueError, TypeError) as err:
                if tok.value in self.testers:  # (what else is not read matters only where a case uses it)
                    self.unreadable.append((tok.line, str(err) or type(err).__name__))
                self.i = start
                self.take()
                self.skip_to(";")
                continue
            self.i += 1

    def _loop(self, depth: int, loops: list[tuple[int, str]]) -> bool:
        """``for (const auto & NAME : { "a", "b" }) {``: NAME stands for every item in the body."""
        j = self.i
        names = [t.value for t in self.toks[j + 2:j + 6]]
        if names[:3] != ["const", "auto", "&"] or not self.at(":", offset=6) or not self.at("{", offset=7):
            return False
        self.i = j + 7
        items = self.expression()
        self.take(")")
        self.names[names[3]] = _Each(items)
        loops.append((depth + 1, names[3]))
        return True

    def _statement(self, tok: Token) -> bool:
        """A definition, a field set, a tester, or a test chain at the name ``tok``; False: none."""
        v = self.toks
        j = self.i
        if tok.value in self.testers and self.at(".", "test", offset=1):
            self.i = j + 3
            self._chain(self.testers[tok.value], tok.line)
            return True
        if tok.value == "auto" and self.at("=", "peg_tester", "(", offset=2):
            name = v[j + 1].value
            self.i = j + 5
            path = self.expression()
            paths = path.items if isinstance(path, _Each) else [path]
            self.testers[name] = [p.split("/")[-1].removesuffix(".jinja") for p in paths]
            self.skip_to(";")
            return True
        if tok.value in self.names and isinstance(self.names[tok.value], Message) and self.at(".", offset=1):
            self._set_field(tok.value)
            return True
        kinds = ("common_chat_tool", "common_chat_msg", "auto", "std::string", "char")
        if tok.value not in kinds:
            if tok.value == "std::vector" and self.at("<", "common_chat_tool", ">", offset=1):
                self.i = j + 4
                return self._define(list)
            return False
        self.i = j + 1
        while self.at("*") or self.at("const"):
            self.take()
        return self._define({"common_chat_tool": _tool, "common_chat_msg": _to_message}.get(tok.value, lambda x: x))

    def _define(self, make) -> bool:  # type: ignore[no-untyped-def]
        name = self.toks[self.i]
        if name.kind != "name" or not (self.at("=", offset=1) or self.at("{", offset=1) or self.at(";", offset=1)):
            return False
        self.take()
        if self.at(";"):
            self.names[name.value] = Message()
            return True
        if self.at("="):
            self.take()
        try:
            self.names[name.value] = make(self.expression())
        except Unreadable as err:
            self.names[name.value] = err
            self.skip_to(";")
        return True

    def _set_field(self, name: str) -> None:
        message = self.names[name]
        self.take()
        self.take(".")
        key = self.take().value
        if key == "tool_calls" and self.at(".", "push_back", "("):
            self.i += 3
            call = _call(self.expression())
            self.names[name] = replace(message, calls=message.calls + (call,))
            self.take(")")
            return
        if key not in _MESSAGE_FIELDS:
            raise Unreadable(f"the field {key}")
        self.take("=")
        self.names[name] = replace(message, **{_MESSAGE_FIELDS[key]: self.expression()})

    def _chain(self, templates: list[str], line: int) -> None:
        """``.test(INPUT).option(…)….run()``: one case per template."""
        self.take("(")
        case = Case("", line, self.expression())
        self.take(")")
        while not self.at(".", "run"):
            self.take(".")
            method = self.take().value
            case = _option(case, method, self.items("(", ")"))
        self.skip_to(";")
        self.cases += [replace(case, template=t) for t in templates]


class _Each:
    """A loop's name: each of ``items`` in turn."""

    def __init__(self, items: object):
        if not isinstance(items, list):
            raise Unreadable("a loop over other than a brace list")
        self.items = items


def _tool(value: object) -> dict:
    if not isinstance(value, list) or len(value) != 3:
        raise Unreadable("a tool not written as {name, description, parameters}")
    name, description, parameters = value
    return {"name": name, "description": description, "parameters": json.loads(parameters)}


def _to_message(value: object) -> Message:
    return value if isinstance(value, Message) else _message(value)  # type: ignore[arg-type]


_ENUM = re.compile(r"COMMON_(?:REASONING_FORMAT|CHAT_CONTINUATION|CHAT_TOOL_CHOICE)_(\w+)")


def _option(case: Case, method: str, args: list) -> Case:
    arg = args[0] if args else True
    enum = _ENUM.fullmatch(arg).group(1) if isinstance(arg, str) and _ENUM.fullmatch(arg) else None
    if method == "expect":
        return replace(case, expect=_to_message(arg))
    if method == "expect_content":
        return replace(case, expect=replace(case.expect, content=arg))
    if method == "expect_reasoning":
        return replace(case, expect=replace(case.expect, reasoning=arg))
    if method == "expect_tool_calls":
        return replace(case, expect=replace(case.expect, calls=tuple(_call(c) for c in arg)))
    if method == "tools":
        return replace(case, tools=tuple(t if isinstance(t, dict) else _tool(t) for t in arg))  # (or written inline)
    if method == "messages":
        return replace(case, messages=tuple(_to_message(m) for m in arg))
    simple = {"reasoning_format": enum, "enable_thinking": arg, "parallel_tool_calls": arg,
              "add_generation_prompt": arg, "continue_final_message": enum, "json_schema": arg, "is_partial": arg,
              "tool_choice": enum}
    if method == "expect_reconstruction":
        return case
    if method not in simple:
        raise Unreadable(f"the option {method}")
    key = "continuation" if method == "continue_final_message" else method
    return replace(case, **{key: simple[method]})


def extract(source: str) -> tuple[list[Case], list[tuple[int, str]]]:
    """Every test chain of ``source`` (test-chat.cpp's text): the cases, and (line, why) of what was not read."""
    reader = _Reader(tokens(source))
    for function, parameter in re.findall(r"static void (\w+)\(const std::string & (\w+)", source):
        paths = re.findall(rf'\b{function}\("([^"]+)"', source)  # (a test function run on templates it is given,
        for name in re.findall(rf"\b{function}\((\w+)", source):  # by name or by a loop's name)
            loop = rf"for \((?:const auto &|const char \*) {name}\s*:\s*\{{([^}}]*)\}}\)\s*\{{\s*{function}\("
            for items in re.findall(loop, source):
                paths += re.findall(r'"([^"]+)"', items)
        if paths:
            reader.names[parameter] = _Each(paths)
    reader.run()
    return reader.cases, reader.unreadable
