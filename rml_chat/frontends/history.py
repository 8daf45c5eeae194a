"""The REPL's input history: a file only its owner can read (mode 0600, as the sessions are), one entry per
message, and a file that can't be written never ends the chat.

The file only grows (a long paste is one entry), so the newest ``MAX_HISTORY_BYTES`` of it are read, from
the first entry that starts there: Up goes back that far, and the file keeps the rest. A path that is not
a regular file (a FIFO would wait for a writer, ``/dev/zero`` never ends) keeps the history in memory, with
a note; ``RML_CHAT_HISTORY=/dev/null`` keeps it in memory quietly, as ``HISTFILE=/dev/null`` does in a shell.

A message written as a triple-quoted block is one entry, the whole block, not one entry per line: the
lines of an open block are held back (``BlockHistory``), and the REPL adds the block once it is closed.
Up then brings back the block as it was typed::

    > \"\"\"            (held back: the block is open)
    … line one      (held back)
    … \"\"\"            -> one entry: '\"\"\"\\nline one\\n\"\"\"'
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from prompt_toolkit.history import FileHistory, History

from .. import text_input
from ..core.paths import user_path
from ..errors import NOT_A_FILE

FENCE = '"""'
MAX_HISTORY_BYTES = text_input.MAX_TEXT_BYTES  # the newest part of the history file that is read


def history_path() -> Path:
    """``$RML_CHAT_HISTORY``, else ``$XDG_DATA_HOME/rml-chat/history``, else ``~/.local/share/rml-chat/history``."""
    if os.environ.get("RML_CHAT_HISTORY"):
        return user_path(os.environ["RML_CHAT_HISTORY"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "rml-chat" / "history"


def block_closed(lines: list[str]) -> bool:
    """Whether the lines of a message that opened with triple quotes (the first without them) end the
    block: a line ending with triple quotes, other than an empty opening line.

        >>> block_closed(["hi"]), block_closed(["hi" + FENCE]), block_closed(["", "x" + FENCE])
        (False, True, True)
    """
    return lines[-1].rstrip().endswith(FENCE) and (len(lines) > 1 or lines[0].strip() != "")


def opens_block(text: str) -> bool:
    """A line that starts a triple-quoted block and does not close it on the same line."""
    stripped = text.lstrip()
    return stripped.startswith(FENCE) and not block_closed(stripped[len(FENCE):].split("\n"))


class SafeFileHistory(FileHistory):
    """A history file that, when it can't be written, warns once and keeps the history in memory."""

    def __init__(self, path: Path, warn: Callable[[str], None]):
        super().__init__(str(path))
        self._warn = warn
        self._broken = False

    def load_history_strings(self) -> Iterable[str]:
        data = self._newest_bytes()
        return reversed(entries(data)) if data else []

    def _newest_bytes(self) -> bytes | None:
        """The file's newest ``MAX_HISTORY_BYTES``, from the first entry that starts in them; None where
        there is no file to read (and, for one that is not a file, the history kept in memory)."""
        path = Path(self.filename)
        if os.path.realpath(path) == os.devnull:
            self._broken = True  # (no history file asked for: memory only, and nothing to say)
            return None
        try:
            if not path.exists():
                return None
            if not path.is_file():
                self._fail(NOT_A_FILE)
                return None
            with path.open("rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - MAX_HISTORY_BYTES))
                data = handle.read(MAX_HISTORY_BYTES)
        except OSError as err:
            self._fail(err)
            return None
        if size > MAX_HISTORY_BYTES:  # (the read starts inside an entry: the next one is the first whole)
            start = data.find(b"\n#")
            data = data[start + 1:] if start >= 0 else b""
        return data

    def store_string(self, string: str) -> None:
        if self._broken:
            return
        string = text_input.from_str(string, "history", warn=lambda _: None)  # the text policy, quietly
        path = Path(self.filename)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and not path.is_file():  # (made since it was read: a FIFO would wait for a reader)
                raise OSError(NOT_A_FILE)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # a new file is the owner's
            with contextlib.suppress(OSError):
                if path.stat().st_mode & 0o077:
                    path.chmod(0o600)  # an older file, made before: the owner's alone from now on
            super().store_string(string)
        except (OSError, UnicodeEncodeError) as err:
            self._fail(err)

    def _fail(self, err: Exception | str) -> None:
        if not self._broken:
            self._broken = True
            self._warn(f"note: history file {self.filename} can't be used ({err}); history is kept in memory only")


def entries(data: bytes) -> list[str]:
    """The entries of history-file bytes, oldest first, as prompt_toolkit writes them (a ``# time`` line,
    then each line of the entry behind ``+``)::

        >>> entries(b"\\n# 2026-12-06 10:00\\n+hi\\n\\n# 2026-12-06 10:01\\n+two\\n+lines\\n")
        ['hi', 'two\\nlines']
    """
    found: list[str] = []
    lines: list[str] = []
    for line_bytes in io.BytesIO(data):  # (lines end at "\\n" alone: an entry may hold "\\r" or U+2028)
        line = line_bytes.decode("utf-8", errors="replace")
        if line.startswith("+"):
            lines.append(line[1:])
        elif lines:
            found.append("".join(lines)[:-1])
            lines = []
    if lines:
        found.append("".join(lines)[:-1])
    return found


class BlockHistory(History):
    """A history (file or memory) that holds back the lines of an open triple-quoted block: ``holding``
    True while the REPL reads a block's lines, and a first line that opens a block is held by itself.
    ``keep`` adds an entry whatever it is (the closed block, or a block cut by Ctrl-C)."""

    def __init__(self, inner: History):
        super().__init__()
        self.inner = inner
        self.holding = False

    def load_history_strings(self) -> Iterable[str]:
        return self.inner.load_history_strings()

    def store_string(self, string: str) -> None:
        self.inner.store_string(string)

    def append_string(self, string: str) -> None:
        if self.holding or opens_block(string):
            return
        super().append_string(string)

    def keep(self, string: str) -> None:
        super().append_string(string)
