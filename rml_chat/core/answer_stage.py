"""The answer stage of the reply parser (``reply.ReplyParser``): the answer's text in, out the text to show
now and the calls' text, telling the answer from its stop strings and from its tool calls as it streams.
A tail that may start either waits for the next piece; from a call's opening on, everything is the calls'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tokenizer.chat import markers
from tokenizer.chat.tool_calls import CallSyntax

from .call_reader import addressed_start, call_triggers, opens_at
from .grown_text import GrownText
from .thoughts import prefix_tail


class AnswerStage:
    """The answer's text in; out, ``(text to show now, the calls' text)``. Text passes until a stop string
    ends the reply or a call opens, and a tail that may be the start of either waits; a call opening at or
    before a stop string wins it (GigaChat's stop ``<|message_sep|>`` starts each of its calls). From a
    call's opening on, everything is the calls' text: the stop strings end the answer, not the calls.

    Worked example, stop strings ``["\\nUser:"]``::

        >>> stage = AnswerStage(["\\nUser:"])
        >>> stage.feed("Hi👋\\n"), stage.feed("User: x"), stage.stopped_by
        (('Hi👋', ''), ('', ''), '\\nUser:')

    ``syntax``: the call syntax (None: a call is text). Where the model writes a recipient first
    (functionary v3.2), a reply that starts with a name, a newline and ``{`` is a call
    (``call_reader.addressed_start``), and the start is held until that is decided.
    """

    def __init__(self, stop_strings: Sequence[str] = (), syntax: CallSyntax | None = None):
        self._stops = tuple(s for s in stop_strings if s)
        self._syntax = syntax
        self._triggers = call_triggers(syntax) if syntax is not None else ()
        self._addressed = syntax is not None and bool(syntax.text_lead)
        self._spaced = tuple(spaced_openings(self._triggers))
        self._held = ""         # text that may start a stop string or a call
        self._started = False   # the reply's first text is past (a call named at the start no longer can be)
        self._text = GrownText()  # the answer shown, up to a stop string or a call
        self._raw = GrownText()   # the answer as written up to a stop string, its calls included (for the history)
        self.call = ""          # the calls' text, from the first call's opening on
        self.in_call = False
        self.stopped_by: str | None = None
        self.stopping = True  # (False: the text fed is the user's, a prefilled start, where no stop string counts)

    @property
    def text(self) -> str:
        """The answer shown, up to a stop string or a call."""
        return str(self._text)

    @property
    def raw(self) -> str:
        """The answer as written up to a stop string, its calls included (for the history)."""
        return str(self._raw)

    def feed(self, text: str) -> tuple[str, str]:
        if self.stopped_by is not None:
            return "", ""
        if self.in_call:
            self.call += text
            self._raw += text
            return "", text
        pending, self._held = self._held + text, ""
        if not self._started and self._addressed:  # (the reply's start: is it a call's name?)
            addressed = addressed_start(self._syntax, pending)  # type: ignore[arg-type]
            if addressed:
                return self._call_at(pending, 0)
            if addressed is None:
                self._held = pending
                return "", ""
        self._started = True
        call_at = self._first_call(pending)
        stops = self._stops if self.stopping else ()
        stop_at, stop = self._first_stop(pending)
        may_stop = len(pending) - prefix_tail(pending, stops)  # (where a longer stop string may be starting)
        if stop is not None and (call_at < 0 or stop_at < call_at):
            may_call = len(pending) - prefix_tail(pending, self._triggers)
            # (wait and see: a call may open where the stop string is, or another stop string start before
            # it; the earliest start wins, as when the reply is read whole)
            if may_call <= stop_at or may_stop < stop_at:
                held = min(may_call, may_stop)
                return self._shown(pending[:held], pending[held:])
            self.stopped_by = stop
            self._text += pending[:stop_at]
            self._raw += pending[:stop_at]
            return pending[:stop_at], ""
        if call_at >= 0:
            if may_stop < call_at:  # (a stop string may be starting before the call: wait and see)
                return self._shown(pending[:may_stop], pending[may_stop:])
            return self._call_at(pending, call_at)
        cut = len(pending) - prefix_tail(pending, stops + self._triggers)
        if self._syntax is not None:  # (the whitespace before a call is not the answer's: it waits too)
            cut = len(pending[:min(cut, self._spaced_opening(pending))].rstrip())
        return self._shown(pending[:cut], pending[cut:])

    def finish(self) -> tuple[str, str]:
        """The end: what is held is read as it stands. A call in it opens (held while a stop string might
        start before it); else a stop string in it (held while a call might open there: Kimi K3's stop
        ``<|close|>`` begins its calls' opening) ends the answer."""
        held, self._held = self._held, ""
        if self.stopped_by is not None or self.in_call:
            return "", ""
        stop_at, stop = self._first_stop(held)
        call_at = self._first_call(held)  # (held while a stop string might start before it)
        if call_at >= 0 and (stop is None or call_at <= stop_at):
            return self._call_at(held, call_at)
        if stop is not None:
            self.stopped_by, held = stop, held[:stop_at]
        return self._shown(held, "")

    def _first_stop(self, text: str) -> tuple[int, str | None]:
        """(where, which) of the stop string that starts first in ``text``; (-1, None) for none (or while the
        text fed is a prefilled start)."""
        stops = self._stops if self.stopping else ()
        return min(((text.find(s), s) for s in stops if s in text), default=(-1, None))

    def _first_call(self, text: str) -> int:
        if self._syntax is None:
            return -1
        found = [at for at in (text.find(t) for t in self._triggers) if at >= 0]
        by_pattern = opens_at(self._syntax, text)  # (in any spacing the reader takes)
        return min(found + ([by_pattern] if by_pattern >= 0 else []), default=-1)

    def _spaced_opening(self, pending: str) -> int:
        """Where a call may be opening with whitespace the template does not write after its first marker
        (Mistral Nemo's ``[TOOL_CALLS] [{"name": …`` for ``[TOOL_CALLS][{"name": …``), which the reader takes:
        the marker's place while what follows it, less whitespace, still begins the rest of the opening
        (``len(pending)``: nowhere)."""
        earliest = len(pending)
        for marker, rest in self._spaced:
            at = pending.rfind(marker)
            if at >= 0 and rest.startswith(re.sub(r"\s+", "", pending[at + len(marker):])):
                earliest = min(earliest, at)
        return earliest

    def _shown(self, text: str, held: str) -> tuple[str, str]:
        self._held = held
        self._text += text
        self._raw += text
        return text, ""

    def _call_at(self, pending: str, at: int) -> tuple[str, str]:
        before = pending[:at].rstrip()
        self._text += before
        self._raw += pending
        self.call, self.in_call = pending[at:], True
        return before, self.call


def spaced_openings(triggers: Iterable[str]) -> list[tuple[str, str]]:
    """Each call trigger that starts with a marker and goes on, as (the marker, the rest less whitespace):
    where a model may put whitespace after the marker.

        >>> spaced_openings(['[TOOL_CALLS][{"name":', "<tool_call>", '{"name":'])
        [('[TOOL_CALLS]', '[{"name":')]
    """
    found = []
    for trigger in triggers:
        marker = markers.TIGHT.match(trigger)
        if marker is not None and marker.end() < len(trigger):
            found.append((marker.group(), re.sub(r"\s+", "", trigger[marker.end():])))
    return found
