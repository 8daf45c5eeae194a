"""The tools of a session: their definitions for the template, the grammars a call is written under, and
each call run with the user's consent and a timeout, its result as text (the loop that hands results back
and runs the next turn is loop.py).

Nothing runs without consent: ``approve(call)`` answers for each call (the REPL asks the user; ``-p`` and
``--batch`` allow calls only with ``--tools-approve``). A refused, failed, hung or interrupted call is
the tool's result, an error text the model reads, never a crash.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence

from tokenizer.chat.reasoning import Reasoning
from tokenizer.chat.tool_calls import CallSyntax, ToolCall

from ..core.gbnf import WholeReply, thought_then_call
from ..engines.base import LazyGrammar, ecma_escaped
from ..engines.runtime import schema_to_gbnf
from .apart import Outcome, apart_call
from .functions import Tool, one_line
from .grammar import call_grammar

CHOICES = ("auto", "required", "none")
MAX_CALLS = 8  # a turn's calls: more get an error result, and the model answers
MAX_RESULT_BYTES = 64 * 1024  # a tool's or MCP server's result, before it is even tokenized
MAX_RESULT_SHARE = 4  # and at most a quarter of the context, in tokens: the rest is cut, and the model told


class Toolbox:
    """Tools by name, those switched on (``/tools``), the template's call syntax and the consent rule."""

    def __init__(self, tools: Sequence[Tool], syntax: CallSyntax, *, choice: str = "auto", timeout: float = 30.0,
                 approve: Callable[[ToolCall], bool] = lambda call: False, markers: Mapping[str, int] | None = None):
        self.tools = {t.name: t for t in tools}
        self.enabled = set(self.tools)
        self.syntax, self.choice, self.timeout, self.approve = syntax, choice, timeout, approve
        self.markers = dict(markers or {})  # the syntax's special tokens: the grammar writes each as its token
        self.shown: Callable[[str], None] = lambda line: None  # where a call's one line goes
        self._next_id = 0

    def definitions(self) -> list[dict]:
        return [t.definition() for name, t in self.tools.items() if name in self.enabled]

    def schemas(self) -> dict[str, Mapping]:
        """Each tool's parameters by its name (a call's arguments written as text are typed by them)."""
        return {name: tool.parameters for name, tool in self.tools.items()}

    def listing(self) -> list[str]:
        """A line a tool: on or off, its name, where it came from, its description's first line."""
        return [f"{'on ' if name in self.enabled else 'off'}  {name}  ({tool.source})  "
                f"{tool.description.splitlines()[0] if tool.description else ''}".rstrip()
                for name, tool in self.tools.items()]

    def switch(self, name: str, on: bool) -> str:
        """Turn a tool (or ``all``) on or off: "" when it took, else why not."""
        names = list(self.tools) if name == "all" else [name]
        if any(n not in self.tools for n in names):
            return f"no tool {name!r}; the tools are {', '.join(self.tools)}"
        (self.enabled.update if on else self.enabled.difference_update)(names)
        return ""

    def grammar(self, whole: bool = False) -> str:
        """The call grammar of the tools switched on: from the trigger, or ``whole`` from the reply's start."""
        return call_grammar(self.syntax, [t for n, t in self.tools.items() if n in self.enabled], schema_to_gbnf,
                            whole=whole, markers=self.markers)

    def _addressed(self) -> tuple[str, ...]:
        """How a call that starts the reply opens, where the model writes a recipient first (functionary
        v3.2: the tool's name and a newline); () for the rest."""
        syntax = self.syntax
        return tuple(n + syntax.after_name for n in self.tools if n in self.enabled) if syntax.text_lead else ()

    def lazy_grammar(self) -> LazyGrammar:
        """The call grammar from its trigger on; where the model writes a recipient first, from a tool's
        name at the reply's start too (llama.cpp's patterns: the grammar starts at the first group)."""
        trigger = self.syntax.trigger()
        if not self._addressed():
            return LazyGrammar(self.grammar(), [trigger])
        names = "|".join(ecma_escaped(a) for a in self._addressed())
        return LazyGrammar(self.grammar(), [trigger], (f"^((?:{names}))", f"({ecma_escaped(trigger)}(?:{names}))"),
                           self._addressed())

    def required_grammar(self, reasoning: Reasoning | None) -> str:
        """A required call's grammar: after a free thought where the template writes one before a call; else
        from the reply's start, and where thought and answer are channels (gpt-oss) the call is the whole
        reply, a message of its own (not after the final channel's opening, which answers rather than calls)."""
        if reasoning is not None and reasoning.channels() is not None:
            return thought_then_call(WholeReply(self.grammar(whole=True)), reasoning)
        return self.grammar(whole=not self._thinks_first(reasoning))

    def _thinks_first(self, reasoning: Reasoning | None) -> bool:
        """Whether a required call may follow a thought: the model has thoughts and what the template writes
        before a call is its (empty) thought, so the call's grammar starts at the call (``gbnf.after_thought``
        puts the thought, free, before it)."""
        lead = self.syntax.lead.strip()
        return reasoning is not None and bool(lead) and lead.endswith(reasoning.close.strip())

    def new_id(self) -> str:
        """An id for a call the model gave none: nine letters and digits, as Mistral's templates want."""
        self._next_id += 1
        return f"call{self._next_id:05d}"

    def run(self, call: ToolCall, refused: str = "") -> str:
        """The call's result as text: the tool's, or an error text (unknown, refused, raised, timed out);
        ``refused``: why the call is not run at all (its error text, shown as every call's outcome is)."""
        line = f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)})"
        if refused:
            return self._said(line, f"error: {refused}")
        tool = self.tools.get(call.name)
        if tool is None or call.name not in self.enabled:
            return self._said(line, f"error: there is no tool {call.name!r}; the tools are {', '.join(sorted(self.enabled))}")
        if not self.approve(call):
            return self._said(line, "error: the user did not allow this call")
        run = apart_call if tool.apart else _threaded_call  # (a Python tool in a child: it can be ended)
        outcome = run(tool.run, call.arguments, _as_text, self.timeout)
        if outcome.printed.strip():
            self.shown(f"note: tool {call.name!r} printed: {one_line(outcome.printed)}")
        if outcome.kind == "interrupted":
            return self._said(line, "error: the user interrupted the call")
        if outcome.kind == "timeout":
            return self._said(line, f"error: the tool did not answer within {self.timeout:g} s")
        if outcome.kind == "error":
            return self._said(line, f"error: the tool raised {outcome.text}")
        return self._said(line, outcome.text)

    def _said(self, line: str, outcome: str) -> str:
        self.shown(f"tool call: {line} -> {outcome if len(outcome) <= 120 else outcome[:117] + '...'}")
        return outcome


