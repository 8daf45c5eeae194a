"""The thought told from the answer as a reply streams: the markers a template writes around a thought
(``tokenizer.chat.reasoning``) found in the text, hidden, and the text on each side released as soon as
it can't be part of a marker.

Worked example, Qwen3's markers (``<think>``, ``</think>``), a reply streamed in four pieces::

    feed("<thi")             -> ""          (held: it may be the opening marker)
    feed("nk>\\nhm")          -> ""          thought "hm" (the marker and the newline after it hidden)
    feed("m\\n</think>\\n\\nH")  -> "H"         thought "hmm" (the close and the blank line hidden)
    feed("i")                -> "i"

A thought the prompt opened (``in_thought``: DeepSeek R1 distills) starts at once; one that never closes
is a thought all the same. A reply that does not open with the marker is all answer, and so is a marker
written later in it. Whitespace at the edges of the thought and the answer is held apart (``thought_raw``
and ``answer_lead`` keep it): the display shows neither, the history gets the text exactly as written.

Control tokens come in as ``HIDDEN_OPEN text HIDDEN_CLOSE`` (``reply.TokenStream``): markers made of
them match in that form, and any other is left out of both texts.

A template whose thought and answer are *channels* (gpt-oss: ``<|channel|>analysis<|message|>`` and
``<|channel|>final<|message|>``, a new message between them) lets the model write other channels
between the two: ``…<|end|><|start|>assistant<|channel|>commentary<|message|>I'll look it up.<|end|>…``.
Such a message stays on the thought's side (no stop ends the reply in it) and is shown as itself: its
text under ``[commentary]`` in the shown thought, the markers as written in ``thought_raw``. A message
addressed to a recipient before its channel (``<|end|><|start|>assistant to=functions.NAME<|channel|>…``:
a tool call) ends the thought, and is the answer, header and all: the call is parsed off the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

HIDDEN_OPEN, HIDDEN_CLOSE = "\ue000", "\ue001"  # around a control token's text in the stream
_HIDDEN = re.compile(f"{HIDDEN_OPEN}[^{HIDDEN_CLOSE}]*{HIDDEN_CLOSE}")
START, THOUGHT, ANSWER = "start", "thought", "answer"
_HEADER_MAX = 160  # a message's header is awaited this long (a call's names its tool)


@dataclass(frozen=True)
class Channels:
    """A channelled thought's marks (stream forms): what starts the next message, then ``name_start``,
    the channel's name, ``name_end`` (gpt-oss: ``<|end|><|start|>assistant``, ``<|channel|>``,
    ``<|message|>``); ``thought`` and ``answer`` are the two channels' names."""

    next_message: str
    name_start: str
    name_end: str
    thought: str
    answer: str


def without_hidden(text: str) -> str:
    """The text without the control tokens the stream carried (a stray one is never shown)."""
    return _HIDDEN.sub("", text) if HIDDEN_OPEN in text else text


def shown_as_text(text: str, markers: frozenset[str]) -> str:
    """The text less the control tokens the stream carried, but those of ``markers`` written as their text
    (a call syntax's markers, for the tool layer to hide the call from its opening on).

        >>> shown_as_text("Hi\ue000<|x|>\ue001\ue000<|call|>\ue001{}", frozenset({"<|call|>"}))
        'Hi<|call|>{}'
    """
    if not markers or HIDDEN_OPEN not in text:
        return without_hidden(text)
    return _HIDDEN.sub(lambda m: m.group()[1:-1] if m.group()[1:-1] in markers else "", text)


def as_written(text: str) -> str:
    """The text with the control tokens the stream carried written out as their own text (what a call's
    markers are matched against: Kimi K2's ``<|tool_call_begin|>`` is one such token in its vocabulary)."""
    return text.replace(HIDDEN_OPEN, "").replace(HIDDEN_CLOSE, "") if HIDDEN_OPEN in text else text


def prefix_tail(text: str, markers: Iterable[str]) -> int:
    """The length of the longest end of ``text`` that begins one of ``markers`` (0 when none): what a stream
    holds back while it may still be a marker's start.

        >>> prefix_tail("Hi </thi", ["</think>"]), prefix_tail("Hi", ["</think>"])
        (5, 0)
    """
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), best, -1):
            if marker.startswith(text[-n:]):
                best = n
                break
    return best


