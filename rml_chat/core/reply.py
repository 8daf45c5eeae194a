"""The reply parser: what the model generates, read as its family writes it while it streams — the one
path every reply takes (the REPL, ``-p``, ``--json``, ``--batch``, ``--server``, ``--check``, tools).

``ReplyParser`` reads token ids (or text) in and gives *events* out, in stages:

* ``TokenStream`` turns ids into text, whole characters only; a control token comes as its text between
  private characters, so a marker made of control tokens is matched as the tokens it is, never as text a
  model typed (and a stray ``<|im_start|>`` is never shown);
* ``thoughts.ThoughtSplitter``, for a template that writes thoughts, tells the thought from the answer and
  hides the markers;
* ``answer_stage.AnswerStage`` tells the answer's text from its stop strings and its tool calls, holding back one tail
  that may start either: with stop ``"User:"``, a reply ending ``…Us`` waits for the next token;
* at the end, ``read_reply.message_of`` makes the message: reasoning, content, and the tool calls with
  their names, ids and arguments typed by the tools' schemas.

Worked example, Qwen's markers, a call, streamed in pieces of text::

    >>> from tokenizer.chat.reasoning import Reasoning
    >>> qwen = ReplyFormat(Reasoning("<think>", "</think>"),
    ...                    CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>'))
    >>> parser = ReplyParser(qwen)
    >>> pieces = ["<think>Osl", "o?</think>\\n\\nLet me", " look.\\n<tool", '_call>\\n{"name": "weather", ',
    ...           '"arguments": {"city": "Oslo"}}\\n</tool_call>']
    >>> [e for piece in pieces for e in parser.feed_text(piece)]  # doctest: +NORMALIZE_WHITESPACE
    [ThoughtText(text='Osl'), ThoughtText(text='o?'), AnswerText(text='Let me'), AnswerText(text=' look.'),
     CallOpened(name='weather'), CallArguments(text='", '),
     CallArguments(text='"arguments": {"city": "Oslo"}}\\n</tool_call>')]
    >>> parser.finish()[-2:]  # doctest: +NORMALIZE_WHITESPACE
    [CallClosed(call=ToolCall(name='weather', arguments={'city': 'Oslo'}, id='')),
     ReplyEnded(message=ParsedReply(content='Let me look.', reasoning='Oslo?',
                tool_calls=(ToolCall(name='weather', arguments={'city': 'Oslo'}, id=''),), problem='',
                ended_in_thought=False, open_call=None), stopped_by=None)]

The message is the same at every chunking of the reply (``tests/test_llama_chat_suite.py`` feeds
llama.cpp's parser cases whole, a character at a time and in threes). ``parse_reply`` reads a whole reply.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tokenizer import Tokenizer, TokenType
from tokenizer.chat.tool_calls import CallSyntax, ToolCall

from .answer_stage import AnswerStage
from .call_reader import call_triggers, opened_calls, undecided_from, unfinished_call
from .channels import CallForm, Channels, ChannelSplitter
from .continuation import Prefill
from .grown_text import GrownText
from .read_reply import ParsedReply, ReplyFormat, ThoughtSplit, channel_calls, message_of, read_calls, with_thought
from .thoughts import HIDDEN_CLOSE, HIDDEN_OPEN, ThoughtSplitter, as_written, shown_as_text, without_hidden

__all__ = ["AnswerText", "CallArguments", "CallClosed", "CallOpened", "ParsedReply", "ReplyEnded", "ReplyEvent",
           "Prefill", "ReplyFormat", "ReplyParser", "ThoughtText", "parse_reply"]


@dataclass(frozen=True)
class ThoughtText:
    """Text of the thought, to show now (markers left out)."""

    text: str


@dataclass(frozen=True)
class AnswerText:
    """Text of the answer, to show now (no stop string, no call in it)."""

    text: str


@dataclass(frozen=True)
class CallOpened:
    """A tool call opened, its tool's name written whole."""

    name: str


@dataclass(frozen=True)
class CallArguments:
    """The calls' text since the last event, as the model writes it: the arguments and what closes them."""

    text: str


@dataclass(frozen=True)
class CallClosed:
    """A call read whole at the reply's end: its name, its arguments typed by the tool's schema, its id."""

    call: ToolCall


@dataclass(frozen=True)
class ReplyEnded:
    """The reply's message; ``stopped_by``: the stop string that ended it (None: none did)."""

    message: ParsedReply
    stopped_by: str | None = None


ReplyEvent = ThoughtText | AnswerText | CallOpened | CallArguments | CallClosed | ReplyEnded


