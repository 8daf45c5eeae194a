"""The REPL driven through prompt_toolkit's pipe input with the real SmolLM2 model."""

from __future__ import annotations

import errno
import json
import os
import pty
import select
import sys
import time

import pytest
from conftest import model_path, smollm_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rml_chat.core.session import ChatSession
from rml_chat.frontends.repl import Repl

ENTER, ALT_ENTER = "\r", "\x1b\r"


@pytest.fixture(scope="module")
def session() -> ChatSession:
    with smollm_session(2048, 12) as made:
        yield made


def drive(session: ChatSession, keys: str, tmp_path, capsys) -> str:
    session.conversation.messages.clear()
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
    users = [m["content"] for m in session.conversation.messages if m["role"] == "user"]
    assert users == ["first line\nsecond line", "fenced one\nfenced two", "pasted one\npasted two"]
    assert len(session.conversation.messages) == 6
    assert out.count("prompt tokens evaluated") == 3 and "context " in out


def test_a_fenced_block_ended_by_ctrl_d_is_sent_not_lost(session, tmp_path, capsys) -> None:
    drive(session, '"""' + ENTER + "line one" + ENTER + "line two" + ENTER, tmp_path, capsys)
    assert session.conversation.messages[0]["content"] == "line one\nline two"


def test_undo_save_load_round_trip(session, tmp_path, capsys) -> None:
    saved = tmp_path / "chat.json"
    keys = ("one" + ENTER + "two" + ENTER + "/undo" + ENTER + f"/save {saved}" + ENTER + "/clear" + ENTER
            + f"/load {saved}" + ENTER + "/system Be terse." + ENTER + "/info" + ENTER + "/set temp 0.2" + ENTER)
    out = drive(session, keys, tmp_path, capsys)
    data = json.loads(saved.read_text())
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"] and data["messages"][0]["content"] == "one"
    assert [m["content"] for m in session.conversation.messages] == [m["content"] for m in data["messages"]]
    assert "last exchange dropped" in out and "loaded 2 messages" in out and "chat format: smollm2" in out
    assert session.sampling.temp == 0.2 and session.conversation.system == "Be terse."
    session.sampling.temp, session.conversation.system = 0.0, None


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
    session.conversation.messages.clear()
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
    assert [m["role"] for m in session.conversation.messages] == ["user", "assistant"]
    assert out.count(" evaluated · ") == 3  # two replies and /stats
    assert "/regen" in out and "/undo" in out and "drop the last exchange" in out
    session.sampling.temp, session.sampling.seed = 0.0, -1


def test_unknown_command_and_bad_set_are_explained(session, tmp_path, capsys) -> None:
    out = drive(session, "/frobnicate" + ENTER + "/set temp hot" + ENTER + "/set nope 1" + ENTER, tmp_path, capsys)
    assert "unknown command /frobnicate" in out and "usage: /set" in out
    assert "error: temp must be a number 0 or more (0: greedy), not 'hot'" in out


class Terminal:
    """rml-chat in a real pty: write keys, read until a condition holds."""

    def __init__(self, tmp_path, *args: str):
        env = {**os.environ, "RML_CHAT_HISTORY": str(tmp_path / "history"), "TERM": "dumb"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(sys.executable, [sys.executable, "-m", "rml_chat", str(model_path("smollm2")), *args], env)
        self.output = b""

    def read_until(self, done, timeout: float = 60) -> None:
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
        self.send(b"\x04")
        self.read_until(lambda out: out.endswith(b"\r\n"), 30)
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def interrupt_save_and_leave(self, saved, cut: bytes = b"reply cut by Ctrl-C", count: int = 2) -> list[dict]:
        """Ctrl-C, then /save the conversation and Ctrl-D; the saved messages."""
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


def test_ctrl_c_during_prompt_evaluation_keeps_the_message_and_records_no_reply(tmp_path) -> None:
    saved = tmp_path / "eval.json"
    term = Terminal(tmp_path, "-c", "8192")
    term.prompt_ready()
    message = "word " * 4000
    before = len(term.output)
    term.send(b"\x1b[200~" + message.encode() + b"\x1b[201~\r")  # pasted
    term.read_until(lambda out: len(out) > before and out.endswith(b"\r\n"))  # accepted: the prompt is done
    time.sleep(0.8)  # the terminal is back in cooked mode (Ctrl-C is a signal again); evaluation takes seconds
    messages = term.interrupt_save_and_leave(saved, b"cut during the prompt's evaluation", 1)
    assert messages == [{"role": "user", "content": message}]


def test_ctrl_c_while_loading_is_one_line_and_exit_130(tmp_path) -> None:
    term = Terminal(tmp_path)
    term.read_until(lambda out: b"loading" in out, 30)  # not a fixed delay: on a busy machine that can
    term.send(b"\x03")                                   # land before Python has even started
    term.read_until(lambda out: b"interrupted" in out, 30)
    _, status = os.waitpid(term.pid, 0)
    os.close(term.fd)
    assert os.waitstatus_to_exitcode(status) == 130 and b"Traceback" not in term.output
    assert b"rml-chat: interrupted while loading the model\r\n" in term.output, term.output
