"""The REPL's input history: a file only its owner can read (mode 0600, as the sessions are), one entry per
message, and a file that can't be written never ends the chat.

A message written as a triple-quoted block is one entry, the whole block, not one entry per line: the
lines of an open block are held back (``BlockHistory``), and the REPL adds the block once it is closed.
Up then brings back the block as it was typed::

    > \"\"\"            (held back: the block is open)
    … line one      (held back)
    … \"\"\"            -> one entry: '\"\"\"\\nline one\\n\"\"\"'
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from prompt_toolkit.history import FileHistory, History

from .. import text_input

FENCE = '"""'


def history_path() -> Path:
    """``$RML_CHAT_HISTORY``, else ``$XDG_DATA_HOME/rml-chat/history``, else ``~/.local/share/rml-chat/history``."""
    if os.environ.get("RML_CHAT_HISTORY"):
        return Path(os.environ["RML_CHAT_HISTORY"])
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
        try:
            yield from super().load_history_strings()
        except (OSError, UnicodeDecodeError) as err:
            self._fail(err)

    def store_string(self, string: str) -> None:
        if self._broken:
            return
        string = text_input.from_str(string, "history", warn=lambda _: None)  # the text policy, quietly
        path = Path(self.filename)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # a new file is the owner's
            with contextlib.suppress(OSError):
                if path.stat().st_mode & 0o077:
                    path.chmod(0o600)  # an older file, made before: the owner's alone from now on
            super().store_string(string)
        except (OSError, UnicodeEncodeError) as err:
            self._fail(err)

    def _fail(self, err: Exception) -> None:
        if not self._broken:
            self._broken = True
            self._warn(f"note: history file {self.filename} can't be used ({err}); history is kept in memory only")


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
