"""Keys typed while the REPL is busy (a reply streaming, a save): held for the next prompt, never echoed
into the reply, and a Ctrl-D among them honoured once the work is done.

A terminal in its usual (canonical) mode echoes what is typed wherever the cursor is, in the middle of
the reply, and swallows a Ctrl-D as an end-of-file marker the next reader never sees. So for the whole
REPL the terminal is kept in non-canonical mode without echo ("quiet"; signals stay on: Ctrl-C still
stops a reply), from ``start()`` to ``stop()``, which gives the terminal back as it was. prompt_toolkit
takes it into raw mode for each prompt and hands it back quiet. What is typed between two prompts stays in
the terminal's queue as plain bytes; a Ctrl-D typed the instant a prompt appears (a dumb terminal's
prompt is written before prompt_toolkit takes the terminal) is the byte 4 prompt_toolkit reads as Ctrl-D,
not an end-of-file marker the terminal swallows. When a command or a turn is done:

- a Ctrl-D (byte 4) among them means "leave" once the lines typed before it are done, as a shell runs
  typed-ahead commands before it reads the Ctrl-D: ``eof`` is True, ``lines`` are the whole lines typed
  before it (Enter pressed), to be sent in order, and ``text`` what was typed after the last Enter, for the
  history;
- otherwise the keys are handed to prompt_toolkit as type-ahead: the next prompt starts with them, as a
  shell's does (``typed ahead: "hel"`` -> the prompt shows ``> hel``).

With stdin not a terminal (a pipe, a test's input) it does nothing.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios

EOF_BYTE = b"\x04"


class Typeahead:
    """``start()``; then for each command or turn ``with typeahead: work()``, then
    ``held``/``eof``/``text``/``hand_to(prompt_input)``; ``stop()`` at the end."""

    def __init__(self, fd: int | None):
        self.fd = fd if fd is not None and os.isatty(fd) else None
        self.held = b""
        self._before: list | None = None  # the terminal's mode before start(), given back by stop()

    @classmethod
    def for_stdin(cls, active: bool) -> Typeahead:
        try:
            return cls(sys.stdin.fileno() if active and sys.stdin is not None else None)
        except (OSError, ValueError):  # stdin closed or not a real file
            return cls(None)

    def start(self) -> None:
        """The terminal quiet until ``stop()`` (again: nothing more)."""
        if self.fd is None or self._before is not None:
            return
        try:
            self._before = termios.tcgetattr(self.fd)
            quiet = termios.tcgetattr(self.fd)
            quiet[3] &= ~(termios.ECHO | termios.ICANON)  # lflag: no echo, bytes as typed; ISIG stays
            quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0  # (a read waits for one byte, as usual)
            termios.tcsetattr(self.fd, termios.TCSANOW, quiet)  # TCSANOW: nothing typed is flushed
        except termios.error:
            self._before = None

    def stop(self) -> None:
        """The terminal's mode as it was before ``start()``."""
        if self._before is None:
            return
        with contextlib.suppress(termios.error):
            termios.tcsetattr(self.fd, termios.TCSANOW, self._before)
        self._before = None

    def __enter__(self) -> Typeahead:
        self.held = b""
        self.start()  # (already quiet in the REPL; a caller on its own gets the same)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._before is not None:
            self.held = self._drain()

    def _drain(self) -> bytes:
        data = b""
        with contextlib.suppress(OSError):
            while select.select([self.fd], [], [], 0)[0]:
                chunk = os.read(self.fd, 4096)
                if not chunk:
                    break
                data += chunk
        return data

    @property
    def eof(self) -> bool:
        """Ctrl-D was typed while busy."""
        return EOF_BYTE in self.held

    @property
    def lines(self) -> list[str]:
        """The lines finished with Enter before a Ctrl-D (or in all of it), in order, blank ones left out.

        >>> ahead = Typeahead(None)
        >>> ahead.held = b"first\\rsecond\\r\\rthird, half\\x04"
        >>> ahead.lines, ahead.text
        (['first', 'second'], 'third, half')
        """
        return [line for line in map(_printable, self._typed()[:-1]) if line]

    @property
    def text(self) -> str:
        """What was typed after the last Enter, before a Ctrl-D (or in all of it), control characters left out."""
        return _printable(self._typed()[-1])

    def _typed(self) -> list[str]:
        before_eof = self.held.split(EOF_BYTE)[0].decode("utf-8", "replace")
        return before_eof.replace("\r\n", "\n").replace("\r", "\n").split("\n")

    def hand_to(self, prompt_input: object) -> None:
        """Give the held keys to prompt_toolkit's next prompt on ``prompt_input``, as type-ahead."""
        if not self.held or self.eof:
            return
        from prompt_toolkit.input.typeahead import store_typeahead
        from prompt_toolkit.input.vt100_parser import Vt100Parser

        keys: list = []
        parser = Vt100Parser(keys.append)
        parser.feed(self.held.decode("utf-8", "replace"))
        parser.flush()
        store_typeahead(prompt_input, keys)  # type: ignore[arg-type]
        self.held = b""


def take_back(held: bytes, prompt_input: object) -> bytes:
    """``held`` with the keys handed to prompt_toolkit before it and not yet read by a prompt in front (a
    prompt reads what is there at once and keeps what follows the first Enter for the next prompt): where
    the REPL leaves without another prompt, they are lines typed ahead like the rest."""
    from prompt_toolkit.input.typeahead import get_typeahead

    stored = get_typeahead(prompt_input)  # type: ignore[arg-type]  (and the store is emptied)
    return "".join(key.data for key in stored).encode("utf-8", "surrogatepass") + held


def _printable(typed: str) -> str:
    return "".join(ch for ch in typed if ch.isprintable() or ch == "\t").strip()
