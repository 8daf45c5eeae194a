"""Ctrl-X Ctrl-E: the message in the user's editor, read back as every input is (text_input's policy and
bound); an editor that fails or can't be started leaves the message as it was, with a note."""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap

import pytest

from rml_chat.frontends.external_editor import Edited, edit_externally
from rml_chat.text_input import MAX_TEXT_BYTES


def _editor(tmp_path, body: str) -> str:
    """An editor: a Python script that gets the file's path as its argument (``sys.argv[1]``)."""
    script = tmp_path / "editor.py"
    script.write_text("import sys\npath = sys.argv[1]\n" + textwrap.dedent(body))
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


@pytest.mark.offline
def test_the_edited_text_comes_back_without_the_editors_last_newline(tmp_path) -> None:
    editor = _editor(tmp_path, """
        text = open(path, encoding="utf-8").read()
        open(path, "w", encoding="utf-8").write(text.replace("colour", "shape") + "\\n")
    """)
    assert edit_externally("Name a colour.\nThen another.", {"EDITOR": editor}, ()) == \
        Edited("Name a shape.\nThen another.")


@pytest.mark.offline
def test_visual_comes_before_editor(tmp_path) -> None:
    editor = _editor(tmp_path, 'open(path, "w").write("from visual")')
    assert edit_externally("x", {"VISUAL": editor, "EDITOR": "false"}, ()) == Edited("from visual")


@pytest.mark.offline
def test_invalid_utf8_from_the_editor_is_replaced_with_a_note(tmp_path) -> None:
    editor = _editor(tmp_path, 'open(path, "wb").write("café \\xff".encode("latin-1"))')
    edited = edit_externally("x", {"EDITOR": editor}, ())
    assert edited.text == "caf\ufffd \ufffd"
    assert edited.note == ("the edited message is not valid UTF-8 (byte 0xe9 at offset 3); invalid bytes were "
                           "replaced with U+FFFD")


@pytest.mark.offline
def test_a_file_past_the_bound_leaves_the_message_as_it_was(tmp_path) -> None:
    editor = _editor(tmp_path, f'open(path, "wb").truncate({MAX_TEXT_BYTES + 1})')
    assert edit_externally("keep me", {"EDITOR": editor}, ()) == Edited(
        None, "the edited message can't be read (more than 8,388,608 bytes); the message is as it was")


@pytest.mark.offline
def test_an_editor_that_fails_or_cannot_start_leaves_the_message_as_it_was(tmp_path) -> None:
    aborted = _editor(tmp_path, 'open(path, "w").write("half-written"); sys.exit(1)')
    assert edit_externally("keep me", {"EDITOR": aborted}, ()).note.endswith(
        "exited with status 1; the message is as it was")
    assert edit_externally("keep me", {"EDITOR": aborted}, ()).text is None
    assert edit_externally("keep me", {"VISUAL": "/nonexistent/editor", "EDITOR": "'unbalanced"}, ()) == Edited(
        None, "no editor could be started: set $EDITOR (or $VISUAL) to one")
    fallback = _editor(tmp_path, 'open(path, "w").write("from the fallback")')
    assert edit_externally("x", {"EDITOR": "/nonexistent/editor"}, (fallback,)) == Edited("from the fallback")


@pytest.mark.offline
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_an_editor_that_leaves_a_fifo_or_a_folder_or_is_killed_leaves_the_message_as_it_was(tmp_path) -> None:
    """A FIFO in the file's place would be opened and waited on for ever."""
    for replace in ("os.mkfifo(path)", "os.mkdir(path)", "os.symlink('/dev/zero', path)"):
        editor = _editor(tmp_path, f"import os\nos.remove(path)\n{replace}")
        assert edit_externally("keep me", {"EDITOR": editor}, ()) == Edited(
            None, "what the editor left is not a regular file (a folder, a FIFO or a device); the message is as it "
                  "was"), replace
    killed = _editor(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert edit_externally("keep me", {"EDITOR": killed}, ()).note.endswith(
        "was ended by signal 9; the message is as it was")


def test_in_the_chat_a_latin1_editor_sends_the_message_and_a_failing_one_keeps_it(tmp_path) -> None:
    """Ctrl-X Ctrl-E in a terminal: prompt_toolkit's own key gave a traceback and "Press ENTER to continue"
    for the Latin-1 file. Now a note, then the reply; an editor that fails sends nothing."""
    from test_rendering import SizedTerminal

    state = tmp_path / "fail"
    editor = _editor(tmp_path, f"""
        import os
        if os.path.exists({str(state)!r}):
            sys.exit(1)
        open(path, "wb").write("Say caf\\xe9.".encode("latin-1"))
        open({str(state)!r}, "w").close()
    """)
    term = SizedTerminal(tmp_path, 100, "--temp", "0", "-n", "4", env={"EDITOR": editor})
    term.prompt_ready()
    term.send(b"Say tea.")
    start = len(term.output)
    term.send(b"\x18\x05")
    term.read_until(lambda out: b"tok/s" in out[start:] and term.at_prompt(out))
    start = len(term.output)
    term.send(b"keep this\x18\x05")
    term.read_until(lambda out: b"exited with status 1" in out[start:] and term.at_prompt(out))
    term.send(b"\x15")  # (Ctrl-U: the kept line cleared, so that /save is typed alone)
    saved = tmp_path / "chat.json"
    term.ask(f"/save {saved}".encode(), b"saved 2 messages")
    assert [m["content"] for m in json.loads(saved.read_text())["messages"]][0] == "Say caf\ufffd."
    rows = "\n".join(term.drawn())
    assert "note: the edited message is not valid UTF-8 (byte 0xe9 at offset 7)" in rows
    assert term.finish() == 0
    assert b"Traceback" not in term.output and b"Press ENTER" not in term.output