def _answer_openings(opening: str) -> list[str]:
    """The ways a reply that skips its thought may open the answer: the whole opening, or an end of it
    from a marker a name follows (Kimi K3's ``<|open|>response<|sep|>`` of
    ``<|close|>think<|sep|><|open|>response<|sep|>``), longest first.

        >>> _answer_openings("<|close|>think<|sep|><|open|>response<|sep|>")
        ['<|close|>think<|sep|><|open|>response<|sep|>', '<|open|>response<|sep|>']
    """
    if not opening:
        return []
    named = [m.start() for m in re.finditer(r"(?:<[^<>]*>|\[[^\[\]]*\])\w", opening) if m.start() > 0]
    return [opening, *(opening[at:] for at in named)]


class ThoughtSplitter:
    """``feed(text)`` -> the answer text to show now; ``take_thought()`` -> the thought text since."""

    def __init__(self, open_marker: str, close_marker: str, answer_open: str = "", in_thought: bool = False,
                 channels: Channels | None = None, shown: frozenset[str] | None = frozenset()):
        self._open, self._close, self._answer_open = open_marker, close_marker, answer_open
        self._shown = shown  # control tokens the answer carries as their text (None: the answer in the stream's form)
        self._channels = channels
        self._opening_due = ""  # the answer's opening, which may follow the close (hidden if it does)
        if channels is None and answer_open and close_marker.endswith(answer_open) and close_marker != answer_open:
            # a close that goes on with the answer's opening (Cohere's <|END_THINKING|><|START_TEXT|>): the
            # thought ends at its first part, whatever follows it (<|START_ACTION|> before a call)
            self._close, self._opening_due = close_marker[:-len(answer_open)], answer_open
        self.state = THOUGHT if in_thought else START
        self._fresh = in_thought  # a thought the prompt opened, nothing written in it yet
        self._skip_openings = _answer_openings(self._opening_due or answer_open) if in_thought and channels is None else []
        self._held = ""          # text that may be part of a marker
        self.thought_raw = ""    # the thought exactly as written between the markers
        self._visible = ""       # the same without control tokens (grown piece by piece, never rescanned)
        self._released = 0       # how much of the shown thought take_thought has given out
        self.answer_lead = ""    # the whitespace before the answer's first character
        self._answering = False  # the answer's first character is out

    @property
    def in_thought(self) -> bool:
        return self.state == THOUGHT

    @property
    def thought(self) -> str:
        """The thought as shown: no control tokens, no outer whitespace."""
        return self._visible.strip()

    def take_thought(self) -> str:
        """The shown thought's text since the last call (it only ever grows at its end)."""
        shown = self.thought
        new, self._released = shown[self._released:], len(shown)
        return new

    def feed(self, text: str) -> str:
        pending, self._held = self._held + text, ""
        if self.state == START:
            pending, settled = self._start(pending)
            if not settled:
                self._held = pending
                return ""
        if self.state == THOUGHT and self._channels is not None:
            rest = self._channel_messages(pending)
            if rest is None:
                return ""
            pending = rest
        elif self.state == THOUGHT:
            if self._fresh:
                pending, settled = self._skipped(pending)
                if not settled:
                    self._held = pending
                    return ""
            if self.state == ANSWER:
                return self._answer(pending)
            at = pending.find(self._close)
            if at < 0:
                keep = prefix_tail(pending, (self._close,))
                self._add_thought(pending[:len(pending) - keep])
                self._held = pending[len(pending) - keep:]
                return ""
            self._add_thought(pending[:at])
            self.state, pending = ANSWER, pending[at + len(self._close):]
            self._opening_due = self._opening_due or self._answer_open  # (Command R7B's <|START_RESPONSE|>)
        return self._answer(pending)

    def finish(self, rest: str = "") -> str:
        """The end of the reply: what is held is what it seemed (an unclosed thought stays a thought)."""
        out = self.feed(rest)
        held, self._held = self._held, ""
        if self.state == THOUGHT:
            self._add_thought(held)
            return out
        self.state = ANSWER
        self._opening_due = ""
        return out + self._answer(held)

    def _start(self, pending: str) -> tuple[str, bool]:
        """At the reply's start: (what is left, whether the state is settled)."""
        body = pending.lstrip()
        for marker, state in ((self._open, THOUGHT), (self._answer_open, ANSWER)):
            if marker and body.startswith(marker):
                self.state = state
                return body[len(marker):], True
            if marker and marker.startswith(body):
                return pending, False  # (whitespace, or the start of a marker, so far)
        self.state = ANSWER
        return pending, True

    def _skipped(self, pending: str) -> tuple[str, bool]:
        """At the start of a thought the prompt opened: a reply that opens the answer at once skipped the
        thought (Kimi K3 writes ``<|open|>response<|sep|>`` after a prefilled ``<|open|>think<|sep|>``), as
        llama.cpp reads it. (What is left, whether that is settled.)"""
        body = pending.lstrip()
        openings = self._skip_openings  # (worked out once: the thought is fresh only at the reply's start)
        if not openings:
            self._fresh = False
            return pending, True
        if not body or any(o.startswith(body) for o in openings):
            return pending, False  # (whitespace, or an opening's start, so far)
        self._fresh = False
        for opening in openings:
            if body.startswith(opening):
                self.state, self._opening_due = ANSWER, ""
                return body[len(opening):], True
        return pending, True

    def _channel_messages(self, pending: str) -> str | None:
        """In a channelled thought: the text after the answer's channel opens (None: still thinking, what
        may be a header held)."""
        c = self._channels
        assert c is not None
        while (at := pending.find(c.next_message)) >= 0:
            body = at + len(c.next_message)
            end = pending.find(c.name_end, body)
            if end < 0 and len(pending) - body < _HEADER_MAX:  # the header so far: wait for its end
                break
            if end >= 0 and not pending.startswith(c.name_start, body) and c.name_start in pending[body:end]:
                # addressed before its channel: a call (gpt-oss's " to=functions.NAME<|channel|>commentary
                # json<|message|>ARGS" after its analysis). The thought is over; the message, header and
                # all, is the answer, where the call is parsed.
                self._add_thought(pending[:at])
                self.state = ANSWER
                return pending[body:]
            addressed = re.search(r" to=(?!assistant\b)", pending[body:end]) if end >= 0 else None
            if addressed is not None:  # a channel, then a recipient (gpt-oss's "<|channel|>commentary
                self._add_thought(pending[:at])  # to=functions.NAME <|constrain|>json<|message|>ARGS"): a
                self.state = ANSWER  # call, as above; the answer from its recipient on
                return pending[body + addressed.start():]
            if end < 0 or not pending.startswith(c.name_start, body) or len(name := pending[body + len(c.name_start):end]) > 64:
                self._add_thought(pending[:body])  # not a header after all
                pending = pending[body:]
                continue
            self._add_thought(pending[:at])
            header, pending = pending[at:end + len(c.name_end)], pending[end + len(c.name_end):]
            if name == c.answer:
                self.state = ANSWER
                return pending
            self.thought_raw += header
            shown = without_hidden(name).strip()
            self._visible += "\n\n" if name == c.thought else f"\n\n[{shown}] "
        else:
            keep = prefix_tail(pending, (c.next_message,))
            self._add_thought(pending[:len(pending) - keep])
            self._held = pending[len(pending) - keep:]
            return None
        self._add_thought(pending[:at])
        self._held = pending[at:]
        return None

    def _add_thought(self, text: str) -> None:
        self.thought_raw += text
        self._visible += without_hidden(text)  # (a control token comes whole: pieces never split one)

    def _answer(self, text: str) -> str:
        if self._opening_due and not self._answering:
            body = text.lstrip()
            if self._opening_due.startswith(body):  # (whitespace, or the opening's start, so far)
                self._held = text
                return ""
            if body.startswith(self._opening_due):
                text = body[len(self._opening_due):]
            self._opening_due = ""
        if not self._answering:
            body = text.lstrip()
            self.answer_lead += text[:len(text) - len(body)]
            text, self._answering = body, bool(body)
        return text if self._shown is None else shown_as_text(text, self._shown)
