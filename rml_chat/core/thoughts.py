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

Every decision about the thought is made here, as the reply streams, so that what is shown is what the
message holds (``read_reply.message_of`` only assembles what this stage recorded). What models write beside
what their template writes, decided as llama.cpp reads it:

* the opening written again inside a thought (the prompt opened it, and the model writes ``<think>``
  anyway): a marker, hidden;
* a thought opened again in the answer (``Hi <think>b</think>there``): a thought, its text added to the
  thought's after a blank line, the answer going on after its close;
* a close with no thought open, at the answer's start or its end (Gemma 4's last ``<channel|>``): a
  marker, hidden (between two pieces of the answer it is the answer's text, as written);
* a call that opens inside a thought (``call_triggers``: a thought the model never closed before its
  call): the thought ends where the call opens, and the call is the answer's.

Control tokens come in as ``HIDDEN_OPEN text HIDDEN_CLOSE`` (``reply.TokenStream``): markers made of
them match in that form, and any other is left out of both texts.
(A template whose thought and answer are channels, gpt-oss's, is read by ``channels.ChannelSplitter``.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tokenizer.chat import markers

from .grown_text import GrownText

HIDDEN_OPEN, HIDDEN_CLOSE = "\ue000", "\ue001"  # around a control token's text in the stream
_HIDDEN = re.compile(f"{HIDDEN_OPEN}[^{HIDDEN_CLOSE}]*{HIDDEN_CLOSE}")
START, THOUGHT, ANSWER, UNMARKED = "start", "thought", "answer", "unmarked"
#: characters of a reply's start held while it may be a thought whose opening the model left out (a
#: close with no opening makes them the thought; past this many, or at the reply's end, they are the answer)
UNMARKED_HOLD = 1500


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
    named = [at for at in markers.named_after(opening) if at > 0]
    return [opening, *(opening[at:] for at in named)]


class ShownThought:
    """What both splitters keep of a reply (this module's, and ``channels.ChannelSplitter``): the thought as
    written and as shown, given out as it grows, and the whitespace before the answer."""

    def __init__(self) -> None:
        self._raw = GrownText()      # the thought exactly as written (between the markers, or its messages' bodies)
        self._visible = GrownText()  # the same without control tokens (grown piece by piece, never rescanned)
        self._lead = -1              # the whitespace before the shown thought (-1: nothing but whitespace yet)
        self._trailing = 0           # the whitespace at its end, held until more text follows it
        self._released = 0           # how much of the shown thought take_thought has given out
        self.answer_lead = ""        # the whitespace before the answer's first character
        self._answering = False      # the answer's first character is out

    @property
    def thought_raw(self) -> str:
        """The thought exactly as written (between the markers, or its messages' bodies)."""
        return str(self._raw)

    @property
    def thought(self) -> str:
        """The thought as shown: no control tokens, no outer whitespace."""
        return str(self._visible).strip()

    def take_thought(self) -> str:
        """The shown thought's text since the last call (it only ever grows at its end), read off the end of
        the thought alone: a long thought is never joined or stripped whole for it."""
        if self._lead < 0:
            return ""
        start, end = self._lead + self._released, len(self._visible) - self._trailing
        self._released = end - self._lead
        return self._visible.tail(len(self._visible) - start)[:end - start]

    def _add_thought(self, text: str) -> None:
        self._raw += text
        shown = without_hidden(text)  # (a control token comes whole: pieces never split one)
        if not shown:
            return
        if self._lead < 0 and shown.strip():
            self._lead = len(self._visible) + len(shown) - len(shown.lstrip())
        self._visible += shown
        body = shown.rstrip()
        self._trailing = self._trailing + len(shown) if not body else len(shown) - len(body)

    def _next_thought(self) -> None:
        """Another thought follows the one so far: after a blank line."""
        visible, raw = str(self._visible), str(self._raw)
        self._visible = GrownText(visible.rstrip() + "\n\n" if visible.strip() else "")
        self._trailing = 2 if visible.strip() else 0
        self._raw = GrownText(raw.rstrip() + "\n\n" if raw.strip() else "")

    def _lead_taken(self, text: str) -> str:
        """The answer's text, the whitespace before its first character kept apart (``answer_lead``)."""
        if not self._answering:
            body = text.lstrip()
            self.answer_lead += text[:len(text) - len(body)]
            text, self._answering = body, bool(body)
        return text


class ThoughtSplitter(ShownThought):
    """``feed(text)`` -> the answer text to show now; ``take_thought()`` -> the thought text since."""

    def __init__(self, open_marker: str, close_marker: str, answer_open: str = "", in_thought: bool = False,
                 shown: frozenset[str] | None = frozenset(), call_triggers: Iterable[str] = (),
                 unmarked: bool = False):
        self._open, self._close, self._answer_open = open_marker, close_marker, answer_open
        self._triggers = tuple(t for t in call_triggers if t)  # (a call opening ends a thought)
        self._calls_open = False  # a call opened: from there on everything is the call's text, never scanned
        self._stray = ""          # a close with no thought open, and the whitespace after it, held
        self._call_in_thought = False  # a call opened in the thought: held until the thought closes or the reply ends
        self.thought_closed = True     # False: a call the model opened in the thought ended it
        self._ending = False      # finish(): nothing more comes, so nothing is held as a marker's start
        self._shown = shown  # control tokens the answer carries as their text (None: the answer in the stream's form)
        self._opening_due = ""  # the answer's opening, which may follow the close (hidden if it does)
        if answer_open and close_marker.endswith(answer_open) and close_marker != answer_open:
            # a close that goes on with the answer's opening (Cohere's <|END_THINKING|><|START_TEXT|>): the
            # thought ends at its first part, whatever follows it (<|START_ACTION|> before a call)
            self._close, self._opening_due = close_marker[:-len(answer_open)], answer_open
        super().__init__()
        self.state = THOUGHT if in_thought else START
        self._fresh = in_thought  # a thought the prompt opened, nothing written in it yet
        self._skip_openings = _answer_openings(self._opening_due or answer_open) if in_thought else []
        self._held = ""          # text that may be part of a marker
        self._unmarked = unmarked and not in_thought  # the model may think without writing the opening

    @property
    def in_thought(self) -> bool:
        return self.state == THOUGHT

    def feed(self, text: str) -> str:
        pending, self._held = self._held + text, ""
        if self.state == START:
            pending, settled = self._start(pending)
            if not settled:
                self._held = pending
                return ""
        if self.state == UNMARKED:
            undecided = self._undecided(pending)
            if undecided is None:
                return ""
            pending = undecided
        if self.state == THOUGHT:
            if self._fresh:
                pending, settled = self._skipped(pending)
                if not settled:
                    self._held = pending
                    return ""
            if self.state == ANSWER:
                return self._answer(pending)
            pending = self._in_thought(pending, len(pending) - len(text))
            if pending is None:
                return ""
        return self._answer(pending)

    def _in_thought(self, pending: str, scanned: int = 0) -> str | None:
        """The thought's text up to its close (None: the thought goes on, a marker's start held); the opening
        written again is left out. What follows the thought is returned, the state then ANSWER.

        A call that opens in the thought is held from its opening (``scanned``: how much of ``pending`` was
        looked through for the close before): if the thought closes after it, it was the thought's text
        (a model thinking about a call); if the reply ends first, the thought ended where the call opened."""
        if self._call_in_thought:
            at = pending.find(self._close, max(0, scanned - len(self._close))) if self._close else -1
            if at < 0 and not self._ending:
                self._held = pending
                return None
            self._call_in_thought = False
            self.state = ANSWER
            if at < 0:  # the reply ended in the call: the thought ended where it opened
                self._opening_due, self.thought_closed = "", False
                return pending
            self._add_thought(pending[:at])
            self._opening_due = self._opening_due or self._answer_open
            return pending[at + len(self._close):]
        while True:
            found = [(at, kind) for kind, marker in (("close", self._close), ("open", self._open))
                     if marker and (at := pending.find(marker)) >= 0]
            found += [(at, "call") for t in self._triggers if (at := pending.find(t)) >= 0]
            if not found:
                keep = 0 if self._ending else prefix_tail(pending, (self._close, self._open, *self._triggers))
                self._add_thought(pending[:len(pending) - keep])
                self._held = pending[len(pending) - keep:]
                return None
            at, kind = min(found)
            self._add_thought(pending[:at])
            if kind == "open":  # (written again inside the thought: a marker all the same)
                pending = pending[at + len(self._open):]
                continue
            if kind == "call":  # (held: the thought's text, or the answer's call, as the reply goes on)
                self._call_in_thought = True
                return self._in_thought(pending[at:])
            self.state = ANSWER
            self._opening_due = self._opening_due or self._answer_open  # (Command R7B's <|START_RESPONSE|>)
            return pending[at + len(self._close):]

    def finish(self, rest: str = "") -> str:
        """The end of the reply: what is held is what it seemed (an unclosed thought stays a thought, a
        close held at the answer's end is left out)."""
        out = self.feed(rest)
        held, self._held = self._held, ""
        self._ending = True  # (from here on no stage holds anything back)
        if self.state == THOUGHT:
            after = self._in_thought(held)
            if after is None:
                return out
            held = after
        else:
            self.state, self._opening_due = ANSWER, ""
        out += self._answer(held)
        self._stray = ""  # (a close held at the answer's end: left out)
        return out

    def _start(self, pending: str) -> tuple[str, bool]:
        """At the reply's start: (what is left, whether the state is settled)."""
        body = pending.lstrip()
        for marker, state in ((self._open, THOUGHT), (self._answer_open, ANSWER)):
            if marker and body.startswith(marker):
                self.state = state
                return body[len(marker):], True
            if marker and marker.startswith(body):
                return pending, False  # (whitespace, or the start of a marker, so far)
        self.state = UNMARKED if self._unmarked else ANSWER
        return pending, True

    def _undecided(self, pending: str) -> str | None:
        """A reply that began with neither marker where the model may think without writing the opening
        (the prompt neither opened nor closed a thought): held (None) until a close makes what came before
        it the thought (what follows it is returned, the state then ANSWER), an opening, a call or
        ``UNMARKED_HOLD`` characters make it the answer (returned whole), or the reply ends."""
        marks = [("close", self._close), ("open", self._open), *(("call", t) for t in self._triggers)]
        reach = UNMARKED_HOLD + max(len(m) for _, m in marks if m)  # (a marker that starts within the hold)
        found = [(at, kind) for kind, marker in marks
                 if marker and 0 <= (at := pending.find(marker, 0, reach)) <= UNMARKED_HOLD]
        at, kind = min(found) if found else (-1, "")
        if kind == "close":
            self._add_thought(pending[:at])
            self.state = ANSWER
            self._opening_due = self._opening_due or self._answer_open
            return pending[at + len(self._close):]
        if kind or len(pending) >= reach or self._ending:  # (decided where it would be, whatever the pieces)
            self.state = ANSWER
            return pending
        self._held = pending
        return None

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

    def _answer(self, text: str) -> str:
        if self._opening_due and not self._answering:
            body = text.lstrip()
            if self._opening_due.startswith(body) and not self._ending:  # (whitespace, or the opening's start)
                self._held = text
                return ""
            if body.startswith(self._opening_due):
                text = body[len(self._opening_due):]
            self._opening_due = ""
        if not self._close or self._calls_open:
            return self._answer_text(text)
        return self._answer_markers(text)

    def _answer_markers(self, pending: str) -> str:
        """The answer's text with the thought's markers the model wrote in it decided: a thought opened
        again goes to the thought; a close with no thought open is left out at the answer's edges (held
        with the whitespace after it until text follows). A call's opening ends the scan."""
        out = []
        if self._stray:
            if not pending.strip():
                self._stray += pending
                return ""
            out.append(self._answer_text(self._stray))  # (text follows: the close was the answer's own text)
            self._stray = ""
        while True:
            found = [(at, kind) for kind, marker in (("open", self._open), ("close", self._close))
                     if marker and (at := pending.find(marker)) >= 0]
            found += [(at, "call") for t in self._triggers if (at := pending.find(t)) >= 0]
            if not found:
                keep = 0 if self._ending else prefix_tail(pending, (self._open, self._close, *self._triggers))
                out.append(self._answer_text(pending[:len(pending) - keep]))
                self._held = pending[len(pending) - keep:]
                return "".join(out)
            at, kind = min(found)
            out.append(self._answer_text(pending[:at]))
            if kind == "call":
                self._calls_open = True
                out.append(self._answer_text(pending[at:]))
                return "".join(out)
            if kind == "open":  # a thought opened again: the thought's, after a blank line
                self.state = THOUGHT
                self._next_thought()
                rest = self._in_thought(pending[at + len(self._open):])
                return "".join(out) + (self._answer(rest) if rest is not None else "")
            after = pending[at + len(self._close):]
            if not self._answering:  # (a close before any answer: a marker)
                pending = after
                continue
            if after.strip():  # (text follows at once: the answer's own text, as written)
                out.append(self._answer_text(pending[at:at + len(self._close)]))
                pending = after
                continue
            self._stray = pending[at:]  # (maybe the answer's end: held)
            return "".join(out)

    def _answer_text(self, text: str) -> str:
        text = self._lead_taken(text)
        return text if self._shown is None else shown_as_text(text, self._shown)
