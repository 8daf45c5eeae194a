"""A conversation and the turns that grow it: format, encode, fit the context, generate, stream.

Each turn formats the whole conversation and encodes it with our tokenizer; the encoder caches the ids
of every text run, so only the new message is tokenized, and llama.cpp evaluates only the ids after the
prefix its KV cache already holds.

Overflow: when the prompt plus room for a reply does not fit the context, ``drop-oldest`` moves the
model's window past whole exchanges from the start (the system message stays; the transcript keeps every
message) and says so; ``error`` refuses the turn. The user's message is kept either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..engines.base import Engine, Generation, Progress, Sampling, common_prefix
from ..errors import AppError
from ..words import counted
from .conversation import ChatError, Conversation
from .model import Model
from .reply import Reply
from .structured import Constraint, Outcome, judge

__all__ = ["OVERFLOW_POLICIES", "ChatError", "ChatSession", "Conversation", "TurnResult"]

OVERFLOW_POLICIES = ("drop-oldest", "error")


@dataclass
class TurnResult:
    reply: str
    generation: Generation
    prompt_ids: list[int]
    dropped: int = 0  # exchanges dropped to fit
    outcome: Outcome | None = None  # complete / valid, under a schema or grammar
    stopped_by: str | None = None  # the user's stop string that ended the reply
    max_tokens: int = -1  # the -n it ran under

    def cut_note(self, n_ctx: int, repl: bool = False) -> str:
        """"" for a reply that ended as the model ended it, else what cut it: -n, a full context, a stop
        string, or nothing at all (an empty reply), with what to do about it (``repl``: in the REPL's words)."""
        g = self.generation
        if g.stop_reason == "length":
            return (f"reply cut at -n {self.max_tokens} tokens" +
                    ("; /set n -1 lets replies run to their end" if repl else ""))
        if g.stop_reason == "context":
            return (f"reply cut: the context is full ({n_ctx} tokens); " +
                    ("/clear, or start with a larger -c" if repl else "-c/--ctx-size gives a larger one"))
        if self.stopped_by is not None:
            return f"reply stopped at the stop string {self.stopped_by!r}"
        if g.stop_reason == "stop" and not self.reply:
            return "the reply is empty: the model ended its turn at once" + (
                " (its grammar or schema allows an empty reply)" if self.outcome is not None else "")
        return ""

    @property
    def context_used(self) -> int:
        return len(self.prompt_ids) + len(self.generation.tokens)


class ChatSession:
    """A model, an engine and a conversation; ``turn`` runs one exchange."""

    def __init__(self, model: Model, engine: Engine, sampling: Sampling, *, overflow: str = "drop-oldest",
                 stop_strings: tuple[str, ...] = (), thinking: bool | None = None):
        self.model = model
        self.engine = engine
        self.sampling = sampling
        self.overflow = overflow
        self.user_stops = tuple(stop_strings)  # --stop: a reply they end was cut (the format's own end it)
        self.stop_strings = self.user_stops + model.encoder.stop_strings
        self.thinking = thinking
        self.conversation = Conversation()
        self.last: TurnResult | None = None
        self.autosave_path: Path | None = None  # set when resumed from an autosave: saving goes on there
        self.constraint: Constraint | None = None  # a JSON schema or a grammar every reply follows

    def prompt_ids(self, add_generation_prompt: bool = True) -> list[int]:
        encoder = self.model.encoder
        segments = encoder.format(self.conversation.for_prompt(), add_generation_prompt, thinking=self.thinking)
        return encoder.encode(segments)

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
                raise ChatError(f"the message alone needs {len(ids)} tokens; the context holds {self.engine.n_ctx}")
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
             progress: Progress | None = None, constraint: Constraint | None = None) -> TurnResult:
        """Add the user's message (None: regenerate the last reply), generate, stream through ``emit``;
        ``progress(done, total, seconds)`` follows a long prompt evaluation. Ctrl-C keeps the partial reply,
        marked as cut, and re-raises KeyboardInterrupt; during the evaluation it keeps the message and
        records no reply. ``constraint`` (default: the session's) is a schema or grammar the reply follows."""
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
        reply = Reply(self.model.tokenizer, self.stop_strings)
        try:
            for token in self.engine.generate(ids, self.sampling, self.model.stop_ids, gen, progress,
                                              None if constraint is None else constraint.gbnf):
                emit(reply.feed(token))
                if reply.stopped_by is not None:
                    gen.stop_reason = "stop_string"
                    break
            emit(reply.finish())
        except AppError:  # the engine failed mid-reply (a server that went away): what came stays, cut
            emit(reply.finish())
            if gen.tokens:
                self._record(reply.text, ids, gen, dropped, cut=True)
            raise
        except KeyboardInterrupt:
            emit(reply.finish())
            if gen.tokens or gen.first_token_at:
                self._record(reply.text, ids, gen, dropped, cut=True)
            else:  # cut during the prompt's evaluation: the message stays, unanswered; no reply is made up
                self.last = TurnResult("", gen, ids, dropped)
            raise
        result = self._record(reply.text, ids, gen, dropped, cut=False)
        result.outcome = judge(constraint, result.reply, gen.stop_reason)
        result.max_tokens = self.sampling.max_tokens
        if reply.stopped_by in self.user_stops:
            result.stopped_by = reply.stopped_by
        return result

    def _record(self, reply: str, ids: list[int], gen: Generation, dropped: int, cut: bool) -> TurnResult:
        message = {"role": "assistant", "content": reply}
        if cut:
            message["cut"] = True
        self.conversation.messages.append(message)
        self.last = TurnResult(reply, gen, ids, dropped)
        return self.last

    def apply(self, name: str, value: object) -> str:
        """Set a ``/set``-able setting (``settings.py``'s row name) to a parsed value: "" when it took, else why
        it does not apply."""
        if name == "think":
            if not self.model.detection.format.thinking_switch:
                return "think does not apply: this chat format has no thinking switch"
            self.thinking = value == "on"
        else:
            setattr(self.sampling, name, value)
        return ""

    def eval_rate(self) -> float | None:
        """Prompt tokens per second as the last turn evaluated them (None: too few to tell)."""
        g = self.last.generation if self.last is not None else None
        return g.evaluated / g.ttft_s if g is not None and g.evaluated >= 16 and g.ttft_s > 0 else None

    def reevaluation(self) -> int:
        """How many tokens the next turn will evaluate again because the prompt changed before its end
        (after /system or /load): 0 when the cache still holds the prompt's start."""
        cached = self.engine.cached_ids()
        if not cached:
            return 0
        common = common_prefix(cached, self.prompt_ids())
        return max(len(cached) - common, 0)
