"""The tools of a session and the turns they take: a call parsed off the reply by the template's own
syntax, run with the user's consent and a timeout, its result handed back as the template's tool message,
and the model's next turn generated after it (the cache holds the conversation: only the call's end and
the result are evaluated).

Nothing runs without consent: ``approve(call)`` answers for each call (the REPL asks the user; ``-p`` and
``--batch`` allow calls only with ``--tools-approve``). A refused, failed, hung or interrupted call is
the tool's result, an error text the model reads, never a crash.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial

from tokenizer.chat.tool_calls import CallSyntax, ToolCall, render_calls, tool_message

from ..core.continuation import Prefill
from ..core.gbnf import WholeReply, thought_then_call
from ..core.session import ChatSession, ToolResult, TurnResult
from ..core.structured import Constraint
from ..engines.base import LazyGrammar, Progress, ecma_escaped, triggers_of
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

    def exchange(self, session: ChatSession, text: str | None, emit: Callable[[str], None],
                 notify: Callable[[str], None], progress: Progress | None, think: Callable[[str], None] | None,
                 ctrl_c_ends_thought: bool = False, prefill: Prefill | None = None) -> TurnResult:
        """The user's turn (None: the reply goes on from ``prefill``, or is made again), then a turn after each
        round of calls, until the model answers without one."""
        turn = partial(self._turn, session, emit=emit, notify=notify, progress=progress, think=think,
                       ctrl_c_ends_thought=ctrl_c_ends_thought)
        if self.choice == "none":
            return session.turn(text, emit, notify, progress, think=think, ctrl_c_ends_thought=ctrl_c_ends_thought,
                                prefill=prefill)
        lazy = Constraint(self._lazy(), None, "--tool-choice auto")
        first = Constraint(self._required(session), None, "--tool-choice required") if self.choice == "required" else lazy
        result = turn(text, constraint=first, prefill=prefill)
        steps, records = [result.generation], []
        while len(records) <= MAX_CALLS:  # (past the limit, the model's last turn is its answer, whatever it says)
            calls = self._calls(session, notify)
            if not calls:
                break
            for call in calls:
                outcome = self.run(call) if len(records) < MAX_CALLS else \
                    f"error: this turn's limit of {MAX_CALLS} tool calls is reached; answer without more calls"
                outcome = capped(outcome, session.model.tokenizer.encode, session.engine.n_ctx // MAX_RESULT_SHARE)
                records.append(ToolResult(call, outcome))
                session.conversation.messages.append(tool_message(call, outcome))
            session.prompt_filter = partial(own_ids, session.engine.cached_ids(), decode=session.model.tokenizer.decode)
            try:
                result = turn(None, constraint=lazy if len(records) < MAX_CALLS else None)
            finally:
                session.prompt_filter = None
            steps.append(result.generation)
        result.tool_calls, result.steps = records, steps
        return result

    def _addressed(self) -> tuple[str, ...]:
        """How a call that starts the reply opens, where the model writes a recipient first (functionary
        v3.2: the tool's name and a newline); () for the rest."""
        syntax = self.syntax
        return tuple(n + syntax.after_name for n in self.tools if n in self.enabled) if syntax.text_lead else ()

    def _lazy(self) -> LazyGrammar:
        """The call grammar from its trigger on; where the model writes a recipient first, from a tool's
        name at the reply's start too (llama.cpp's patterns: the grammar starts at the first group)."""
        trigger = self.syntax.trigger()
        if not self._addressed():
            return LazyGrammar(self.grammar(), [trigger])
        names = "|".join(ecma_escaped(a) for a in self._addressed())
        return LazyGrammar(self.grammar(), [trigger], (f"^((?:{names}))", f"({ecma_escaped(trigger)}(?:{names}))"))

    def _required(self, session: ChatSession) -> str:
        """A required call's grammar: after a free thought where the template writes one before a call; else
        from the reply's start, and where thought and answer are channels (gpt-oss) the call is the whole
        reply, a message of its own (not after the final channel's opening, which answers rather than calls)."""
        r = session.model.reasoning
        if r is not None and r.channels() is not None:
            return thought_then_call(WholeReply(self.grammar(whole=True)), r)
        return self.grammar(whole=not self._thinks_first(session))

    def _thinks_first(self, session: ChatSession) -> bool:
        """Whether a required call may follow a thought: the model has thoughts and what the template writes
        before a call is its (empty) thought, so the call's grammar starts at the call (``gbnf.after_thought``
        puts the thought, free, before it)."""
        r = session.model.reasoning
        return r is not None and bool(self.syntax.lead.strip()) and self.syntax.lead.strip().endswith(r.close.strip())

    @staticmethod
    def _turn(session: ChatSession, text: str | None, *, emit: Callable[[str], None], notify: Callable[[str], None],
              progress: Progress | None, constraint: Constraint | None, think: Callable[[str], None] | None,
              ctrl_c_ends_thought: bool, prefill: Prefill | None = None) -> TurnResult:
        """One turn whose reply may call (its calls read, not shown), under the call grammar (lazy: free text
        until a call opens, which is not judged)."""
        result = session.turn(text, emit, notify, progress, constraint=constraint, think=think, calls=True,
                              ctrl_c_ends_thought=ctrl_c_ends_thought, prefill=prefill)
        if constraint is not None and triggers_of(constraint.gbnf):
            result.outcome = None
        return result

    def _calls(self, session: ChatSession, notify: Callable[[str], None]) -> list[ToolCall]:
        """The calls of the reply just recorded (as the reply parser read them), its message rewritten as the
        template takes a call; a call the model gave an id keeps it."""
        message = session.conversation.messages[-1] if session.conversation.messages else {}
        last = session.last
        if message.get("role") != "assistant" or message.get("cut") or last is None or last.message is None:
            return []
        read = last.message
        if last.generation.stop_reason not in ("stop", "stop_string") and (read.tool_calls or read.problem):
            notify(f"tools: the reply was cut ({last.generation.stop_reason}) inside a call, which is not run")
            return []
        if read.problem:
            notify(f"tools: {read.problem}; the reply is kept as text")
            return []
        if not read.tool_calls:
            return []
        # A call nested in a thought that never closed: the thought ends where the call begins.
        if last.ended_in_thought and not read.ended_in_thought:
            message["reasoning"] = read.reasoning
        calls = [c if c.id else replace(c, id=self._new_id()) for c in read.tool_calls]
        # The message as the template takes a call: OpenAI's shape where CallSyntax asks for it, else the
        # call in the content too (tool_table.py).
        if not self.syntax.in_content:
            message["content"] = "" if self.syntax.content_none else read.content  # (None at rendering)
        message["tool_calls"] = render_calls(calls, self.syntax.string_arguments)
        return calls

    def _new_id(self) -> str:
        self._next_id += 1
        return f"call{self._next_id:05d}"  # nine letters and digits, as Mistral's templates want

    def run(self, call: ToolCall) -> str:
        """The call's result as text: the tool's, or an error text (unknown, refused, raised, timed out)."""
        line = f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)})"
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


def own_ids(cached: Sequence[int], ids: list[int], decode: Callable[[list[int]], str]) -> list[int]:
    """``ids`` with the model's own tokens for the call it just wrote: where the prompt's text goes on as the
    cached ids' text does (the template writes the call back as the model wrote it) but the tokens part
    (the model, under the grammar, split it its own way), the cached ids up to the end of that text, then
    the prompt's own ids from the next token boundary on. So only the call's end and the result are
    evaluated. Anything else (a text that differs, no boundary) leaves ``ids`` as they are::

        cached  [.. 7 8 9]   "<tool_call>" "{\"" "name"        (the model's split)
        ids     [.. 7 5 6 2]  "<tool_call>" "{\"name" <|im_end|>
        ->      [.. 7 8 9 2]
    """
    common = next((i for i, (a, b) in enumerate(zip(cached, ids)) if a != b), min(len(cached), len(ids)))
    if common == len(cached):
        return ids
    tail = decode(list(cached[common:]))
    for end in range(common + 1, len(ids) + 1):
        text = decode(ids[common:end])
        if text == tail:
            return list(cached) + ids[end:]
        if len(text) >= len(tail) or not tail.startswith(text):
            return ids
    return ids


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
