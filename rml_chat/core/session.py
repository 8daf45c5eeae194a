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
        self.stop_strings = tuple(stop_strings) + model.encoder.stop_strings
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
        how = (f"the cache kept {shifted.kept} tokens, shifted" if shifted.kept > 0 else
               f"the cache can't shift ({shifted.why}): the rest is evaluated again" if shifted.kept < 0 else
               "the rest is evaluated again")
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
        return result

    def _record(self, reply: str, ids: list[int], gen: Generation, dropped: int, cut: bool) -> TurnResult:
        message = {"role": "assistant", "content": reply}
        if cut:
            message["cut"] = True
        self.conversation.messages.append(message)
        self.last = TurnResult(reply, gen, ids, dropped)
        return self.last

    def reevaluation(self) -> int:
        """How many tokens the next turn will evaluate again because the prompt changed before its end
        (after /system or /load): 0 when the cache still holds the prompt's start."""
        cached = self.engine.cached_ids()
        if not cached:
            return 0
        common = common_prefix(cached, self.prompt_ids())
        return max(len(cached) - common, 0)
