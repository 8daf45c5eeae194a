"""A conversation and the turns that grow it: format, encode, fit the context, generate, stream.

Each turn formats the whole conversation and encodes it with our tokenizer; the encoder caches the ids
of every text run, so only the new message is tokenized, and llama.cpp evaluates only the ids after the
prefix its KV cache already holds.

Overflow: when the prompt plus room for a reply does not fit the context, ``drop-oldest`` moves the
model's window past whole exchanges from the start (the system message stays; the transcript keeps every
message) and says so; ``error`` refuses the turn. The user's message is kept either way. When a reply
itself fills the context, ``context_shift`` (``--context-shift on``, with ``drop-oldest``) moves the window
the same way and the reply goes on from the ids it has so far; off (the default), the reply is cut.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from tokenizer.chat.tool_calls import CallSyntax

from ..engines.base import Engine, Generation, Progress, Sampling, common_prefix
from ..errors import AppError
from ..words import counted
from .conversation import ChatError, Conversation
from .gbnf import ThoughtThenCall, for_reply, thought_free
from .loop_guard import LoopGuard
from .model import Model
from .read_reply import ParsedReply, ReplyFormat
from .reply import AnswerText, ReplyEvent, ReplyParser, ThoughtText
from .settings import sampling_value
from .structured import Constraint, Outcome, judge

__all__ = ["OVERFLOW_POLICIES", "ChatError", "ChatSession", "Conversation", "Toolbox", "TurnResult"]

OVERFLOW_POLICIES = ("drop-oldest", "error")


class Toolbox(Protocol):
    """What a session holds of its tools (rml_chat/tools/toolbox.py): the template's call syntax, and
    ``markers``, its special tokens (a reply's call is read with those that are control tokens)."""

    syntax: CallSyntax
    markers: Mapping[str, int]

    def definitions(self) -> list[dict]: ...

    def schemas(self) -> dict[str, Mapping]: ...

    def listing(self) -> list[str]: ...

    def switch(self, name: str, on: bool) -> str: ...

    def exchange(self, session: ChatSession, text: str, emit: Callable[[str], None], notify: Callable[[str], None],
                 progress: Progress | None, think: Callable[[str], None] | None) -> TurnResult: ...


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
    tool_calls: list[dict] = field(default_factory=list)  # {name, arguments, result} of the turn's calls
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
                    ("; /set n -1 lets replies run to their end" if repl else ""))
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


