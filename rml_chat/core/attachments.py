"""Files added to a message (``-f/--file PATH``, the REPL's ``/file PATH``): read as text, refused in one
line when they are not text, and written into the message as fenced blocks named by their path.

A message is put together as llm, ollama and aichat put piped text and a prompt together, in the order
they arrive: text piped into stdin first, then each file in the order given, then the instruction::

    >>> notes = Attachment("notes.txt", "Buy milk.\\n")
    >>> print(message_with(piped="", files=[notes], prompt="Summarize the file above."))
    ```notes.txt
    Buy milk.
    ```
    <BLANKLINE>
    Summarize the file above.

The fence is longer than any run of backticks in the file (CommonMark's rule), so a file of Markdown
with code blocks in it stays one block. The text is the file's exact text: a byte-order mark is no part of
it, and its line endings are kept.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import AppError
from ..text_input import MAX_TEXT_BYTES, read_limited, without_bom
from ..words import counted
from .paths import user_path

MAX_FILE_BYTES = MAX_TEXT_BYTES  # (the same bound as stdin's)


class FileRefused(AppError):
    """A path that is not a text file to read: one line, exit 1."""

    def __init__(self, message: str):
        super().__init__(message, "input")


@dataclass(frozen=True)
class Attachment:
    path: str   # as the user gave it (the message names the file so)
    text: str

    @property
    def block(self) -> str:
        """The file as it goes into the message: a fenced block whose info string is its path."""
        longest = max((len(run) for run in re.findall(r"`+", self.text)), default=0)
        fence = "`" * max(3, longest + 1)
        body = self.text if self.text.endswith("\n") or not self.text else self.text + "\n"
        return f"{fence}{self.path}\n{body}{fence}"


def read_attachment(path: str, flag: str = "--file", pipes: bool = False) -> Attachment:
    """The file at ``path`` as text, or FileRefused saying why not (its line begins with ``flag PATH``):
    missing, a directory or another kind of file, too big, binary (a NUL byte), or not UTF-8 (where the
    first invalid byte is). ``~`` is expanded (``/file ~/notes.txt``: no shell did it); the block is
    labelled with the path as given. Where ``pipes`` (the command line's ``-f <(git diff)``), a pipe is read
    to its end too, its writer waited for as ``cat`` waits (Ctrl-C ends the wait); the chat's ``/file``
    refuses one (its prompt has no process substitution, and a wait there would hold the chat)."""
    where = user_path(path)
    try:
        info = os.stat(where)
    except FileNotFoundError:
        raise FileRefused(f"{flag} {path}: no such file") from None
    except OSError as err:
        raise FileRefused(f"{flag} {path}: {err.strerror or err}") from None
    if stat.S_ISDIR(info.st_mode):
        raise FileRefused(f"{flag} {path}: a directory, not a file (name the files in it)")
    pipe = pipes and stat.S_ISFIFO(info.st_mode)
    if not stat.S_ISREG(info.st_mode) and not pipe:
        kinds = "a device or a socket" if pipes else "a pipe or a device; pipe text into stdin instead"
        raise FileRefused(f"{flag} {path}: not a regular file ({kinds})")
    if info.st_size > MAX_FILE_BYTES:
        raise FileRefused(f"{flag} {path}: {info.st_size} bytes; a file up to {MAX_FILE_BYTES} bytes is read "
                          "(no context holds more)")
    try:
        data = read_limited(where, MAX_FILE_BYTES)  # (a file that grew since its size was read: cut there)
    except OSError as err:
        raise FileRefused(f"{flag} {path}: {err.strerror or err}") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise FileRefused(f"{flag} {path}: a binary file (a NUL byte at offset {nul}), not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FileRefused(f"{flag} {path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") \
            from None
    return Attachment(path, without_bom(text))


def message_with(piped: str, files: Sequence[Attachment], prompt: str) -> str:
    """One user message of piped text, files and the instruction, a blank line apart (module docstring)."""
    parts = [piped.rstrip()] if piped.strip() else []
    parts += [a.block for a in files]
    if prompt:
        parts.append(prompt)
    return "\n\n".join(parts)


def files_note(files: Sequence[Attachment], tokens: Sequence[int]) -> str:
    """What the files weigh, for an error that the message does not fit: ``notes.txt 1200 tokens, …``."""
    return ", ".join(f"{a.path} {counted(n, 'token')}" for a, n in zip(files, tokens))
