"""The reply as it streams: token ids in, text that is safe to print now out — the one path every front
end's reply takes (the REPL, a scripted run, --batch, --check).

``Reply`` joins two stages:

* the tokenizer's ``StreamDecoder`` turns ids into text, whole characters only, and hides control tokens
  (a stray ``<|im_start|>`` is never shown); the reply continues its prompt, so the first token keeps its
  leading space (``continuation``);
* ``StopScanner`` holds back text that may be the start of a stop string, for as long as it may be: with
  stop "User:", a reply ending "…Us" waits for the next token, which either completes the stop (nothing of
  it is printed) or rules it out (the held text is printed).

Worked example, stop strings ["\\nUser:"]::

    scanner.feed("Hi👋\\n")   -> "Hi👋"   ("\\n" held: it may start the stop string)
    scanner.feed("User: x")  -> ""       (stop found: stopped_by "\\nUser:", text == "Hi👋")

Reasoning and tool calls will be told apart here too, as further stages over the same text.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizer import Tokenizer


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


class Reply:
    """One reply: ``feed(token_id)`` gives the text to print now; ``finish()`` the rest. ``text`` is the
    reply as shown, ``stopped_by`` the stop string that ended it (None: none did)."""

    def __init__(self, tokenizer: Tokenizer, stop_strings: Sequence[str] = ()):
        self._decoder = tokenizer.stream(skip_special=True, continuation=True)
        self._scanner = StopScanner(stop_strings)

    @property
    def text(self) -> str:
        return self._scanner.text

    @property
    def stopped_by(self) -> str | None:
        return self._scanner.stopped_by

    def feed(self, token_id: int) -> str:
        return self._scanner.feed(self._decoder.feed(token_id))

    def finish(self) -> str:
        """The rest (a held stop-string start, an unfinished character replaced); "" when called again (both
        stages are empty then)."""
        return self._scanner.finish(self._decoder.finish())
