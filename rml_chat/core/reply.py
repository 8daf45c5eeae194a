"""The reply as it streams: token ids in, text that is safe to print now out — the one path every front
end's reply takes (the REPL, a scripted run, --batch, --check).

``Reply`` joins three stages:

* the tokenizer's ``StreamDecoder`` turns ids into text, whole characters only, and hides control tokens
  (a stray ``<|im_start|>`` is never shown); the reply continues its prompt, so the first token keeps its
  leading space (``continuation``);
* ``ThoughtSplitter`` (``thoughts.py``), for a model whose template writes thoughts, tells the thought
  from the answer and hides the markers (control tokens among them are matched by id, as the stream
  carries them: ``TokenStream``);
* ``StopScanner`` holds back text that may be the start of a stop string, for as long as it may be: with
  stop "User:", a reply ending "…Us" waits for the next token, which either completes the stop (nothing of
  it is printed) or rules it out (the held text is printed).

Worked example, stop strings ["\\nUser:"]::

    scanner.feed("Hi👋\\n")   -> "Hi👋"   ("\\n" held: it may start the stop string)
    scanner.feed("User: x")  -> ""       (stop found: stopped_by "\\nUser:", text == "Hi👋")

Stop strings are looked for in the answer only. Tool calls will be told apart here too, as a further stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenizer import Tokenizer, TokenType
from tokenizer.chat.reasoning import Reasoning

from .thoughts import HIDDEN_CLOSE, HIDDEN_OPEN, Channels, ThoughtSplitter, as_written, shown_as_text, without_hidden


class StopScanner:
    """Text in, the part of it that is no stop string out; ``text`` is everything released so far."""

    def __init__(self, stop_strings: Sequence[str] = ()):
        self._stops = tuple(s for s in stop_strings if s)
        self._held = ""  # text that may be the start of a stop string
        self.text = ""
        self.stopped_by: str | None = None

    def feed(self, text: str) -> str:
        """Text that can be printed now (possibly empty). After a stop string, always empty."""
        if self.stopped_by is not None:
            return ""
        pending = self._held + text
        for stop in self._stops:
            at = pending.find(stop)
            if at >= 0:
                self.stopped_by = stop
                self._held = ""
                self.text += pending[:at]
                return pending[:at]
        keep = self._stop_prefix_length(pending)
        out, self._held = pending[:len(pending) - keep], pending[len(pending) - keep:]
        self.text += out
        return out

    def finish(self, rest: str = "") -> str:
        """``rest`` (the decoder's last text) and what is held: no stop can follow any more."""
        out = self.feed(rest)
        if self.stopped_by is not None:
            return out
        held, self._held = self._held, ""
        self.text += held
        return out + held

    def _stop_prefix_length(self, text: str) -> int:
        """Length of the longest tail of ``text`` that begins some stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if stop.startswith(text[-n:]):
                    best = n
                    break
        return best


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


class Reply:
    """One reply: ``feed(token_id)`` gives the answer text to print now, and ``take_thought()`` the
    thought text since the last call; ``finish()`` the rest. ``text`` is the answer as shown,
    ``thought`` the thought, ``stopped_by`` the stop string that ended it (None: none did).

    ``reasoning`` (the template's markers) turns on the split; ``in_thought``: the prompt opened a thought;
    ``answer_lead``: what a template without thoughts has the model write before its text (functionary
    v3.2's recipient, ``all\\n``), hidden as an answer's opening is; ``shown``: control tokens the answer
    carries as their text, for the tool layer to find a call by (its syntax's markers: it hides them)."""

    def __init__(self, tokenizer: Tokenizer, stop_strings: Sequence[str] = (), reasoning: Reasoning | None = None,
                 in_thought: bool = False, answer_lead: str = "", shown: Iterable[str] = ()):
        self._stream = TokenStream(tokenizer)
        self._scanner = StopScanner(stop_strings)
        self._shown = frozenset(shown)
        form = self._stream.stream_form
        marks = reasoning.channels() if reasoning is not None else None
        channels = None if marks is None else Channels(form(marks[0]), form(marks[1]), form(marks[2]), *marks[3:])
        self._splitter = None if reasoning is None else ThoughtSplitter(
            form(reasoning.open), form(reasoning.close), form(reasoning.answer_open) if reasoning.answer_open else "",
            in_thought, channels, self._shown)
        if reasoning is None and answer_lead:  # (a splitter with no thought: it only takes the opening off)
            self._splitter = ThoughtSplitter("", "", form(answer_lead), shown=self._shown)
        self.thought_tokens = 0  # tokens fed while in a thought (its markers too)
        self.opened_in_thought = in_thought  # the prompt opened the thought
        self._whole = ""  # the reply as written, control tokens in the stream's form

    @property
    def text(self) -> str:
        return self._scanner.text

    @property
    def raw_answer(self) -> str:
        """The answer exactly as written (the whitespace after a thought kept), for the history."""
        return (self._splitter.answer_lead if self._splitter is not None else "") + self._scanner.text

    @property
    def stream(self) -> str:
        """The whole reply so far in the stream's form (control tokens as private characters): no copy,
        for the loop guard's look at its tail."""
        return self._whole

    @property
    def written(self) -> str:
        """The whole reply as the model wrote it, control tokens as their text (``read_reply`` reads it)."""
        return as_written(self._whole)

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
    def stopped_by(self) -> str | None:
        return self._scanner.stopped_by

    def take_thought(self) -> str:
        """The thought's text released since the last call (markers left out)."""
        return self._splitter.take_thought() if self._splitter is not None else ""

    def feed(self, token_id: int) -> str:
        piece = self._stream.feed(token_id)
        self._whole += piece
        if self._splitter is None:
            return self._scanner.feed(shown_as_text(piece, self._shown))
        if self._splitter.in_thought:
            self.thought_tokens += 1
        return self._scanner.feed(self._splitter.feed(piece))

    def finish(self) -> str:
        """The rest (a held stop-string start, an unfinished character replaced); "" when called again (all
        stages are empty then)."""
        rest = self._stream.finish()
        self._whole += rest
        if self._splitter is not None:
            rest = self._splitter.finish(rest)
        return self._scanner.finish(shown_as_text(rest, self._shown))
