"""A conversation and the turns that grow it: format, encode, fit the context, generate, stream.

Each turn formats the whole conversation and encodes it with our tokenizer; the encoder caches the ids
of every text run, so only the new message is tokenized, and llama.cpp evaluates only the ids after the
prefix its KV cache already holds.

Overflow: when the prompt plus room for a reply does not fit the context, ``drop-oldest`` moves the
model's window past whole exchanges from the start (the system message stays; the transcript keeps every
message) and says so; ``error`` refuses the turn. The user's message is kept either way. When a reply
itself fills the context, ``context_shift`` (``--context-shift on``, with ``drop-oldest``) moves the window
the same way and the reply goes on from the ids it has so far; off (the default), the reply is cut.

A session is built from one ``SessionOptions`` (session_options.py); ``/set`` changes it through
``ChatSession.apply``. How a reply is *shown* (the thought whole, as one line or hidden; what Ctrl-C does)
is the front end's, and is not here.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokenizer.chat import ChatFormatError
from tokenizer.chat.tool_calls import ToolCall, tool_message

from ..engines.base import RANDOM_SEED, BegunGrammar, Engine, Generation, Progress, StartRefused, common_prefix, triggers_of
from ..errors import STOPPED, AppError
from ..words import counted
from .continuation import Prefill
from .conversation import ChatError, Conversation
from .gbnf import ThoughtThenCall, for_reply, thought_free
from .loop_guard import LoopGuard
from .message import Message
from .model import Model
from .read_reply import ReplyFormat
from .reply import AnswerText, ReplyEvent, ReplyParser, ThoughtText
from .session_options import OVERFLOW_POLICIES, ContextOptions, ReasoningOptions, SessionOptions, Toolbox
from .settings import ON_OFF, bias_problem, sampling_value
from .structured import Constraint, judge
from .tool_round import calls_of_reply, own_ids
from .turn_result import ToolResult, TurnResult

__all__ = ["OVERFLOW_POLICIES", "ChatError", "ChatSession", "ContextOptions", "Conversation", "ReasoningOptions",
           "SessionOptions", "Toolbox", "ToolResult", "TurnResult"]

@dataclass
class _Turn:
    """One turn's own state while it runs (the session outlives its turns, and keeps none of this): where
    the answer and the thought stream, the prompt ids of the reply's last call (the window's, after a
    shift), the tokens generated since the window last moved, and the loop guard's count when it ended the
    reply."""

    emit: Callable[[str], None]
    think: Callable[[str], None] | None
    call_ids: list[int] = field(default_factory=list)
    since_shift: list[int] = field(default_factory=list)
    looped: int = 0

    def deliver(self, events: list[ReplyEvent]) -> None:
        """A reply's events to the front end: the answer's text to ``emit``, the thought's to ``think``."""
        for event in events:
            if isinstance(event, AnswerText):
                self.emit(event.text)
            elif isinstance(event, ThoughtText) and self.think is not None:
                self.think(event.text)


