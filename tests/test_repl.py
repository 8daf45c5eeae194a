"""The REPL driven through prompt_toolkit's pipe input with the real SmolLM2 model."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import busy_machine, model_path, smollm_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rml_chat.core.session import ChatSession
from rml_chat.engines.kv_cache import state_path
from rml_chat.frontends.other_commands import NOTES, SAME
from rml_chat.frontends.repl import Repl
from rml_chat.frontends.repl_commands import Commands

ENTER, ALT_ENTER = "\r", "\x1b\r"


@pytest.fixture(scope="module")
def session() -> ChatSession:
    with smollm_session(2048, 12) as made:
        yield made


def drive(session: ChatSession, keys: str, tmp_path, capsys) -> str:
    session.conversation.clear()
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        pipe.close()
        repl = Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history")
        assert repl.run() == 0
    return capsys.readouterr().out


def test_alt_enter_fence_and_bracketed_paste_each_make_one_multiline_message(session, tmp_path, capsys) -> None:
    keys = ("first line" + ALT_ENTER + "second line" + ENTER
            + '"""' + ENTER + "fenced one" + ENTER + "fenced two" + ENTER + '"""' + ENTER
            + "\x1b[200~pasted one\npasted two\x1b[201~" + ENTER)
    out = drive(session, keys, tmp_path, capsys)
    users = [m.content for m in session.conversation.messages if m.role == "user"]
    assert users == ["first line\nsecond line", "fenced one\nfenced two", "pasted one\npasted two"]
    assert len(session.conversation.messages) == 6
    assert out.count("prompt tokens evaluated") == 3 and "context " in out


def test_a_fenced_block_ended_by_ctrl_d_is_sent_not_lost(session, tmp_path, capsys) -> None:
    drive(session, '"""' + ENTER + "line one" + ENTER + "line two" + ENTER, tmp_path, capsys)
    assert session.conversation.messages[0].content == "line one\nline two"


def test_a_ctrl_c_as_a_turn_ends_does_not_end_the_session(session, tmp_path, capsys, monkeypatch) -> None:
    """A Ctrl-C can land after the reply, while its stats are written or the conversation is autosaved:
    the REPL goes on, the conversation kept (found in a real terminal: it used to end the session)."""
    saves = []
    real = Repl.autosave

    def autosave(self) -> None:
        saves.append(len(self.session.conversation.messages))
        if len(saves) == 1:
            raise KeyboardInterrupt
        real(self)

    monkeypatch.setattr(Repl, "autosave", autosave)
    out = drive(session, "Hi" + ENTER + "Bye" + ENTER, tmp_path, capsys)
    assert "[stopped by Ctrl-C; the conversation is kept]" in out
    assert [m.content for m in session.conversation.messages if m.role == "user"] == ["Hi", "Bye"]
    assert saves[:2] == [2, 2] and len(session.conversation.messages) == 4  # saved again at once, then the turn


def test_undo_save_load_round_trip(session, tmp_path, capsys) -> None:
    saved = tmp_path / "chat.json"
    keys = ("one" + ENTER + "two" + ENTER + "/undo" + ENTER + f"/save {saved}" + ENTER + "/clear" + ENTER
            + f"/load {saved}" + ENTER + "/system Be terse." + ENTER + "/info" + ENTER + "/set temp 0.2" + ENTER)
    out = drive(session, keys, tmp_path, capsys)
    data = json.loads(saved.read_text())
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"] and data["messages"][0]["content"] == "one"
    assert [m.content for m in session.conversation.messages] == [m["content"] for m in data["messages"]]
    assert "last exchange dropped" in out and "loaded 2 messages" in out and "chat format: smollm2" in out
    assert session.options.sampling.temp == 0.2 and session.conversation.system == "Be terse."
    session.options.sampling.temp, session.conversation.system = 0.0, None