class TokenStream:
    """Ids -> text whole characters at a time, control tokens kept as ``HIDDEN_OPEN text HIDDEN_CLOSE``
    (a marker made of control tokens is found in the stream as the same form: ``stream_form``)."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer
        self._decoder = tokenizer.stream(skip_special=True, continuation=True)

    def is_hidden(self, token_id: int) -> bool:
        return self._tokenizer.token_type(token_id) in (TokenType.CONTROL, TokenType.UNKNOWN)

    def feed(self, token_id: int) -> str:
        if self.is_hidden(token_id):
            return HIDDEN_OPEN + self._tokenizer.id_to_token(token_id) + HIDDEN_CLOSE
        return self._decoder.feed(token_id)

    def finish(self) -> str:
        return self._decoder.finish()

    def stream_form(self, marker: str) -> str:
        """A marker's text as the stream carries it: its control tokens wrapped, the rest as is."""
        parts = []
        for text, token_id in self._tokenizer.split_special(marker):
            hidden = token_id is not None and self.is_hidden(token_id)
            parts.append(HIDDEN_OPEN + text + HIDDEN_CLOSE if hidden else text)
        return "".join(parts)


class ReplyParser:
    """One reply: ``feed(token_id)`` (or ``feed_text``) gives the events its text makes now, ``finish()`` the
    rest, ending with ``ReplyEnded`` and the message. ``text`` is the answer as shown, ``thought`` the
    thought, ``stopped_by`` the stop string that ended it (None: none did).

    ``reply_format``: the template's markers, call syntax and stop strings; ``tokenizer``: where ids come
    from (None: the reply comes as text); ``in_thought``: the prompt opened a thought; ``schemas``: each
    tool's parameters by its name; ``markers``: the call syntax's special tokens (the calls are read with
    them, and outside a call they are never shown; by default the tokenizer's, ``CallSyntax.markers``).
    Any other control token in the answer is left out of it, on screen and in the message alike;
    ``unmarked_thought``: the model may think without
    writing the thought's opening (the prompt neither opened nor closed one), so a close with no opening
    makes the reply's start the thought (``thoughts.UNMARKED_HOLD``).

    Two options are llama-server's readings (``read_reply.message_of``), and the stream shows what they
    read: ``thought_in_content`` (the thought shown in the answer with its markers, once it closes) and
    ``json_answer`` (an answer that opens a Markdown fence is held and shown without it at the end).
    A channelled reply's (gpt-oss) thoughts in the content are shown at its end, where they are joined."""

    def __init__(self, reply_format: ReplyFormat, *, tokenizer: Tokenizer | None = None, in_thought: bool = False,
                 schemas: Mapping[str, Mapping] | None = None, markers: Iterable[str] = (),
                 unmarked_thought: bool = False, thought_in_content: bool = False, json_answer: bool = False):
        self.format = reply_format
        self._thought_in_content = thought_in_content and reply_format.reasoning is not None
        self._json_answer = json_answer
        self._shown = GrownText()  # the answer's text the events gave so far
        self._held = ""            # the answer's text held back by an option until it is decided
        self._thought_given = False  # thought_in_content: the thought went out as the answer's start
        self._stream = TokenStream(tokenizer) if tokenizer is not None else None
        self._schemas = dict(schemas or {})
        if not markers and tokenizer is not None and reply_format.calls is not None:
            markers = reply_format.calls.markers(tokenizer.special_texts())  # (as the toolbox gives them)
        self._markers = frozenset(markers)
        self._unshown = _remover(self._markers) if reply_format.calls is not None else None
        form = self._stream.stream_form if self._stream is not None else str
        r = reply_format.reasoning
        marks = r.channels() if r is not None else None
        self._splitter: ThoughtSplitter | ChannelSplitter | None = None
        triggers = [form(t) for t in call_triggers(reply_format.calls)] if reply_format.calls is not None else []
        if marks is not None:
            channels = Channels(form(marks[0]), form(marks[1]), form(marks[2]), *marks[3:])
            self._splitter = ChannelSplitter(channels, in_thought, _call_form(reply_format.calls, form))
        elif r is not None:
            self._splitter = ThoughtSplitter(form(r.open), form(r.close), form(r.answer_open) if r.answer_open else "",
                                             in_thought, shown=None, call_triggers=triggers, unmarked=unmarked_thought)
        elif reply_format.answer_lead:  # (a splitter with no thought: it only takes the opening off)
            self._splitter = ThoughtSplitter("", "", form(reply_format.answer_lead), shown=None)
        self._answer = AnswerStage(reply_format.stop_strings, reply_format.calls)
        self._written_answer = GrownText()  # all the answer the thought stage gave, the call syntax's tokens as text
        self._prefilled_answer = 0  # how much of it was the reply's prefilled start (go_on_from)
        self._scanned = 0          # how far the calls' text has been looked through for names
        self._after_name = False   # a call's name is said: its text goes out as CallArguments
        self.opened_in_thought = in_thought
        self.thought_tokens = 0    # tokens fed while in a thought (its markers too)
        self._whole = GrownText()  # the reply as written, control tokens in the stream's form
        self.message: ParsedReply | None = None  # at the end

    @property
    def text(self) -> str:
        """The answer as the events showed it so far (at the end: the message's content, as shown)."""
        return str(self._shown)

    @property
    def raw_answer(self) -> str:
        """The answer exactly as written (the whitespace after a thought kept, a call's text too), for the
        history."""
        return (self._splitter.answer_lead if self._splitter is not None else "") + self._answer.raw

    @property
    def stream(self) -> str:
        """The whole reply so far in the stream's form (control tokens as private characters), for the loop
        guard's look at its tail (joined when read: the guard looks every few tokens)."""
        return str(self._whole)

    @property
    def written(self) -> str:
        """The whole reply as the model wrote it, control tokens as their text."""
        return as_written(str(self._whole))

    @property
    def thought_raw(self) -> str:
        """The thought exactly as written between its markers, less control tokens (what history keeps)."""
        return without_hidden(self._splitter.thought_raw) if self._splitter is not None else ""

    @property
    def thought(self) -> str:
        return self._splitter.thought if self._splitter is not None else ""

    @property
    def in_thought(self) -> bool:
        return self._splitter is not None and self._splitter.in_thought

    @property
    def in_call(self) -> bool:
        return self._answer.in_call

    @property
    def stopped_by(self) -> str | None:
        return self._answer.stopped_by

    def feed(self, token_id: int) -> list[ReplyEvent]:
        """The events of one generated token."""
        assert self._stream is not None, "a parser of text is fed text (feed_text)"
        if self.in_thought:
            self.thought_tokens += 1
        return self.feed_text(self._stream.feed(token_id))

    def feed_text(self, piece: str) -> list[ReplyEvent]:
        """The events of a piece of the reply's text (a parser made with a tokenizer takes the stream's
        form: control tokens between ``HIDDEN_OPEN`` and ``HIDDEN_CLOSE``)."""
        self._whole += piece
        if self._splitter is None:
            return self._given(self._answer_events(piece, []))
        answer = self._splitter.feed(piece)
        return self._given(self._answer_events(answer, self._thought_events()))

    def go_on_from(self, written: str | Sequence[int]) -> None:
        """Read the start of the reply that the prompt already holds (``continuation.Prefill.written``, as
        text or ids): its events are not given (it is on screen already, or the user wrote it), and the
        message at the end holds it. A stop string in it is the user's text, as llama-server reads a
        prefilled reply: only what the model writes after it can stop the reply."""
        self._answer.stopping = False
        try:
            if isinstance(written, str):
                self.feed_text(written)
            else:
                for token_id in written:
                    self.feed(token_id)
            self._thought_events()
        finally:
            self._answer.stopping = True
            self._prefilled_answer = len(self._written_answer)

    def partial(self) -> ParsedReply:
        """The message so far of a reply still coming, as llama.cpp's partial parse reads one: the answer
        and thought as shown (a tail that may start a stop string or a call is not yet either), the calls
        written whole, and the call still being written (``open_call``, its arguments' text so far)."""
        content = self._unshown(self._answer.text) if self._unshown is not None else self._answer.text
        calls: tuple[ToolCall, ...] = ()
        open_call = None
        syntax = self.format.calls
        if syntax is not None and self.in_call:
            written = as_written(self._answer.call)
            unfinished = unfinished_call(syntax, written)
            whole = written[:unfinished[0]] if unfinished is not None else written
            calls = read_calls(syntax, whole, "", False, self._schemas).tool_calls if whole.strip() else ()
            open_call = unfinished[1] if unfinished is not None else None
        elif isinstance(self._splitter, ChannelSplitter):
            calls = tuple(channel_calls(self._splitter.calls, []))
        return ParsedReply(content.strip(), self.thought, calls, "", self.in_thought, open_call)

    def finish(self) -> list[ReplyEvent]:
        """The rest of the reply (a held stop string's start, an unfinished character replaced), each call
        read whole, and the message (``read_reply.message_of``); [] when called again."""
        if self.message is not None:
            return []
        rest = self._stream.finish() if self._stream is not None else ""
        self._whole += rest
        if self._splitter is not None:
            events = self._answer_events(self._splitter.finish(rest), self._thought_events())
        else:
            events = self._answer_events(rest, [])
        shown, _ = self._answer.finish()
        events += self._shown_events(shown)
        s = self._splitter
        split = ThoughtSplit(str(self._written_answer), self.thought, as_written(s.thought_raw) if s else "",
                             s.answer_lead if s else "", self.in_thought, self.opened_in_thought,
                             closed=s is None or s.thought_closed,
                             channel_calls=tuple(s.calls) if isinstance(s, ChannelSplitter) else None)
        self.message = message_of(self.format, split, self.written, schemas=self._schemas,
                                  thought_in_content=self._thought_in_content, json_answer=self._json_answer,
                                  prefilled=self._prefilled_answer)
        if self._unshown is not None:  # (a call syntax's markers outside a call: shown nowhere, kept nowhere)
            self.message = replace(self.message, content=self._unshown(self.message.content).strip())
        events = self._given(events)
        events += self._given(self._call_events(final=True)) if self.in_call else []
        events += self._rest_of(self.message.content)
        events += [CallClosed(call) for call in self.message.tool_calls]
        return [*events, ReplyEnded(self.message, self.stopped_by)]

    def _rest_of(self, content: str) -> list[ReplyEvent]:
        """The message's content the stream has not shown yet, shown at the end: the answer's text after its
        calls (Ling writes a line after its call, shown once the calls are read), the held answer of an
        option (a thought in the content that never closed, a fenced JSON answer's inside). What was shown
        is always the content's start, so the answer shown is the message's content."""
        shown = str(self._shown).lstrip()
        if len(content) <= len(shown) or not content.startswith(shown):
            return []
        self._shown += content[len(shown):]
        return [AnswerText(content[len(shown):])]

    def _given(self, events: list[ReplyEvent]) -> list[ReplyEvent]:
        """The events as the stream gives them: with ``thought_in_content`` the thought waits until it
        closes and goes out as the answer's start, markers and all; with ``json_answer`` an answer that
        opens a fence waits for the end (``_rest_of`` shows what the message holds of it)."""
        given: list[ReplyEvent] = []
        for event in events:
            if isinstance(event, ThoughtText) and self._thought_in_content:
                continue
            if not isinstance(event, AnswerText):
                given.append(event)
                continue
            text = event.text
            if self._thought_in_content and not self._thought_given:
                r, s = self.format.reasoning, self._splitter
                if r is None or not isinstance(s, ThoughtSplitter):
                    continue  # (gpt-oss's channels: their thoughts are put together at the end, shown then)
                self._thought_given = True
                text = with_thought(as_written(s.thought_raw), s.answer_lead, self.opened_in_thought, r) + text
            if self._json_answer and not self._shown:
                self._held += text
                lead = self._held.lstrip()
                if not lead or lead.startswith("```") or "```".startswith(lead):
                    continue  # (a fence may be opening: its inside is shown at the end)
                text, self._held = self._held, ""
            self._shown += text
            given.append(AnswerText(text))
        return given

    def _thought_events(self) -> list[ReplyEvent]:
        thought = self._splitter.take_thought() if self._splitter is not None else ""
        return [ThoughtText(thought)] if thought else []

    def _answer_events(self, answer: str, events: list[ReplyEvent]) -> list[ReplyEvent]:
        """The answer's text (the stream's form) through the answer stage."""
        if not answer:
            return events
        answer = shown_as_text(answer, self._markers)  # (a stray control token: shown nowhere, kept nowhere)
        self._written_answer += answer
        shown, calls = self._answer.feed(answer)
        events += self._shown_events(shown)
        if calls:
            events += self._call_events()
        return events

    def _shown_events(self, shown: str) -> list[ReplyEvent]:
        shown = self._unshown(shown) if self._unshown is not None else shown
        return [AnswerText(shown)] if shown else []

    def _call_events(self, final: bool = False) -> list[ReplyEvent]:
        """The calls' new text: each call's name once it is written whole, then its text, up to where the
        next call may be opening (``final``: the reply is over, all of it)."""
        assert self.format.calls is not None
        text = self._answer.call
        window = max(0, self._scanned - 256)  # (a name is looked for near the end: never the whole text again)
        events: list[ReplyEvent] = []
        opened = [(at, name) for at, name in opened_calls(self.format.calls, text, window) if at >= self._scanned]
        for at, name in opened:
            if self._after_name and at > self._scanned:
                events.append(CallArguments(text[self._scanned:at]))
            events.append(CallOpened(name))
            self._after_name = True
            self._scanned = at + len(name)
        given = len(text) if final else undecided_from(self.format.calls, text, self._scanned)
        if self._after_name and given > self._scanned:  # (up to where the next call may be opening)
            events.append(CallArguments(text[self._scanned:given]))
            self._scanned = given
        return events


