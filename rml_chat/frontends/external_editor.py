"""Ctrl-X Ctrl-E: the message being typed, in the user's editor, then sent (as bash and prompt_toolkit do).

prompt_toolkit has this key built in, but reads the file back with no bound and no text policy: an editor
that saved Latin-1 gave a traceback and "Press ENTER to continue", and a file of 20 MB froze the prompt.
Here the file comes back as every other input does (``text_input``)::

    editor exits 0, file of valid UTF-8    the message is the file's text, sent
    ... with invalid bytes                 each becomes U+FFFD, one note, sent
    ... more than MAX_TEXT_BYTES           a note; the message stays as it was, unsent
    editor exits with a failure            a note; the message stays as it was (vim's :cq, as git reads it)
    editor leaves a FIFO, a device there   a note; the message stays as it was (opening a FIFO would wait)
    no editor can be started               a note naming $EDITOR

The editor is ``$VISUAL``, else ``$EDITOR``, else the first of prompt_toolkit's fallbacks that starts.
One newline at the file's end is the editor's, not the message's.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.document import Document
from prompt_toolkit.filters import has_selection
from prompt_toolkit.key_binding import KeyBindings

from .. import text_input
from ..errors import NOT_A_FILE

FALLBACKS = ("/usr/bin/editor", "/usr/bin/nano", "/usr/bin/pico", "/usr/bin/vi", "/usr/bin/emacs")


@dataclass(frozen=True)
class Edited:
    text: str | None  # the message now; None: as it was, and not sent
    note: str = ""    # what the user should know (a failure, replaced bytes)


def edit_externally(text: str, environ: Mapping[str, str] = os.environ,
                    fallbacks: tuple[str, ...] = FALLBACKS) -> Edited:
    """``text`` through the user's editor (the module docstring's table)."""
    with tempfile.TemporaryDirectory(prefix="rml-chat-") as folder:
        path = Path(folder) / "message.txt"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        for command in (environ.get("VISUAL"), environ.get("EDITOR"), *fallbacks):
            try:
                argv = shlex.split(command or "")
            except ValueError:  # (unbalanced quotes: not a command to start)
                continue
            if not argv:
                continue
            try:
                status = subprocess.call([*argv, str(path)])
            except OSError:
                continue
            break
        else:
            return Edited(None, "no editor could be started: set $EDITOR (or $VISUAL) to one")
        if status != 0:
            ended = f"was ended by signal {-status}" if status < 0 else f"exited with status {status}"
            return Edited(None, f"{argv[0]} {ended}; the message is as it was")
        if path.exists() and not path.is_file():  # (a FIFO would wait for a writer for ever)
            return Edited(None, f"what the editor left is {NOT_A_FILE}; the message is as it was")
        try:
            data = text_input.read_limited(path)
        except OSError as err:
            return Edited(None, f"the edited message can't be read ({err.strerror}); the message is as it was")
    notes: list[str] = []
    edited = text_input.from_bytes(data, "the edited message", warn=notes.append)
    return Edited(edited[:-1] if edited.endswith("\n") else edited, "; ".join(notes))


def editor_key(say: Callable[[str], None]) -> KeyBindings:
    """Ctrl-X Ctrl-E on a prompt: ``edit_externally`` on what is typed, the editor owning the terminal
    meanwhile; an edited message is sent, a note is ``say``-ed while the terminal is still the editor's."""
    keys = KeyBindings()

    @keys.add("c-x", "c-e", filter=~has_selection)
    def _edit(event) -> None:  # type: ignore[no-untyped-def]
        buffer = event.current_buffer

        def in_editor() -> Edited:
            edited = edit_externally(buffer.text)
            if edited.note:
                say(edited.note)
            return edited

        async def edit() -> None:
            edited = await run_in_terminal(in_editor, in_executor=True)
            if edited.text is not None:
                buffer.document = Document(edited.text, len(edited.text))
                buffer.validate_and_handle()

        event.app.create_background_task(edit())

    return keys