def test_paths_dragged_into_the_terminal_quoted_or_escaped_name_the_file(session, tmp_path, capsys) -> None:
    """No shell reads the chat's prompt: a path in quotes (GNOME Terminal drops a file so) or with its
    spaces escaped (macOS Terminal, iTerm2) names the file as the shell would read it."""
    folder = tmp_path / "my chats"
    folder.mkdir()
    (folder / "notes one.txt").write_text("Milk.\n")
    escaped = str(folder).replace(" ", "\\ ")
    keys = (f"/file {escaped}/notes\\ one.txt" + ENTER + "hi" + ENTER + f"/save '{folder}/chat one.json'" + ENTER
            + "/clear" + ENTER + f'/load "{folder}/chat one.json"' + ENTER + f"/export {escaped}/chat\\ one.md" + ENTER
            + f"/schema @'{folder}/notes one.txt'" + ENTER + "/schema off" + ENTER)
    out = drive(session, keys, tmp_path, capsys)
    assert {"chat one.json", "chat one.md", "notes one.txt"} <= {p.name for p in folder.iterdir()}  # (and the state)
    assert f"saved 2 messages to {folder}/chat one.json" in out and f"loaded 2 messages from {folder}/chat one.json" in out
    assert "Milk." in session.conversation.messages[0].content
    assert "error: /schema: not valid JSON (Expecting value" in out  # (the file was found, read, and refused)


def test_save_on_a_full_disk_keeps_the_old_file_and_says_so(session, tmp_path, capsys, monkeypatch) -> None:
    target = tmp_path / "chat.json"
    target.write_text("old")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    out = drive(session, "hi" + ENTER + f"/save {target}" + ENTER + f"/save {tmp_path}/no/such/dir/x.json" + ENTER,
                tmp_path, capsys)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["chat.json", "history"]
    assert "save failed (No space left on device); the old file is unchanged" in out
    assert "can't write there" in out and len(session.conversation.messages) == 2