class ChatSession:
    """A model, an engine and a conversation; ``turn`` runs one exchange."""

    def __init__(self, model: Model, engine: Engine, sampling: Sampling, *, overflow: str = "drop-oldest",
                 stop_strings: tuple[str, ...] = (), thinking: bool | None = None, context_shift: bool = False):
        self.model = model
        self.engine = engine
        self.sampling = sampling
        self.overflow = overflow
        self.user_stops = tuple(stop_strings)  # --stop: a reply they end was cut (the format's own end it)
        self.reply_format = ReplyFormat.of_model(model, None, self.user_stops)  # (with the call syntax in a tool turn)
        self.stop_strings = self.reply_format.stop_strings
        self.thinking = thinking
        self.reasoning_effort: str | None = None  # the template's reasoning_effort (None: its default)
        self.context_shift = context_shift  # a reply that fills the context moves the window and goes on
        self._ids: list[int] = []  # the prompt ids of the reply's last call (the window's, after a shift)
        self._looped = 0  # the last reply's repeated tokens when the loop guard ended it
        self._since_shift: list[int] = []  # the reply's tokens generated since the window last moved
        self._think: Callable[[str], None] | None = None
        self.conversation = Conversation()
        self.last: TurnResult | None = None
        self.autosave_path: Path | None = None  # set when resumed from an autosave: saving goes on there
        self.constraint: Constraint | None = None  # a JSON schema or a grammar every reply follows
        self.hide_thinking = False  # front ends leave the thought out of what they show
        self.thinking_display = "full"  # the REPL's: the thought whole, or one line (frontends/thought_view.py)
        self.ctrl_c_ends_thought = False  # the REPL's: the first Ctrl-C during a thought ends the thought
        #: where each sampling setting came from (core/sampling_sources.py): flag, /set, the model, llama.cpp
        self.sampling_sources: dict[str, str] = {}
        self.toolbox: Toolbox | None = None  # tools the model may call (rml_chat/tools): their turns run there
        self.prompt_filter: Callable[[list[int]], list[int]] | None = None  # (a tool call's own ids kept)
        reasoning = model.reasoning
        if reasoning is not None:  # (gpt-oss's <|end|> is a stop id too: it ends the analysis, not the reply)
            close_ids = model.tokenizer.encode(reasoning.close, parse_special=True)
            self._thought_stops = set(close_ids[:1]) & set(model.stop_ids)
            self._close_ids = model.tokenizer.encode(reasoning.close_written or reasoning.close, parse_special=True)
        else:
            self._thought_stops, self._close_ids = set(), []

    def twin(self, engine: Engine) -> ChatSession:
        """The same model and settings over another engine, with a conversation of its own (``--batch
        -np``: one a line)."""
        other = copy.copy(self)
        other.engine, other.conversation, other.last, other._ids, other._since_shift = engine, Conversation(), None, [], []
        return other

    def prompt_ids(self, add_generation_prompt: bool = True) -> list[int]:
        encoder = self.model.encoder
        tools = self.toolbox.definitions() if self.toolbox is not None else None
        segments = encoder.format(self.conversation.for_prompt(self.model.reasoning), add_generation_prompt,
                                  thinking=self.thinking, effort=self.reasoning_effort,
                                  **({"tools": tools} if tools else {}))
        ids = encoder.encode(segments)
        return self.prompt_filter(ids) if self.prompt_filter is not None else ids

    def exchange(self, text: str, emit: Callable[[str], None], notify: Callable[[str], None],
                 progress: Progress | None = None, think: Callable[[str], None] | None = None,
                 constraint: Constraint | None = None) -> TurnResult:
        """The user's message and everything it leads to: ``turn``, or with tools, the turns of the calls
        the model makes and of their results (``Toolbox.exchange``). A schema or grammar (``constraint``,
        else the session's) shapes the whole reply, so such a turn makes no call."""
        constraint = constraint or self.constraint
        if constraint is not None or self.toolbox is None or not self.toolbox.definitions():
            return self.turn(text, emit, notify, progress, constraint=constraint, think=think)
        return self.toolbox.exchange(self, text, emit, notify, progress, think)

    def reply_room(self) -> int:
        """Tokens kept free for the reply when deciding whether a prompt fits."""
        wanted = self.sampling.max_tokens if self.sampling.max_tokens > 0 else 256
        return min(wanted, self.engine.n_ctx // 4)

    def _fit(self, notify: Callable[[str], None]) -> tuple[list[int], int]:
        """The prompt, fitted to the context. On overflow whole exchanges leave the window from its start (the
        system message stays, the transcript keeps them) until a quarter of the context is free, so that it happens rarely, as
        llama.cpp's context shift does; the cache keeps the tokens of what is kept (``Engine.shift``)."""
        ids = self.prompt_ids()
        limit = self.engine.n_ctx - self.reply_room()
        if len(ids) <= limit:
            return ids, 0
        if self.overflow == "error":
            raise ChatError(f"the conversation needs {len(ids)} tokens but the context holds {self.engine.n_ctx} "
                            f"(with {self.reply_room()} kept for the reply); /clear, /undo or use -c/--ctx-size")
        target = limit - self.engine.n_ctx // 4
        dropped = 0
        while len(ids) > target:
            start = self.conversation.next_window_start()
            if start is None:
                if len(ids) <= limit:
                    break
                raise ChatError(f"the message alone needs {len(ids)} tokens; {limit} fit in the context of "
                                f"{self.engine.n_ctx} (with {self.reply_room()} kept for the reply); -c/--ctx-size "
                                "gives a larger one")
            self.conversation.window_start = start  # out of the window; still in the transcript
            dropped += 1
            ids = self.prompt_ids()
        shifted = self.engine.shift(ids)
        again = max(len(ids) - common_prefix(self.engine.cached_ids(), ids), 1)
        how = (f"the cache kept {shifted.kept} of them, shifted; {again} to evaluate" if shifted.kept > 0 else
               f"the cache can't shift ({shifted.why}): {again} to evaluate again" if shifted.kept < 0 else
               f"{again} to evaluate again")
        notify(f"context full: the {counted(dropped, 'oldest exchange')} left the model's window, kept in the "
               f"transcript ({len(ids)}/{self.engine.n_ctx} tokens; {how})")
        return ids, dropped

    def turn(self, text: str | None, emit: Callable[[str], None], notify: Callable[[str], None],
             progress: Progress | None = None, constraint: Constraint | None = None,
             think: Callable[[str], None] | None = None, calls: bool = False) -> TurnResult:
        """Add the user's message (None: regenerate the last reply), generate, stream through ``emit``;
        ``progress(done, total, seconds)`` follows a long prompt evaluation. Ctrl-C keeps the partial reply,
        marked as cut, and re-raises KeyboardInterrupt; during the evaluation it keeps the message and
        records no reply. ``constraint`` (default: the session's) is a schema or grammar the reply follows.
        A reasoning model's thought streams through ``think`` (the answer through ``emit``). ``calls``: the
        reply may call the toolbox's tools (their text is read as calls, not shown)."""
        constraint = constraint or self.constraint
        if text is not None:
            pending = self.conversation.unanswered()
            if pending is not None:  # a message whose evaluation was cut: it goes with this one
                text = pending + "\n\n" + text
                self.conversation.messages.pop()
            self.conversation.messages.append({"role": "user", "content": text})
        window_start = self.conversation.window_start
        try:
            ids, dropped = self._fit(notify)
        except ChatError:
            self.conversation.window_start = window_start  # the window stays where it was
            if text is not None:
                self.conversation.messages.pop()  # not lost: the caller still holds it and shows it back
            raise
        gen = Generation()
        reply = self._parser(ids, calls)
        self._think = think
        moves: list[str] = []  # notes of shifts mid-reply, given once the reply is done (not inside it)
        try:
            self._generate(ids, gen, reply, emit, progress, constraint, moves)
            self._deliver(reply.finish(), emit)
        except AppError:  # the engine failed mid-reply (a server that went away): what came stays, cut
            self._deliver(reply.finish(), emit)
            if gen.tokens:
                self._record(reply, ids, gen, dropped, cut=True, moves=moves)
            raise
        except KeyboardInterrupt:
            self._deliver(reply.finish(), emit)
            if gen.tokens or gen.first_token_at:
                self._record(reply, ids, gen, dropped, cut=True, moves=moves)
            else:  # cut during the prompt's evaluation: the message stays, unanswered; no reply is made up
                self.last = TurnResult("", gen, ids, dropped)
            raise
        finally:
            for note in moves:
                notify(note)
        result = self._record(reply, ids, gen, dropped, cut=False, moves=moves)
        result.outcome = None if constraint is None else judge(constraint, result.reply, gen.stop_reason)
        result.max_tokens = self.sampling.max_tokens
        if reply.stopped_by in self.user_stops:
            result.stopped_by = reply.stopped_by
        return result

    def _parser(self, ids: Sequence[int], calls: bool) -> ReplyParser:
        """The reply parser of a turn whose prompt is ``ids``: with the toolbox's call syntax where the
        reply may call a tool."""
        box = self.toolbox if calls else None
        reply_format = replace(self.reply_format, calls=box.syntax) if box is not None else self.reply_format
        return ReplyParser(reply_format, tokenizer=self.model.tokenizer, in_thought=self._opens_thought(ids),
                           schemas=box.schemas() if box is not None else None,
                           markers=box.markers if box is not None else ())

    def _deliver(self, events: list[ReplyEvent], emit: Callable[[str], None]) -> None:
        """A reply's events to the front end: the answer's text to ``emit``, the thought's to ``think``."""
        for event in events:
            if isinstance(event, AnswerText):
                emit(event.text)
            elif isinstance(event, ThoughtText) and self._think is not None:
                self._think(event.text)

    def _record(self, reply: ReplyParser, ids: list[int], gen: Generation, dropped: int, cut: bool,
                moves: Sequence[str] = ()) -> TurnResult:
        """The reply into the conversation, as written (the thought apart), and the turn's result."""
        message = {"role": "assistant", "content": reply.raw_answer}
        if reply.thought_raw or reply.in_thought:
            message["reasoning"] = reply.thought_raw
        if cut:
            message["cut"] = True
        self.conversation.messages.append(message)
        self.last = TurnResult(reply.text, gen, ids, dropped, shifts=len(moves), reasoning=reply.thought,
                               reasoning_tokens=reply.thought_tokens, ended_in_thought=reply.in_thought,
                               written=reply.written, message=reply.message, opened_in_thought=reply.opened_in_thought,
                               looped=self._looped if gen.stop_reason == "repetition" else 0)
        if moves:  # the context in use is the last call's prompt and what came after it
            self.last.prompt_ids, self.last.context_tokens = self._ids, len(self._ids) + len(self._since_shift)
        return self.last

    def _generate(self, ids: list[int], gen: Generation, reply: ReplyParser, emit: Callable[[str], None],
                  progress: Progress | None, constraint: Constraint | None, moves: list[str]) -> None:
        """Stream the reply to ``ids`` into ``gen``. When it fills the context (and context_shift allows),
        the window moves and the same reply goes on; when a thought reaches the reasoning budget (or the
        REPL's Ctrl-C), it is closed and the reply goes on (``_ids``: the prompt ids of the last call), under
        the answer's grammar alone where there is one (``gbnf.for_reply``)."""
        sampling, self._ids, ended = self.sampling, ids, False
        guard, self._looped = LoopGuard(sampling.repeat_guard), 0
        prompt_len: int | None = len(ids)  # each call's ids: this prompt, then reply tokens (None: moved)
        stops = [i for i in self.model.stop_ids if i not in self._thought_stops]
        free = thought_free(constraint and constraint.gbnf, self.model.reasoning)  # a thought to end by hand
        if reply.in_thought and sampling.reasoning_budget == 0 and free:  # the prompt opened one: end it
            ids, ended = self._end_thought(ids, gen, reply, emit, constraint), True
        while True:
            part = Generation()
            try:
                for token in self.engine.generate(ids, sampling, stops, part, progress,
                                                  for_reply(constraint and constraint.gbnf, self.model.reasoning,
                                                            reply.in_thought, ended)):
                    if token in self._thought_stops and not reply.in_thought:  # a stop after all, in the answer
                        part.tokens.pop()
                        part.stop_reason = "stop"
                        break
                    self._deliver(reply.feed(token), emit)
                    if reply.stopped_by is not None:
                        part.stop_reason = "stop_string"
                        break
                    looped = guard.tripped(reply.stream, len(gen.tokens) + len(part.tokens))
                    if looped:
                        part.stop_reason, self._looped = "repetition", looped
                        break
                    if not ended and free and reply.in_thought \
                            and 0 <= sampling.reasoning_budget <= reply.thought_tokens:
                        part.stop_reason = "thought ended"
                        break
            except KeyboardInterrupt:
                if not (self.ctrl_c_ends_thought and reply.in_thought and not ended and free):
                    raise
                part.stop_reason = "thought ended"  # the first Ctrl-C during a thought ends the thought
            finally:
                if prompt_len is not None:  # reply tokens fed back (a thought's close) are no prompt tokens
                    part.count_prompt_alone(prompt_len)
                gen.absorb(part)
                self._since_shift = part.tokens
            if part.stop_reason == "thought ended":
                ids, ended = self._end_thought(ids + part.tokens, gen, reply, emit, constraint), True
            elif part.stop_reason != "context" or not self.context_shift or constraint is not None \
                    or self.overflow != "drop-oldest":
                return
            else:
                moved = self._move_window_mid_reply(gen.tokens)
                if moved is None:
                    return
                ids = self._ids = moved[0]
                prompt_len = None
                moves.append(moved[1])
            if sampling.max_tokens >= 0:
                sampling = replace(self.sampling, max_tokens=max(self.sampling.max_tokens - len(gen.tokens), 0))

    def _end_thought(self, ids: list[int], gen: Generation, reply: ReplyParser, emit: Callable[[str], None],
                     constraint: Constraint | None) -> list[int]:
        """The close marker, tokenized as the template writes it, into the reply and the context: the model
        answers next (llama.cpp's reasoning budget; the REPL's first Ctrl-C in a thought); or, before a
        required call in its own message, what ends the thought there (``gbnf.ThoughtThenCall``). The ids to
        go on from."""
        gbnf = constraint and constraint.gbnf
        close_ids = (self.model.tokenizer.encode(gbnf.close, parse_special=True) if isinstance(gbnf, ThoughtThenCall)
                     else self._close_ids)
        for token in close_ids:
            self._deliver(reply.feed(token), emit)
        gen.tokens.extend(close_ids)
        self._ids = ids + close_ids
        return self._ids

    def _opens_thought(self, ids: Sequence[int]) -> bool:
        """The prompt ends inside a thought (its generation prompt opens one: DeepSeek R1 distills)."""
        r = self.model.reasoning
        return r is not None and self.model.tokenizer.decode(ids[-24:]).rstrip().endswith(r.open)

    def _move_window_mid_reply(self, reply_ids: Sequence[int]) -> tuple[list[int], str] | None:
        """The window moved past the oldest exchanges until the prompt and the reply so far take three
        quarters of the context; (the ids to go on from, a note), or None when no exchange is left to drop."""
        target, dropped, first = self.engine.n_ctx * 3 // 4, 0, self.conversation.window_start
        ids = self.prompt_ids() + list(reply_ids)
        while len(ids) > target:
            start = self.conversation.next_window_start()
            if start is None:
                break
            self.conversation.window_start = start
            dropped += 1
            ids = self.prompt_ids() + list(reply_ids)
        if not dropped or len(ids) >= self.engine.n_ctx:
            self.conversation.window_start = first  # the reply is cut; the window stays where it was
            return None
        shifted = self.engine.shift(ids)
        kept = f"the cache kept {shifted.kept} tokens, shifted" if shifted.kept > 0 else "the rest was evaluated again"
        return ids, (f"context full during the reply: the {counted(dropped, 'oldest exchange')} left the model's "
                     f"window, kept in the transcript, and the reply went on ({kept}; --context-shift off cuts "
                     "the reply instead)")

    def apply(self, name: str, value: object) -> str:
        """Set a ``/set``-able setting (``settings.py``'s row name) to a parsed value: "" when it took, else why
        it does not apply."""
        if name == "think":
            if not self.model.detection.format.thinking_switch:
                return "think does not apply: this chat format has no thinking switch"
            self.thinking = value == "on"
        elif name == "reasoning_effort":
            verdict, why = self.model.effort_check(str(value))
            if verdict != "applies":
                return f"reasoning_effort does not apply: {why}"
            self.reasoning_effort = str(value)
        elif name in ("context_shift", "hide_thinking"):
            setattr(self, name, value == "on")
        elif name == "thinking_display":
            self.thinking_display = str(value)
        else:  # a sampler setting
            setattr(self.sampling, name, sampling_value(name, value))
            self.sampling_sources[name] = "/set"
        return ""

    def setting(self, name: str) -> object:
        """A ``/set``-able setting's value as /set and /info show it."""
        if name == "think":
            return {True: "on", False: "off", None: "the template's"}[self.thinking]
        if name == "reasoning_effort":
            return self.reasoning_effort or "the template's"
        if name in ("context_shift", "hide_thinking"):
            return "on" if getattr(self, name) else "off"
        if name == "ignore_eos":
            return "on" if self.sampling.ignore_eos else "off"
        if name == "samplers":
            return ";".join(self.sampling.samplers)
        return getattr(self if name == "thinking_display" else self.sampling, name)

    def eval_rate(self) -> float | None:
        """Prompt tokens per second as the last turn evaluated them (None: too few to tell; below 64 tokens
        the time to the first token is mostly the fixed cost of a call, not evaluation)."""
        g = self.last.generation if self.last is not None else None
        return g.evaluated / g.ttft_s if g is not None and g.evaluated >= 64 and g.ttft_s > 0 else None

    def reevaluation(self) -> int:
        """How many tokens the next turn will evaluate again because the prompt changed before its end
        (after /system or /load): 0 when the cache still holds the prompt's start."""
        cached = self.engine.cached_ids()
        if not cached:
            return 0
        common = common_prefix(cached, self.prompt_ids())
        return max(len(cached) - common, 0)