class ChatSession:
    """A model, an engine and a conversation; ``turn`` runs one exchange."""

    def __init__(self, model: Model, engine: Engine, options: SessionOptions):
        self.model = model
        self.engine = engine
        self.options = options
        #: the model's reply format, its stop strings after the user's (with the call syntax in a tool turn)
        self.reply_format = ReplyFormat.of_model(model, None, options.stop_strings)
        self.conversation = Conversation()
        self.last: TurnResult | None = None
        self._after_calls: list[int] | None = None  # the cache's ids when tool results came: the call's own kept
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
        options = self.options  # (its own settings: a batch line changes them for its turn alone)
        other.options = replace(options, sampling=replace(options.sampling), reasoning=replace(options.reasoning),
                                context=replace(options.context), sampling_sources=dict(options.sampling_sources))
        other.engine, other.conversation, other.last = engine, Conversation(), None
        return other

    def prompt_ids(self, add_generation_prompt: bool = True, with_tools: bool = True) -> list[int]:
        """The prompt's ids (``with_tools`` False: as if no tool were given, to weigh their definitions)."""
        encoder = self.model.encoder
        box = self.options.tools
        tools = box.definitions() if box is not None and with_tools else None
        without_content = box is not None and box.syntax.content_none
        segments = encoder.format(self.conversation.for_prompt(self.model.reasoning, without_content),
                                  add_generation_prompt,
                                  thinking=self.options.reasoning.thinking, effort=self.options.reasoning.effort,
                                  **({"tools": tools} if tools else {}))
        ids = encoder.encode(segments)
        if self._after_calls is None:
            return ids
        return own_ids(self._after_calls, ids, decode=self.model.tokenizer.decode)

    def read_calls(self, notify: Callable[[str], None], new_id: Callable[[], str]) -> list[ToolCall]:
        """The calls of the reply just recorded, its message rewritten as the template takes a call
        (``tool_round.calls_of_reply``); none where there is no toolbox."""
        box, messages = self.options.tools, self.conversation.messages
        if box is None or self.last is None or not messages:
            return []
        message, calls = calls_of_reply(messages[-1], self.last, box.syntax, notify, new_id)
        if message is not messages[-1]:
            self.conversation.replace_last(message)
        return calls

    def answer_calls(self, results: Sequence[ToolResult]) -> None:
        """The results of the last reply's calls into the conversation, as the template's tool messages. The
        next turn's prompt keeps the model's own ids for the call (``tool_round.own_ids``), so only the call's
        end and the results are evaluated."""
        for result in results:
            self.conversation.add(tool_message(result.call, result.result))
        self._after_calls = self.engine.cached_ids()

    def reply_room(self) -> int:
        """Tokens kept free for the reply when deciding whether a prompt fits."""
        wanted = self.options.sampling.max_tokens if self.options.sampling.max_tokens > 0 else 256
        return min(wanted, self.engine.n_ctx // 4)

    def _fit(self, notify: Callable[[str], None]) -> tuple[list[int], int]:
        """The prompt, fitted to the context. On overflow whole exchanges leave the window from its start (the
        system message stays, the transcript keeps them) until a quarter of the context is free, so that it happens rarely, as
        llama.cpp's context shift does; the cache keeps the tokens of what is kept (``Engine.shift``)."""
        ids = self.prompt_ids()
        limit = self.engine.n_ctx - self.reply_room()
        if len(ids) <= limit:
            return ids, 0
        if self.options.context.overflow == "error":
            raise ChatError(f"the conversation needs {len(ids)} tokens but the context holds {self.engine.n_ctx} "
                            f"(with {self.reply_room()} kept for the reply); /clear, /undo or use -c/--ctx-size")
        target = limit - self.engine.n_ctx // 4
        dropped = 0
        while len(ids) > target:
            start = self.conversation.next_window_start()
            if start is None:
                if len(ids) <= limit:
                    break
                raise ChatError(self._too_long(len(ids), limit))
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

    def _too_long(self, needed: int, limit: int) -> str:
        """Why a prompt with no exchange left to drop does not fit, naming the tools' share where they
        have one (an MCP server may bring hundreds of tools, and their definitions are in every prompt)."""
        box = self.options.tools
        tools = len(box.definitions()) if box is not None else 0
        weight = needed - len(self.prompt_ids(with_tools=False)) if tools else 0
        share = f", {weight} of them the definitions of {counted(tools, 'tool')}" if weight > limit // 4 else ""
        return (f"the message alone needs {needed} tokens{share}; {limit} fit in the context of {self.engine.n_ctx} "
                f"(with {self.reply_room()} kept for the reply); -c/--ctx-size gives a larger one"
                + (", fewer tools a shorter prompt" if share else ""))

    def turn(self, text: str | None, emit: Callable[[str], None], notify: Callable[[str], None],
             progress: Progress | None = None, constraint: Constraint | None = None,
             think: Callable[[str], None] | None = None, calls: bool = False,
             ctrl_c_ends_thought: bool = False, prefill: Prefill | None = None) -> TurnResult:
        """Add the user's message (None: regenerate the last reply), generate, stream through ``emit``;
        ``progress(done, total, seconds)`` follows a long prompt evaluation. Ctrl-C keeps the partial reply,
        marked as cut, and re-raises KeyboardInterrupt; during the evaluation it keeps the message and
        records no reply. ``constraint`` (default: the session's) is a schema or grammar the reply follows.
        A reasoning model's thought streams through ``think`` (the answer through ``emit``). ``calls``: the
        reply may call the toolbox's tools (their text is read as calls, not shown); ``ctrl_c_ends_thought``
        (the REPL's): the first Ctrl-C during a thought ends the thought, and the reply goes on. ``prefill``:
        the reply goes on from this assistant message (``--prefill``, ``/continue``): the model is shown it
        as its template writes a reply, and the reply recorded holds it; its text is not emitted again. The
        ids a round of tool results kept (``answer_calls``) hold for this turn alone."""
        try:
            return self._turn(text, emit, notify, progress, constraint, think, calls, ctrl_c_ends_thought, prefill)
        finally:
            self._after_calls = None

    def _turn(self, text: str | None, emit: Callable[[str], None], notify: Callable[[str], None],
              progress: Progress | None, constraint: Constraint | None, think: Callable[[str], None] | None,
              calls: bool, ctrl_c_ends_thought: bool, prefill: Prefill | None) -> TurnResult:
        """The turn's body (``turn``)."""
        constraint = constraint or self.options.constraint
        if text is not None:
            pending = self.conversation.unanswered()
            if pending is not None:  # a message whose evaluation was cut: it goes with this one
                text = pending + "\n\n" + text
                self.conversation.drop_last()
            self.conversation.add(Message("user", text))
        window_start = self.conversation.window_start
        try:
            ids, dropped = self._fit(notify)
        except ChatError:
            self.conversation.window_start = window_start  # the window stays where it was
            if text is not None:
                self.conversation.drop_last()  # not lost: the caller still holds it and shows it back
            raise
        gen = Generation()
        thought = self._thought_at_end(ids)
        reply = self._parser(ids, calls, thought)
        prefilled = self._written(prefill, thought == "open")
        if prefilled:
            reply.go_on_from(prefilled)
            ids = ids + prefilled
            if len(ids) >= self.engine.n_ctx:
                if text is not None:
                    self.conversation.drop_last()  # (the caller holds it, as for any ChatError)
                raise ChatError(f"the reply to continue fills the context ({len(ids)}/{self.engine.n_ctx} tokens); "
                                "-c/--ctx-size gives a larger one")
        turn = _Turn(emit, think)
        moves: list[str] = []  # notes of shifts mid-reply, given once the reply is done (not inside it)
        try:
            self._generate(ids, gen, reply, turn, progress, constraint, moves, ctrl_c_ends_thought, prefilled)
            turn.deliver(reply.finish())
        except StartRefused as err:  # (nothing was drawn: the turn is as if it had not run)
            if text is not None:
                self.conversation.drop_last()  # (the caller holds it, as for any ChatError)
            raise ChatError(self._refused_start(prefilled, err.at, constraint)) from None
        except AppError:  # the engine failed mid-reply (a server that went away): what came stays, cut
            turn.deliver(reply.finish())
            if gen.tokens:
                self._record(reply, ids, gen, dropped, turn, cut=True, moves=moves)
            raise
        except STOPPED:  # (Ctrl-C, SIGTERM, SIGHUP)
            turn.deliver(reply.finish())
            if gen.tokens or gen.first_token_at or prefilled:  # (a prefilled reply is kept, cut or not)
                self._record(reply, ids, gen, dropped, turn, cut=True, moves=moves)
            else:  # cut during the prompt's evaluation: the message stays, unanswered; no reply is made up
                self.last = TurnResult("", gen, ids, dropped)
            raise
        finally:
            for note in moves:
                notify(note)
        result = self._record(reply, ids, gen, dropped, turn, cut=False, moves=moves)
        result.outcome = None if constraint is None else judge(constraint, result.reply, gen.stop_reason)
        result.max_tokens = self.options.sampling.max_tokens
        if reply.stopped_by in self.options.stop_strings:
            result.stopped_by = reply.stopped_by
        return result

    def _parser(self, ids: Sequence[int], calls: bool, thought: str) -> ReplyParser:
        """The reply parser of a turn whose prompt is ``ids`` and ends with a ``thought`` as
        ``_thought_at_end`` says: with the toolbox's call syntax where the reply may call a tool; a reply
        that may think without writing the opening where the prompt left the thought to the model."""
        box = self.options.tools if calls else None
        reply_format = replace(self.reply_format, calls=box.syntax) if box is not None else self.reply_format
        unmarked = thought == "" and self.options.reasoning.thinking is not False
        return ReplyParser(reply_format, tokenizer=self.model.tokenizer, in_thought=thought == "open",
                           schemas=box.schemas() if box is not None else None,
                           markers=box.markers if box is not None else (), unmarked_thought=unmarked)

    def _written(self, prefill: Prefill | None, opened: bool) -> list[int]:
        """The ids of a prefilled reply's start, as the template writes a reply, after a prompt that
        ``opened`` the thought or not."""
        if prefill is None:
            return []
        return self.model.encoder.encode(prefill.segments(self.model.reasoning, opened), bos=False)

    def _refused_start(self, prefilled: Sequence[int], at: int, constraint: Constraint | None) -> str:
        """Why a reply's start can't go on under ``constraint``: where its grammar refuses it (``at``)."""
        decode = self.model.tokenizer.decode
        start = decode(list(prefilled))
        shown = start if len(start) <= 60 else start[:57] + "..."
        flag = constraint.flag if constraint is not None else "the grammar"
        refused = decode(list(prefilled[at:at + 1]))
        where = f"after {decode(list(prefilled[:at]))[-40:]!r}" if at else "as the reply's first text"
        return f"the reply's start {shown!r} does not follow {flag}: its grammar refuses {refused!r} {where}"

    def continued_prompt_ids(self, prefill: Prefill) -> list[int]:
        """The prompt and then ``prefill``, the reply's start, as a turn with it evaluates them (what
        ``--show-prompt --prefill`` shows)."""
        ids = self.prompt_ids()
        return ids + self._written(prefill, self._thought_at_end(ids) == "open")

    def _record(self, reply: ReplyParser, ids: list[int], gen: Generation, dropped: int, turn: _Turn, cut: bool,
                moves: Sequence[str] = ()) -> TurnResult:
        """The reply into the conversation, as written (the thought apart), and the turn's result."""
        thought = reply.thought_raw if reply.thought_raw or reply.in_thought else None
        self.conversation.add(Message("assistant", reply.raw_answer, reasoning=thought, cut=cut))
        self.last = TurnResult(reply.text, gen, ids, dropped, shifts=len(moves), reasoning=reply.thought,
                               reasoning_tokens=reply.thought_tokens, ended_in_thought=reply.in_thought,
                               written=reply.written, message=reply.message, opened_in_thought=reply.opened_in_thought,
                               looped=turn.looped if gen.stop_reason == "repetition" else 0)
        if moves:  # the context in use is the last call's prompt and what came after it
            self.last.prompt_ids, self.last.context_tokens = turn.call_ids, len(turn.call_ids) + len(turn.since_shift)
        return self.last

    def _generate(self, ids: list[int], gen: Generation, reply: ReplyParser, turn: _Turn,
                  progress: Progress | None, constraint: Constraint | None, moves: list[str],
                  ctrl_c_ends_thought: bool = False, prefilled: Sequence[int] = ()) -> None:
        """Stream the reply to ``ids`` (``prefilled``: the reply's start they end with) into ``gen``. When it
        fills the context (and context_shift allows), the window moves and the same reply goes on; when a
        thought reaches the reasoning budget (or the REPL's Ctrl-C), it is closed and the reply goes on
        (``turn.call_ids``: the prompt ids of the last call), under the answer's grammar alone where there is one
        (``gbnf.for_reply``)."""
        # A random seed (-1) is drawn here, once a turn, so that every call of the turn (a thought ended by
        # hand, a moved window) goes on with it, and --json can say which it was: the reply can be made again.
        seed = self.options.sampling.seed if self.options.sampling.seed >= 0 else random.randrange(RANDOM_SEED)
        gen.seed = seed
        sampling, turn.call_ids, ended = replace(self.options.sampling, seed=seed), ids, False
        guard, turn.looped = LoopGuard(sampling.repeat_guard), 0
        prompt_len: int | None = len(ids)  # each call's ids: this prompt, then reply tokens (None: moved)
        stops = [i for i in self.model.stop_ids if i not in self._thought_stops]
        gbnf = constraint and constraint.gbnf
        free = thought_free(gbnf, self.model.reasoning)  # a thought to end by hand
        if reply.in_thought and sampling.reasoning_budget == 0 and free:  # the prompt opened one: end it
            ids, ended = self._end_thought(ids, gen, reply, turn, constraint), True
        # the reply's start, which the first call's grammar reads (an eager one's: a lazy one waits for its trigger)
        begun = tuple(prefilled) if gbnf is not None and not ended and not triggers_of(gbnf) else ()
        while True:
            part = Generation()
            # (a begun reply's grammar is the whole reply's, from the prompt's end on, its start included)
            grammar = for_reply(gbnf, self.model.reasoning, reply.opened_in_thought if begun else reply.in_thought,
                                ended)
            if begun:
                grammar, begun = BegunGrammar(grammar, begun), ()
            try:
                for token in self.engine.generate(ids, sampling, stops, part, progress, grammar):
                    if token in self._thought_stops and not reply.in_thought:  # a stop after all, in the answer
                        part.tokens.pop()
                        part.stop_reason = "stop"
                        break
                    turn.deliver(reply.feed(token))
                    if reply.stopped_by is not None:
                        part.stop_reason = "stop_string"
                        break
                    looped = guard.tripped(reply.stream, len(gen.tokens) + len(part.tokens))
                    if looped:
                        part.stop_reason, turn.looped = "repetition", looped
                        break
                    if not ended and free and reply.in_thought \
                            and 0 <= sampling.reasoning_budget <= reply.thought_tokens:
                        part.stop_reason = "thought ended"
                        break
            except KeyboardInterrupt:
                if not (ctrl_c_ends_thought and reply.in_thought and not ended and free):
                    raise
                part.stop_reason = "thought ended"  # the first Ctrl-C during a thought ends the thought
            finally:
                if prompt_len is not None:  # reply tokens fed back (a thought's close) are no prompt tokens
                    part.count_prompt_alone(prompt_len)
                gen.absorb(part)
                turn.since_shift = part.tokens
            if part.stop_reason == "thought ended":
                ids, ended = self._end_thought(ids + part.tokens, gen, reply, turn, constraint), True
            elif part.stop_reason != "context" or not self.options.context.shift or constraint is not None \
                    or self.options.context.overflow != "drop-oldest":
                return
            else:
                moved = self._move_window_mid_reply([*prefilled, *gen.tokens])
                if moved is None:
                    return
                ids = turn.call_ids = moved[0]
                prompt_len = None
                moves.append(moved[1])
            if sampling.max_tokens >= 0:
                sampling = replace(self.options.sampling, seed=seed,
                                   max_tokens=max(self.options.sampling.max_tokens - len(gen.tokens), 0))

    def _end_thought(self, ids: list[int], gen: Generation, reply: ReplyParser, turn: _Turn,
                     constraint: Constraint | None) -> list[int]:
        """The close marker, tokenized as the template writes it, into the reply and the context: the model
        answers next (llama.cpp's reasoning budget; the REPL's first Ctrl-C in a thought); or, before a
        required call in its own message, what ends the thought there (``gbnf.ThoughtThenCall``). The ids to
        go on from."""
        gbnf = constraint and constraint.gbnf
        close_ids = (self.model.tokenizer.encode(gbnf.close, parse_special=True) if isinstance(gbnf, ThoughtThenCall)
                     else self._close_ids)
        for token in close_ids:
            turn.deliver(reply.feed(token))
        gen.tokens.extend(close_ids)
        turn.call_ids = ids + close_ids
        return turn.call_ids

    def _thought_at_end(self, ids: Sequence[int]) -> str:
        """How the prompt ``ids`` ends: "open", inside a thought (its generation prompt opens one: DeepSeek
        R1's distills); "closed", after one (thinking off: Qwen3's ``<think>\\n\\n</think>``: the reply is
        the answer); "" with no thought, or for a model that writes none."""
        r = self.model.reasoning
        if r is None:
            return ""
        end = self.model.tokenizer.decode(ids[-24:]).rstrip()
        return "open" if end.endswith(r.open) else "closed" if end.endswith(r.close.strip()) else ""

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
            self.options.reasoning.thinking = value == "on"
        elif name == "reasoning_effort":
            verdict, why = self.model.effort_check(str(value))
            if verdict != "applies":
                return f"reasoning_effort does not apply: {why}"
            self.options.reasoning.effort = str(value)
        elif name == "context_shift":
            self.options.context.shift = value == "on"
        elif name == "spec_type":
            speculation = getattr(self.engine, "speculation", None)
            if speculation is None:
                return "spec-type does not apply: a llama-server speculates with its own flags"
            self.engine.speculation = replace(speculation, spec_type=str(value))  # type: ignore[attr-defined]
        else:  # a sampler setting
            value = sampling_value(name, value)
            problem = bias_problem(value, self.model.tokenizer.vocab_size) if name == "logit_bias" else ""
            if problem:
                return problem
            setattr(self.options.sampling, name, value)
            self.options.sampling_sources[name] = "/set"
        return ""

    def setting(self, name: str) -> object:
        """A ``/set``-able setting's value as /set and /info show it."""
        if name == "think":
            return {True: "on", False: "off", None: "the template's"}[self.options.reasoning.thinking]
        if name == "reasoning_effort":
            return self.options.reasoning.effort or "the template's"
        if name == "context_shift":
            return "on" if self.options.context.shift else "off"
        if name == "spec_type":
            speculation = getattr(self.engine, "speculation", None)
            return speculation.describe() if speculation is not None else "llama-server's own"
        if name in ON_OFF:
            return "on" if getattr(self.options.sampling, name) else "off"
        if name == "samplers":
            return ";".join(self.options.sampling.samplers)
        return getattr(self.options.sampling, name)

    def eval_rate(self) -> float | None:
        """Prompt tokens per second as the last turn evaluated them (None: too few to tell; below 64 tokens
        the time to the first token is mostly the fixed cost of a call, not evaluation)."""
        g = self.last.generation if self.last is not None else None
        return g.evaluated / g.ttft_s if g is not None and g.evaluated >= 64 and g.ttft_s > 0 else None

    def restore_state(self, state_file: Path) -> tuple[int, str]:
        """llama.cpp's state for this chat, restored from ``state_file``: (the tokens of the next prompt it
        holds, "") or (0, why nothing is gained). A state that holds another chat is restored and counted as
        what it gives: none of its tokens, where the chat's prompt starts otherwise."""
        restored, why = self.engine.load_state(state_file, self.model.weights)
        if not restored:
            return 0, why
        try:
            held = restored - self.reevaluation()
        except (ChatError, ChatFormatError):  # (a prompt the template refuses: the first turn says so)
            return restored, ""
        return (held, "") if held > 0 else (0, "its state holds another chat")

    def reevaluation(self) -> int:
        """How many tokens the next turn will evaluate again because the prompt changed before its end
        (after /system or /load): 0 when the cache still holds the prompt's start."""
        cached = self.engine.cached_ids()
        if not cached:
            return 0
        common = common_prefix(cached, self.prompt_ids())
        return max(len(cached) - common, 0)
