"""A reply of messages on named channels (gpt-oss's harmony) read message by message as it streams: each
message decided once, by its header, as llama.cpp reads it.

A harmony reply is a run of messages, each ``HEADER<|message|>BODY`` ended by ``<|end|>`` and the next one
opened by ``<|start|>assistant``; the header names the message's channel (``<|channel|>analysis``) and,
for a call, its recipient (`` to=functions.NAME``, before or after the channel, with any
``<|constrain|>json``). Each message goes one way, decided when its header is read whole:

=========================================================  ===================================================
header                                                     the body is
=========================================================  ===================================================
a recipient in the tools' namespace (``to=functions.f``)    a call of ``f``, its body the arguments (empty: ``{}``)
another recipient (``to=python``, ``to=container.exec``)    a built-in tool's call: left out (no tool of ours)
the thought's channel (``analysis``)                        the thought (messages joined by a blank line)
any other channel, to no one or ``to=assistant``            the answer (``final``, and ``commentary`` preambles)
=========================================================  ===================================================

Worked example (markers as text; a real vocabulary has them as control tokens)::

    <|channel|>analysis<|message|>Oslo?<|end|><|start|>assistant<|channel|>commentary to=functions.weather
    <|constrain|>json<|message|>{"city": "Oslo"}     -> thought "Oslo?"; a call of weather, {"city": "Oslo"}

A call's message reaches the answer stage written the way the template writes a call (its syntax's
opening, the name, what follows the name), so the stream shows a call as it opens; its arguments are kept
here too, read as JSON at the end (``calls``). A text that starts with no header is the answer, as
written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenizer.chat import markers

from .thoughts import HIDDEN_CLOSE, HIDDEN_OPEN, ShownThought, as_written, prefix_tail

HEADER_MAX = 160  # a message's header is awaited this long (a call's names its tool); longer: no header
THOUGHT, ANSWER, CALL, LEFT_OUT = "thought", "answer", "call", "left out"


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


@dataclass(frozen=True)
class ChannelCall:
    """A call the reply made as a message to a tool: its name and its body as written (the arguments)."""

    name: str
    arguments: str


@dataclass(frozen=True)
class CallForm:
    """How calls are addressed and written: the recipient's key and namespace (``to=``, ``functions.``),
    and the call syntax's opening and what follows the name, in the stream's form."""

    key: str
    namespace: str
    opening: str
    after_name: str


def _first_marker(text: str) -> str:
    """The first marker of a stream-form text: a control token, or a ``<…>``/``[…]`` written as text."""
    if text.startswith(HIDDEN_OPEN) and HIDDEN_CLOSE in text:
        return text[:text.index(HIDDEN_CLOSE) + 1]
    found = markers.ANY.match(text)
    return found.group() if found else text


class ChannelSplitter(ShownThought):
    """``feed(text)`` -> the answer's text to pass on now (a call's message as the call syntax writes it);
    ``take_thought()`` -> the thought's text since; ``calls``: each call message read so far.

    The same face as ``thoughts.ThoughtSplitter`` (``thought``, ``thought_raw``, ``answer_lead``,
    ``in_thought``, ``finish``), for the reply parser to hold either."""

    def __init__(self, channels: Channels, in_thought: bool = False, call_form: CallForm | None = None):
        super().__init__()
        self._c = channels
        self._end = _first_marker(channels.next_message)        # <|end|>
        self._start = channels.next_message[len(self._end):]   # <|start|>assistant
        self._call_form = call_form
        self._key = call_form.key if call_form is not None else "to="  # (a recipient's key, tools or not)
        self._route: str | None = THOUGHT if in_thought else None  # where the current message's body goes
        self._in_header = not in_thought
        self._held = ""
        self._ending = False
        self._call_body: list[str] = []  # the current call message's body so far
        self.calls: list[ChannelCall] = []
        self.thought_closed = True

    @property
    def in_thought(self) -> bool:
        return self._route == THOUGHT

    def feed(self, text: str) -> str:
        pending, self._held = self._held + text, ""
        out: list[str] = []
        while pending:
            if self._in_header:
                pending = self._header(pending, out)
                if pending is None:
                    break
            else:
                at = pending.find(self._end)
                if at < 0:
                    keep = 0 if self._ending else prefix_tail(pending, (self._end,))
                    self._body(pending[:len(pending) - keep], out)
                    self._held = pending[len(pending) - keep:]
                    break
                self._body(pending[:at], out)
                self._message_ended()
                pending = pending[at + len(self._end):]
                self._in_header = True
        return "".join(out)

    def finish(self, rest: str = "") -> str:
        """The end of the reply: a header cut short is the current message's text; the last call is read."""
        out = self.feed(rest)
        self._ending = True
        out += self.feed("")
        held, self._held = self._held, ""
        if held:
            collected: list[str] = []
            self._body(held, collected)
            out += "".join(collected)
        self._message_ended()
        return out

    def _header(self, pending: str, out: list[str]) -> str | None:
        """A message's header read whole: the message's way decided, and what follows it returned (None:
        the header so far is held)."""
        body = pending.lstrip()
        if self._start and body.startswith(self._start):
            body = body[len(self._start):]
        elif self._start and self._start.startswith(body) and not self._ending:
            self._held = pending
            return None
        at = body.find(self._c.name_end)
        plain = as_written(body).lstrip()
        could_be = self._route is not None or plain.startswith(as_written(self._c.name_start)) or \
            as_written(self._c.name_start).startswith(plain) or plain.startswith(self._key) or self._key.startswith(plain)
        if at < 0 and could_be and len(body) < HEADER_MAX and not self._ending:
            self._held = pending
            return None
        self._in_header = False
        if at < 0 or at > HEADER_MAX or not could_be:  # no header: the text goes where the last message's went
            self._route = self._route if self._route in (THOUGHT, ANSWER) else ANSWER
            return body
        self._route = self._route_of(as_written(body[:at]), out)
        if self._route == THOUGHT:
            self._next_thought()
        if self._route == ANSWER and self._answering:  # (a second message of the answer: after a blank line)
            out.append("\n\n")
        return body[at + len(self._c.name_end):]

    def _route_of(self, header: str, out: list[str]) -> str:
        """Where a message with this header (control tokens as their text) goes; a call's opening is passed
        on as the syntax writes it."""
        form = self._call_form
        recipient = re.search(re.escape(self._key) + r"([^\s<]+)", header)
        if recipient is not None and form is not None and recipient.group(1).startswith(form.namespace):
            name = recipient.group(1)[len(form.namespace):]
            self._call_body = [name]
            out.append(form.opening + name + form.after_name)
            return CALL
        if recipient is not None and recipient.group(1) != "assistant":
            return LEFT_OUT
        name_start = as_written(self._c.name_start)
        channel = header.rsplit(name_start, 1)[1].split() if name_start in header else []
        return THOUGHT if channel and channel[0] == self._c.thought else ANSWER

    def _body(self, text: str, out: list[str]) -> None:
        if not text:
            return
        if self._route == THOUGHT:
            self._add_thought(text)
        elif self._route == CALL:
            self._call_body.append(text)
            out.append(text)
        elif self._route == ANSWER:
            out.append(self._lead_taken(text))

    def _message_ended(self) -> None:
        if self._route == CALL and self._call_body:
            name, *body = self._call_body
            self.calls.append(ChannelCall(name, as_written("".join(body)).strip()))
            self._call_body = []