def test_a_history_file_that_cannot_be_written_warns_once_and_chat_goes_on(session, tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    session.conversation.clear()
    with create_pipe_input() as pipe:
        pipe.send_text("a" + ENTER + "b" + ENTER)
        pipe.close()
        repl = Repl(session, input=pipe, output=DummyOutput(), history=blocker / "sub" / "history")
        assert repl.run() == 0
    out = capsys.readouterr().out
    assert out.count("can't be used") == 1 and len(session.conversation.messages) == 4


def test_regen_replaces_the_last_reply_and_help_and_stats_answer(session, tmp_path, capsys) -> None:
    keys = "/regen" + ENTER + "Name a fruit." + ENTER + "/set temp 1.5" + ENTER + "/set seed 7" + ENTER + "/regen" + ENTER
    out = drive(session, keys + "/stats" + ENTER + "/help" + ENTER, tmp_path, capsys)
    assert "no reply to generate again" in out
    assert [m.role for m in session.conversation.messages] == ["user", "assistant"]
    assert out.count(" evaluated · ") == 3  # two replies and /stats
    assert "/regen" in out and "/undo" in out and "drop the last exchange" in out
    session.options.sampling.temp, session.options.sampling.seed = 0.0, -1


def test_one_token_has_no_rate(session, tmp_path, capsys) -> None:
    session.options.sampling.max_tokens = 1
    try:
        out = drive(session, "hi" + ENTER + "/stats" + ENTER, tmp_path, capsys)
    finally:
        session.options.sampling.max_tokens = 12
    assert "· 1 token · context" in out and "tok/s" not in out


def test_unknown_command_and_bad_set_are_explained(session, tmp_path, capsys) -> None:
    out = drive(session, "/frobnicate" + ENTER + "/set temp hot" + ENTER + "/set nope 1" + ENTER + "/set top-k" + ENTER
                + "/set ctx-size 8192" + ENTER + "/set top-k 4294967297" + ENTER + "/set logit-bias 49152+1" + ENTER
                + "/set seed 4294967295" + ENTER, tmp_path, capsys)
    assert "error: top-k must be a whole number from 0 to 2147483647 (0: off), not '4294967297'" in out
    assert "logit-bias 49152+1: the vocabulary has 49152 tokens (ids 0 to 49151)" in out  # (as the flag says it)
    assert "4294967295 is llama.cpp's random too" in out and session.options.sampling.logit_bias == ()
    assert "unknown command /frobnicate" in out and "unknown setting 'nope'; /set changes temp, top-k" in out
    assert "error: temp must be a number 0 or more (0: greedy), not 'hot'" in out
    assert "usage: /set top-k VALUE, a whole number from 0 to 2147483647 (0: off)" in out
    assert "--ctx-size is set when rml-chat starts: leave, then rml-chat --resume --ctx-size 8192" in out


def test_ollamas_and_llama_clis_commands_do_here_what_they_do_there(session, tmp_path, capsys) -> None:
    """Someone who has typed /bye and /set parameter for a year types them here too: each runs as ours where
    ours does the same, else is one line saying what does (never "unknown command")."""
    notes = tmp_path / "notes.txt"
    notes.write_text("Milk.")
    keys = ["/set parameter temperature 0.3", "/set parameter num_predict 9", "/set parameter num_ctx 8192",
            "/set  system  Be brief.", "/show system", "/set format json", "/set noformat", f"/read {notes}",
            "/show modelfile", "/set verbose", "/load qwen3:8b", "/set think", "/?", "/bye", "never sent"]
    try:
        out = drive(session, ENTER.join(keys) + ENTER, tmp_path, capsys)
    finally:
        session.options.sampling.temp, session.options.sampling.max_tokens = 0.0, 12
        system, session.conversation.system = session.conversation.system, None
    assert "temp = 0.3" in out and "max-tokens = 9" in out
    assert "--ctx-size is set when rml-chat starts: leave, then rml-chat --resume --ctx-size 8192" in out
    assert system == "Be brief." and "system message: 'Be brief.'" in out
    assert "replies follow a JSON schema now (/schema off to stop)" in out and "replies are free text again" in out
    assert "notes.txt" in out and "/show modelfile is ollama's: rml-chat reads no Modelfile" in out
    assert "/set verbose is ollama's: the figures of each reply are the dim line after it" in out
    assert "qwen3:8b: can't read (No such file or directory) (/load reads a chat saved with /save; one chat opens " \
           "one model" in out
    assert "/regen" in out and "unknown command" not in out  # (/? is the help; /set think: the model has no switch)
    assert session.conversation.messages == []  # (/bye left: the last line was never sent)
    ours = set(Commands(None).names())  # type: ignore[arg-type]  (the table alone: no chat needed)
    assert not ours & {head for head in [*SAME, *NOTES] if " " not in head}  # (another tool's word never hides ours)


def test_a_fenced_block_is_one_history_entry_and_the_history_file_is_the_owners(session, tmp_path, capsys) -> None:
    drive(session, '"""' + ENTER + "line one" + ENTER + 'line two"""' + ENTER + "plain" + ENTER
          + '"""closed at once"""' + ENTER, tmp_path, capsys)
    history = (tmp_path / "history").read_text()
    entries = [block.split("\n", 1)[1] for block in history.split("\n# ")[1:]]
    assert entries == ['+"""\n+line one\n+line two"""\n', "+plain\n", '+"""closed at once"""\n']
    assert (tmp_path / "history").stat().st_mode & 0o777 == 0o600


def test_history_and_system_show_the_transcript_and_the_templates_default(session, tmp_path, capsys) -> None:
    session.conversation.window_start = 0
    out = drive(session, "one" + ENTER + "two" + ENTER + "/system" + ENTER, tmp_path, capsys)
    session.conversation.window_start = 2  # as an overflow leaves it
    with create_pipe_input() as pipe:
        pipe.send_text("/history" + ENTER)
        pipe.close()
        Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history").run()
    out += capsys.readouterr().out
    assert "the template writes its default one, 'You are a helpful AI assistant named SmolLM" in out
    assert "    1 user      one" in out and "    3 user      two" in out
    assert out.index("    2 assistant") < out.index("the model's window starts here (2 messages above") < out.index(
        "    3 user")
    session.conversation.window_start = 0


class Terminal:
    """rml-chat in a real pty: write keys, read until a condition holds."""

    def __init__(self, tmp_path, *args: str, model: bool = True, env: dict | None = None,
                 command: list[str] | None = None):
        """rml-chat with ``args`` (and SmolLM2 where ``model``), or ``command`` (a shell that starts it)."""
        env = {**(env or os.environ), "RML_CHAT_HISTORY": str(tmp_path / "history"), "TERM": "dumb",
               "RML_CHAT_SESSIONS": str(tmp_path / "sessions")}
        command = command or [sys.executable, "-m", "rml_chat", *([str(model_path("smollm2"))] if model else []), *args]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvpe(command[0], command, env)
        self.output = b""

    def read_until(self, done, timeout: float = 180) -> None:
        end = time.time() + timeout
        while not done(self.output) and time.time() < end:
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.output += os.read(self.fd, 65536)
                except OSError:
                    break
        assert done(self.output), self.output[-2000:]

    def prompt_ready(self) -> None:
        self.read_until(lambda out: out.endswith(b"> "))
        time.sleep(0.3)  # prompt_toolkit may still be switching the terminal to raw mode

    def ask(self, keys: bytes, answered: bytes) -> None:
        """Send a line and wait until its answer (``answered`` in what follows) is out and the prompt is back."""
        start = len(self.output)
        self.send(keys + b"\r")
        self.read_until(lambda out: answered in out[start:] and out.endswith(b"> "))
        self.prompt_ready()

    def send(self, keys: bytes) -> None:
        """Write in small pieces, draining output between them (the child echoes what it reads: with
        both pty buffers full, a blocking write would deadlock)."""
        while keys:
            readable, writable, _ = select.select([self.fd], [self.fd], [], 1)
            if readable:
                self.output += os.read(self.fd, 65536)
            if writable:
                keys = keys[os.write(self.fd, keys[:512]):]

    def finish(self) -> int:
        """Ctrl-D, then everything the program writes until it exits; its exit code."""
        self.send(b"\x04")
        return self.exit_code()

    def exit_code(self) -> int:
        """Everything the program writes until it exits (by itself: ``--models``); its exit code."""
        end = time.time() + 60
        while time.time() < end:
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the program has exited: its side of the pty is closed
                    break
                if not chunk:
                    break
                self.output += chunk
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def interrupt_save_and_leave(self, saved, cut: bytes = b"reply cut by Ctrl-C", count: int = 2,
                                 interrupt: bool = True) -> list[dict]:
        """Ctrl-C (unless done already), then /save the conversation and Ctrl-D; the saved messages."""
        if interrupt:
            self.send(b"\x03")
        self.read_until(lambda out: cut in out)
        self.prompt_ready()
        self.send(f"/save {saved}\r".encode())
        self.read_until(lambda out: f"saved {count} message".encode() in out)
        self.prompt_ready()
        assert self.finish() == 0
        return json.loads(saved.read_text())["messages"]


def test_ctrl_c_mid_reply_keeps_the_partial_reply_marked_cut(tmp_path) -> None:
    saved = tmp_path / "cut.json"
    term = Terminal(tmp_path, "--temp", "0.9", "--seed", "3", "-n", "4000", "-c", "4096")
    term.prompt_ready()
    term.send(b"Write a very long story about a dragon and a knight.\r")
    start = len(term.output)
    # the prompt has taken the line (the terminal is back in cooked mode, where Ctrl-C is a signal; a
    # byte count from the send alone can be reached by the echo and lose the Ctrl-C to the prompt) ...
    term.read_until(lambda out: b"\r\n" in out[start:])
    accepted = term.output.index(b"\r\n", start)
    term.read_until(lambda out: len(out) - accepted > 300)  # ... and the reply is streaming
    messages = term.interrupt_save_and_leave(saved)
    assert messages[1]["role"] == "assistant" and messages[1]["cut"] is True and len(messages[1]["content"]) > 20


def test_ctrl_c_at_the_prompt_or_at_edit_keeps_what_was_typed_in_the_history_on_a_dumb_terminal(tmp_path) -> None:
    """Terminal runs with TERM=dumb, where prompt_toolkit's plain prompt answers Ctrl-C with its own key
    binding: what was typed must still reach the history, and ``edit>`` must show the text it starts with."""
    saved = tmp_path / "kept.json"
    term = Terminal(tmp_path, "-n", "4", "--temp", "0")
    term.prompt_ready()
    term.send(b"remember this line")
    term.read_until(lambda out: out.endswith(b"remember this line"))
    term.send(b"\x03")
    term.read_until(lambda out: b"what you typed is in the history, press Up)" in out)
    term.prompt_ready()
    term.ask(b"\x1b[A", b"stop:")  # Up, Enter: the line comes back and is sent
    start = len(term.output)
    term.send(b"/edit\r")
    term.read_until(lambda out: b"edit> remember this line" in out[start:])
    time.sleep(0.3)
    term.send(b" too\x03")
    term.read_until(lambda out: b"/edit: left; nothing generated" in out[start:] and out.endswith(b"> "))
    assert b"(your change is in the history, press Up)" in term.output[start:]
    assert "+remember this line too\n" in (tmp_path / "history").read_text()
    term.prompt_ready()
    term.send(b'"""\r')  # a block: its lines and the one being typed are one entry
    term.read_until(lambda out: out.endswith("\u2026 ".encode()))
    time.sleep(0.3)
    term.send(b"line a\r")
    term.read_until(lambda out: out.endswith("\u2026 ".encode()) and out.count("\u2026 ".encode()) == 2)
    time.sleep(0.3)  # (the prompt switching the terminal to raw mode: prompt_ready's wait)
    term.send(b"line b")
    term.read_until(lambda out: out.endswith(b"line b"))
    term.send(b"\x03")
    term.read_until(lambda out: out.count(b"what you typed is in the history, press Up)") == 2)
    assert '+"""\n+line a\n+line b\n' in (tmp_path / "history").read_text()
    term.prompt_ready()
    messages = term.interrupt_save_and_leave(saved, b"", 2, interrupt=False)
    assert messages[0] == {"role": "user", "content": "remember this line"}


def test_ctrl_c_during_prompt_evaluation_keeps_the_message_and_records_no_reply(tmp_path) -> None:
    saved = tmp_path / "eval.json"
    term = Terminal(tmp_path, "-c", "8192")
    term.prompt_ready()
    message = "word " * 4000
    before = len(term.output)
    term.send(b"\x1b[200~" + message.encode() + b"\x1b[201~\r")  # pasted
    term.read_until(lambda out: len(out) > before and out.endswith(b"\r\n"))  # accepted: the prompt is done
    time.sleep(0.8)  # the terminal is back in cooked mode (Ctrl-C is a signal again); evaluation takes seconds
    term.read_until(lambda out: re.search(rb"evaluating the prompt: [1-9]\d*/", out[before:]) is not None)
    term.send(b"\x03")
    term.read_until(lambda out: b"cut during the prompt's evaluation" in out)
    term.prompt_ready()
    term.send(b"/stats\r")  # what was done, not what was planned
    term.read_until(lambda out: b"tokens evaluated (the cache keeps them" in out)
    done, planned = re.search(rb"evaluation: (\d+) of (\d+) tokens evaluated", term.output).groups()
    assert 0 < int(done) < int(planned) and int(planned) > 4000, (done, planned)
    messages = term.interrupt_save_and_leave(saved, b"cut during the prompt's evaluation", 1, interrupt=False)
    assert messages == [{"role": "user", "content": message}]


def test_ctrl_c_while_loading_is_one_line_and_exit_130(tmp_path) -> None:
    term = Terminal(tmp_path)
    term.read_until(lambda out: b"loading" in out, 30)  # not a fixed delay: on a busy machine that can
    term.send(b"\x03")                                   # land before Python has even started
    term.read_until(lambda out: re.search(rb"interrupted[^\n]*\n", out) is not None, 30)  # the whole line
    _, status = os.waitpid(term.pid, 0)
    os.close(term.fd)
    assert os.waitstatus_to_exitcode(status) == 130 and b"Traceback" not in term.output
    assert b"rml-chat: interrupted while loading the model\r\n" in term.output, term.output


def _streaming(term: Terminal, message: bytes, chars: int = 200) -> None:
    """Send a message and wait until its reply has streamed ``chars`` bytes."""
    term.send(message + b"\r")
    start = len(term.output)
    term.read_until(lambda out: b"\r\n" in out[start:])
    accepted = term.output.index(b"\r\n", start)
    term.read_until(lambda out: len(out) - accepted > chars)


def test_stray_escape_codes_typed_into_the_prompt_are_dropped_and_the_line_kept(tmp_path) -> None:
    """A colour code pasted without bracketed paste reads as a mouse report (ESC [ 31 m); prompt_toolkit's own
    handler failed on it with a traceback and "Press ENTER to continue". Malformed and well-formed reports,
    and a cursor-position report, leave what was typed as it was."""
    term = Terminal(tmp_path, "--temp", "0", "-n", "4")
    term.prompt_ready()
    term.ask(b"red \x1b[31mtext\x1b[0m and \x1b[<1;2m\x1b[<0;10;5M\x1b[12;40R done", b"stop: length")
    term.ask(b"/history", b"1 user      red text and  done")
    assert term.finish() == 0
    assert b"Traceback" not in term.output and b"Press ENTER" not in term.output


def test_keys_typed_during_a_reply_wait_for_the_next_prompt_and_never_enter_the_reply(tmp_path) -> None:
    term = Terminal(tmp_path, "--temp", "0", "-n", "120")
    term.prompt_ready()
    _streaming(term, b"Write a long story about a dragon.")
    typed_at = len(term.output)
    term.send(b"typed ahead")
    term.read_until(lambda out: b"stop: length" in out)
    term.read_until(lambda out: out.endswith(b"typed ahead"))  # the next prompt starts with them ...
    shown = term.output[typed_at:]
    assert shown.count(b"typed ahead") == 1 and shown.rindex(b"typed ahead") > shown.index(b"stop: length")
    term.send(b" and sent\r")  # ... and they are the start of the next message
    term.read_until(lambda out: out.count(b"stop: length") == 2)
    term.prompt_ready()
    assert term.finish() == 0
    assert b"[reply cut at -n 120 tokens; /continue goes on, /set n -1 lets replies run to their end]" in term.output  # said, dim
    saved = json.loads(next((tmp_path / "sessions").glob("*.json")).read_text())
    assert saved["messages"][2]["content"] == "typed ahead and sent"


def test_ctrl_d_during_a_reply_leaves_once_it_is_done_and_says_so(tmp_path) -> None:
    term = Terminal(tmp_path, "--temp", "0", "-n", "120", "--sessions-max", "0")
    term.prompt_ready()
    _streaming(term, b"Write a long story about a dragon.")
    term.send(b"Name a colour.\rhalf a line\x04")  # a whole line, then one left half-typed
    term.read_until(lambda out: b"reopens it" in out)
    _, status = os.waitpid(term.pid, 0)
    os.close(term.fd)
    assert os.waitstatus_to_exitcode(status) == 0
    out = term.output.decode("utf-8", "replace")
    # the whole line is sent first, as a shell runs typed-ahead lines before it reads the Ctrl-D
    assert out.count("stop: length") + out.count("stop: stop") == 2
    assert re.search(r"> Name a colour\.(\x1b\[2m)?  \(typed ahead\)", out)
    assert "(Ctrl-D while busy: leaving now; what you typed is in the history)" in out
    assert "saved 4 messages: rml-chat --resume reopens it" in out  # --sessions-max 0: no state kept
    assert "+half a line" in (tmp_path / "history").read_text()
    (chat,) = (tmp_path / "sessions").glob("*.json")
    messages = json.loads(chat.read_text())["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 2 and messages[2]["content"] == "Name a colour."
    assert not list((tmp_path / "sessions").glob("*.kv"))


def test_lines_and_ctrl_d_sent_the_instant_a_prompt_appears_are_taken(tmp_path) -> None:
    """A dumb terminal's prompt is written before prompt_toolkit takes the terminal: a key sent at once
    reaches the terminal in its own mode. The REPL keeps it quiet, so a line is answered (and shown once)
    and a Ctrl-D leaves, however fast they come (once, a Ctrl-D swallowed there left the REPL waiting)."""
    term = Terminal(tmp_path, "--temp", "0", "-n", "4")
    term.read_until(lambda out: out.endswith(b"> "))
    for n in range(3):  # each line the moment its prompt is drawn, no pause
        start = len(term.output)
        term.send(f"Name colour {n}.\r".encode())
        term.read_until(lambda out, start=start: b"stop: length" in out[start:] and out.endswith(b"> "))
        assert term.output[start:].count(f"Name colour {n}.".encode()) == 1  # (not echoed by the terminal too)
    term.send(b"\x04")
    end, reaped = time.time() + 60, (0, 0)
    while time.time() < end and reaped == (0, 0):
        if select.select([term.fd], [], [], 0.1)[0]:
            with contextlib.suppress(OSError):  # (its side of the pty closed: it is leaving)
                term.output += os.read(term.fd, 65536)
        reaped = os.waitpid(term.pid, os.WNOHANG)
    if reaped == (0, 0):  # still at the prompt a minute later: the Ctrl-D was lost
        os.kill(term.pid, signal.SIGKILL)
        os.waitpid(term.pid, 0)
    assert reaped[0] == term.pid and os.waitstatus_to_exitcode(reaped[1]) == 0, term.output[-300:]
    os.close(term.fd)


def test_resume_by_name_shows_the_last_exchange_and_brings_back_the_settings(tmp_path) -> None:
    term = Terminal(tmp_path, "--temp", "0", "-n", "8")
    term.prompt_ready()
    for line, answer in ((b"/set top-k 7", b"top-k = 7"), (b"/name dragons", b"is named 'dragons'"),
                         (b"Say hello.", b"stop: "), (b"word " * 300, b"stop: ")):
        term.ask(line, answer)
    assert term.finish() == 0
    assert b"saved 4 messages and llama.cpp's state (" in term.output  # 300 words: worth a state
    listed = subprocess.run([sys.executable, "-m", "rml_chat", "--sessions"], capture_output=True, text=True,
                            env={**os.environ, "RML_CHAT_SESSIONS": str(tmp_path / "sessions")})
    assert "[dragons] Say hello." in listed.stdout
    again = Terminal(tmp_path, "--resume", "dragons", model=False)
    again.prompt_ready()
    again.ask(b"/info", b"settings: ")
    assert again.finish() == 0
    out = again.output.decode("utf-8", "replace")
    assert "settings of the chat restored: top-k=7" in out and "top-k=7" in out.split("settings: ")[1]
    assert "llama.cpp's state restored" in out and "resumed: 4 messages; the last exchange:" in out
    assert "> word word" in out


def test_leaving_writes_a_state_only_when_worth_it_and_says_saving_when_it_takes_a_while(
        session, tmp_path, capsys, monkeypatch) -> None:
    def leave_after(keys: str, name: str) -> tuple[str, Path]:
        session.conversation.clear()
        session.engine.reset()
        with create_pipe_input() as pipe:
            pipe.send_text(keys)
            pipe.close()
            Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history",
                 autosave=tmp_path / name, sessions_cap=10**9).run()
        return capsys.readouterr().out, tmp_path / name

    out, chat = leave_after("hi" + ENTER, "short.json")
    assert "saved 2 messages: rml-chat --resume reopens it" in out and not state_path(chat).exists()
    save_state = session.engine.save_state

    def slow(*args):  # a big state on a slow disk
        time.sleep(0.6)
        return save_state(*args)

    monkeypatch.setattr(session.engine, "save_state", slow)
    out, chat = leave_after("word " * 300 + ENTER, "long.json")
    assert "saving llama.cpp's state (" in out and "saved 2 messages and llama.cpp's state (" in out
    assert state_path(chat).stat().st_size > 1_000_000


@pytest.mark.parametrize("run", range(3))
def test_lines_typed_ahead_then_ctrl_d_are_all_answered_on_a_loaded_machine(tmp_path, run) -> None:
    """14 lines typed while replies stream through a small context (the window moves), at uneven moments,
    then Ctrl-D, with every core busy: each line is answered before the REPL leaves, and the autosave
    holds all 28 messages."""
    import random

    chance = random.Random(run)
    with busy_machine(3):
        term = Terminal(tmp_path, "--temp", "0", "-n", "6", "-c", "256", "--sessions-max", "0")
        term.prompt_ready()
        for n in range(14):
            term.send(f"Say the number {n}.\r".encode())
            time.sleep(chance.choice([0, 0, 0.05, 0.2, 0.5]))
        term.send(b"\x04")
        term.read_until(lambda out: b"reopens it" in out, timeout=600)
        _, status = os.waitpid(term.pid, 0)
        os.close(term.fd)
    assert os.waitstatus_to_exitcode(status) == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    messages = json.loads(chat.read_text())["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == [f"Say the number {n}." for n in range(14)]
    assert len(messages) == 28


def test_a_chat_with_no_message_is_not_autosaved(session, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("RML_CHAT_SESSIONS", str(tmp_path / "sessions"))
    session.conversation.clear()
    with create_pipe_input() as pipe:
        pipe.send_text("/set temp 0.5" + ENTER + "/set temp 0" + ENTER)
        pipe.close()
        repl = Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history")
        assert repl.run() == 0
    assert "temp = 0.5" in capsys.readouterr().out
    assert not list((tmp_path / "sessions").glob("*.json"))  # (--sessions lists chats, not settings)


def test_a_chat_open_in_two_windows_goes_on_as_two_chats_and_neither_saves_over_the_other(tmp_path) -> None:
    """The second ``--resume`` of a chat still open goes on in a new file, and says so; ``-p --resume``
    too. Before, each saved its whole conversation into the one file: the last to save undid the other's
    turns."""
    first = Terminal(tmp_path, "--temp", "0", "-n", "4")
    first.prompt_ready()
    first.ask(b"From the first window.", b"stop:")
    second = Terminal(tmp_path, "--temp", "0", "-n", "4", "--resume", "last")
    second.prompt_ready()
    second.ask(b"From the second window.", b"stop:")
    first.ask(b"The first again.", b"stop:")
    scripted = subprocess.run([sys.executable, "-m", "rml_chat", "--resume", "1", "-p", "From -p.", "-n", "2"],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "RML_CHAT_SESSIONS": str(tmp_path / "sessions")})
    assert first.finish() == 0 and second.finish() == 0 and scripted.returncode == 0, scripted.stderr
    assert b"this chat is open in another rml-chat: this one goes on as a new chat" in second.output
    assert "the chat is open in another rml-chat: saved in a new chat (6 messages" in scripted.stderr
    chats = [json.loads(p.read_text())["messages"] for p in (tmp_path / "sessions").glob("*.json")]
    assert sorted([m["content"] for m in chat if m["role"] == "user"] for chat in chats) == [
        ["From the first window.", "From the second window."], ["From the first window.", "The first again."],
        ["From the first window.", "The first again.", "From -p."]]


def test_with_the_replies_sent_to_a_file_the_prompt_stays_on_the_terminal(tmp_path) -> None:
    """``rml-chat > replies.txt`` on a terminal: the prompt and what is typed are drawn on the terminal (as
    Python's own prompt is), and the file holds the replies as text. Before, prompt_toolkit drew the prompt
    into the file: the user typed blind, and the file held the prompt's drawing (``\\r``, blank rows)."""
    replies = tmp_path / "replies.txt"
    term = Terminal(tmp_path, command=["bash", "--norc", "--noprofile", "-i"],
                    env={**os.environ, "PS1": "$ ", "HISTFILE": str(tmp_path / "bash_history")})
    term.read_until(lambda out: out.endswith(b"$ "))
    term.send(f"{sys.executable} -m rml_chat {model_path('smollm2')} --temp 0 -n 8 > {replies}\r".encode())
    drawn = b"\x1b[?2004h"  # (bracketed paste turned on: a prompt drawn on the terminal, dumb or not)
    term.read_until(lambda out: drawn in out)
    time.sleep(1)
    term.send(b"Say hi.\r")
    term.read_until(lambda out: out.count(drawn) >= 2 and b"Say hi." in out)
    time.sleep(0.5)
    term.send(b"\x04")
    term.read_until(lambda out: out.endswith(b"$ "))
    term.send(b"exit\r")
    assert term.exit_code() == 0
    written = replies.read_text()
    assert "stop: length" in written and "saved 2 messages" in written, written
    assert "\r" not in written and "> " not in written and "Say hi." not in written, written


def test_the_output_closed_mid_chat_ends_it_as_a_hangup_does_the_chat_saved(tmp_path) -> None:
    """``rml-chat | head -2``: once head has its lines, the reply can't be written. The chat ends as after a
    hangup: the reply so far stays, marked cut, the chat is saved (and said to be, on the terminal), and the
    exit code is 141. Before, the chat was not saved: its file stayed empty, and the reply was lost."""
    term = Terminal(tmp_path, command=["bash", "--norc", "--noprofile", "-i"],
                    env={**os.environ, "PS1": "$ ", "HISTFILE": str(tmp_path / "bash_history")})
    term.read_until(lambda out: out.endswith(b"$ "))
    term.send(f"{sys.executable} -m rml_chat {model_path('smollm2')} --temp 0 -n 8 | head -2 > /dev/null; "
              "echo rc=${PIPESTATUS[0]}\r".encode())
    term.read_until(lambda out: b"\x1b[?2004h" in out)  # (the prompt, drawn on the terminal: stderr)
    time.sleep(1)
    term.send(b"Say hi.\r")
    term.read_until(lambda out: b"rc=" in out and out.endswith(b"$ "))
    assert b"rc=141" in term.output and b"the output was closed" in term.output
    assert b"saved 2 messages" in term.output
    term.send(b"exit\r")
    assert term.exit_code() == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    saved = [(m["role"], m["content"], bool(m.get("cut"))) for m in json.loads(chat.read_text())["messages"]]
    assert saved[0] == ("user", "Say hi.", False) and saved[1][0] == "assistant" and saved[1][2], saved