def _threaded_call(run: Callable[[dict], object], arguments: dict, as_text: Callable[[object], str],
                   timeout: float) -> Outcome:
    """A call over a connection (an MCP server's tool), in a thread waited on for ``timeout`` seconds: it
    prints nothing here, and a call left waiting ends with its server."""
    box: dict[str, str] = {}

    def work() -> None:
        try:
            box["value"] = as_text(run(arguments))
        except BaseException as err:  # the tool's own failure is its result
            box["error"] = f"{type(err).__name__}: {err}"

    worker = threading.Thread(target=work, daemon=True, name="tool call")
    worker.start()
    try:
        worker.join(timeout)
    except KeyboardInterrupt:
        return Outcome("interrupted")
    if worker.is_alive():
        return Outcome("timeout")
    return Outcome("error", box["error"]) if "error" in box else Outcome("value", box.get("value", ""))


def _as_text(value: object) -> str:
    """A tool's result as the text the model reads, cut at ``MAX_RESULT_BYTES`` (UTF-8) with a note."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as err:
            return f"error: the tool's result is not JSON ({err})"
    data = value.encode("utf-8", "replace")
    if len(data) <= MAX_RESULT_BYTES:
        return value
    kept = data[:MAX_RESULT_BYTES].decode("utf-8", "ignore")  # (a character cut in two is left out)
    return f"{kept}\n[the tool's result was cut here: {MAX_RESULT_BYTES} of its {len(data)} bytes]"


def capped(result: str, encode: Callable[[str], list[int]], limit: int) -> str:
    """A result cut to ``limit`` tokens, the model told where and how much was left out::

        >>> print(capped("one two three four", lambda t: t.split(), 2))
        one two
        [the tool's result was cut here: 2 of its 4 tokens]
    """
    ids = encode(result)
    if len(ids) <= limit:
        return result
    kept = _prefix_of_tokens(result, encode, limit)
    return f"{kept.rstrip()}\n[the tool's result was cut here: {limit} of its {len(ids)} tokens]"


def _prefix_of_tokens(text: str, encode: Callable[[str], list[int]], limit: int) -> str:
    """The longest start of ``text`` (at a character) that encodes to at most ``limit`` tokens."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if len(encode(text[:middle])) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]