def _call_form(syntax: CallSyntax | None, form: Callable[[str], str]) -> CallForm | None:
    """How a channelled reply addresses a call (gpt-oss: ``to=`` and ``functions.``, from the syntax's
    opening ``" to=functions."``), and how the syntax writes one, in the stream's form."""
    if syntax is None:
        return None
    to = re.match(r"\s*(\w+=)(\S*)", syntax.opening)
    key, namespace = (to.group(1), to.group(2)) if to else ("to=", "functions.")
    return CallForm(key, namespace, form(syntax.opening), form(syntax.after_name))


def _remover(markers: frozenset[str]):
    """A call syntax's markers left out of text shown outside a call (the stream carries those that are
    control tokens as their text, for a call to be read by: Kimi K2's ``<|tool_calls_section_begin|>``)."""
    if not markers:
        return None
    pattern = re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)))
    return lambda text: pattern.sub("", text)


def parse_reply(reply_format: ReplyFormat, reply: str | Sequence[int], *, tokenizer: Tokenizer | None = None,
                schemas: Mapping[str, Mapping] | None = None, in_thought: bool | None = None,
                pieces: Sequence[str] | None = None, markers: Iterable[str] = (),
                thought_in_content: bool = False, json_answer: bool = False, prefill: Prefill | None = None,
                partial: bool = False, unmarked_thought: bool = False) -> ParsedReply:
    """The message of a whole reply, as the model wrote it after the prompt: text, or token ids (with the
    ``tokenizer`` they come from, so that control tokens are read as such). A loaded model's format is
    ``ReplyFormat.of_model(model, calls=...)``. ``schemas``: each tool's parameters by its name (values
    written as text are typed by them); ``in_thought``: whether the prompt opened a thought (by default:
    whether the template's generation prompt does); ``pieces``: ``reply`` as it streamed, fed piece by
    piece (the message is the same at every chunking). For the two options, see ``read_reply.message_of``.
    ``prefill``: the assistant message the reply goes on with (``continuation``; the message read is the
    whole). ``partial``: the reply is not over: the message so far (``ReplyParser.partial``).
    ``unmarked_thought``: as ``ReplyParser`` takes it. For example::

        >>> from tokenizer.chat.reasoning import Reasoning
        >>> qwen = ReplyFormat(Reasoning("<think>", "</think>"),
        ...                    CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>'))
        >>> reply = parse_reply(qwen, '<think>Oslo?</think>\\n\\nLet me look.\\n<tool_call>\\n'
        ...                           '{"name": "weather", "arguments": {"city": "Oslo"}}\\n</tool_call>')
        >>> reply.reasoning, reply.content, reply.tool_calls
        ('Oslo?', 'Let me look.', (ToolCall(name='weather', arguments={'city': 'Oslo'}, id=''),))

    The same reply read before its end, and a reply that goes on with a thought the prompt holds::

        >>> parse_reply(qwen, '<think>Oslo?</think>Let me look.<tool_call>{"name": "weather", "arguments": {"ci',
        ...             partial=True).open_call
        OpenCall(name='weather', arguments='{"ci', id='')
        >>> cut = parse_reply(qwen, ' Bergen?</think>Bergen.', prefill=Prefill(reasoning="Oslo?"))
        >>> cut.reasoning, cut.content
        ('Oslo? Bergen?', 'Bergen.')
    """
    r = reply_format.reasoning
    opened = r.prefilled if in_thought is None and r is not None else bool(in_thought)
    parser = ReplyParser(reply_format, tokenizer=tokenizer, in_thought=opened, schemas=schemas, markers=markers,
                         unmarked_thought=unmarked_thought, thought_in_content=thought_in_content,
                         json_answer=json_answer)
    if prefill is not None:
        parser.go_on_from(prefill.written(r, opened) if tokenizer is None else  # (its text literal, as a session's)
                          [i for text, special in prefill.segments(r, opened)
                           for i in tokenizer.encode(text, parse_special=special)])
    if isinstance(reply, str):
        for piece in pieces if pieces is not None else [reply]:
            parser.feed_text(piece)
    else:
        for token_id in reply:
            parser.feed(token_id)
    if partial:
        return parser.partial()
    parser.finish()
    assert parser.message is not None
    return parser.message
