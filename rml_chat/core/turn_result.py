"""What a turn gives back, typed: the reply, its generation (or each step's, with tool calls), the message
the reply parser read, the calls run and their results, and why the reply ended, with what to do about it
where it was cut (``TurnResult.cut_note``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenizer.chat.tool_calls import ToolCall

from ..engines.base import Generation
from .read_reply import ParsedReply
from .structured import Outcome


@dataclass(frozen=True)
class ToolResult:
    """A call the model made and what it got back: the tool's result, or an error text (refused, unknown,
    failed, timed out)."""

    call: ToolCall
    result: str

    def as_json(self) -> dict:
        return {"name": self.call.name, "arguments": self.call.arguments, "id": self.call.id, "result": self.result}


@dataclass
class TurnResult:
    reply: str
    generation: Generation
    prompt_ids: list[int]
    dropped: int = 0  # exchanges dropped to fit
    outcome: Outcome | None = None  # complete / valid, under a schema or grammar
    stopped_by: str | None = None  # the user's stop string that ended the reply
    max_tokens: int = -1  # the -n it ran under
    shifts: int = 0  # times the window moved during the reply (--context-shift)
    reasoning: str = ""  # the thought, as shown (a reasoning model's; "" for the rest)
    reasoning_tokens: int = 0  # the reply's tokens inside the thought
    context_tokens: int = -1  # the context in use at the end (-1: the prompt and the reply's tokens)
    tool_calls: list[ToolResult] = field(default_factory=list)  # the turn's calls and their results, in order
    ended_in_thought: bool = False  # the reply ended inside its thought (never closed)
    written: str = ""  # the reply as the model wrote it, control tokens as their text
    message: ParsedReply | None = None  # the reply read: its content, its thought, its calls (None: no reply)
    opened_in_thought: bool = False  # the prompt opened the thought
    steps: list[Generation] = field(default_factory=list)  # a turn with tool calls: each step's generation, in order
    looped: int = 0  # stop reason "repetition": the tokens of the repeated span the guard saw

    @property
    def generations(self) -> list[Generation]:
        """Every generation of the turn: one per step of a turn with tool calls, else the one."""
        return self.steps or [self.generation]

    def cut_note(self, n_ctx: int, repl: bool = False) -> str:
        """"" for a reply that ended as the model ended it, else what cut it: -n, a full context, a stop
        string, or nothing at all (an empty reply), with what to do about it (``repl``: in the REPL's words)."""
        g = self.generation
        inside = f" inside its thought ({self.reasoning_tokens} tokens), with no answer" if self.ended_in_thought else ""
        if g.stop_reason == "length":
            return (f"reply cut at -n {self.max_tokens} tokens{inside}" +
                    ("; /continue goes on, /set n -1 lets replies run to their end" if repl else ""))
        if g.stop_reason == "context":
            return (f"reply cut{inside}: the context is full ({n_ctx} tokens); " +
                    ("/clear, or start with a larger -c" if repl else "-c/--ctx-size gives a larger one"))
        if self.stopped_by is not None:
            return f"reply stopped at the stop string {self.stopped_by!r}{inside}"
        if g.stop_reason == "repetition":
            return (f"reply stopped: it had repeated one span for {self.looped} tokens{inside} (the repeat guard; " +
                    ("/set repeat-guard 0 lets such a reply run)" if repl else "--repeat-guard 0 lets such a reply run)"))
        if g.stop_reason == "stop" and not self.reply.strip():
            if self.ended_in_thought:
                return (f"the reply is empty: the model ended its turn inside its thought ({self.reasoning_tokens} "
                        "tokens), which never closed")
            if self.reasoning_tokens:
                return f"the reply is empty: the model ended its turn after its thought ({self.reasoning_tokens} tokens)"
            return "the reply is empty: the model ended its turn at once" + (
                " (its grammar or schema allows an empty reply)" if self.outcome is not None else "")
        return ""

    @property
    def context_used(self) -> int:
        return self.context_tokens if self.context_tokens >= 0 else len(self.prompt_ids) + len(self.generation.tokens)
