"""SIGTERM (``kill``, ``timeout``, a logout) and SIGHUP (the terminal window closed): the run ends as a
Ctrl-C would end its turn, keeping the reply so far (marked cut) and the message it answered, saves the
chat as leaving does, and exits 128 + the signal's number (143, 129). In a real pty, with the real model."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest
from conftest import model_path
from test_repl import Terminal

ENDLESS = ("-n", "-1", "--ignore-eos", "--repeat-guard", "0", "-c", "1024")  # (a reply that runs until it's ended)


def _exit_code(term: Terminal, timeout: float = 60) -> int:
    """Wait for the program to end, reading what it writes meanwhile (a full pty would block it)."""
    end = time.time() + timeout
    while time.time() < end:
        pid, status = os.waitpid(term.pid, os.WNOHANG)
        if pid:
            return os.waitstatus_to_exitcode(status)
        try:
            if select.select([term.fd], [], [], 0.1)[0]:
                term.output += os.read(term.fd, 65536)
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"still running: {term.output[-500:]!r}")


def _saved(tmp_path) -> list[tuple[str, bool]]:
    (chat,) = (tmp_path / "sessions").glob("*.json")
    return [(m["role"], bool(m.get("cut"))) for m in json.loads(chat.read_text())["messages"]]


def _mid_reply(tmp_path) -> Terminal:
    term = Terminal(tmp_path, *ENDLESS)
    term.prompt_ready()
    start = len(term.output)
    term.send(b"Count to a thousand.\r")
    term.read_until(lambda out: len(out[start:]) > 300)
    return term


def test_ctrl_z_at_the_prompt_stops_the_chat_as_in_bash_and_fg_brings_back_what_was_typed(tmp_path) -> None:
    """Under a shell with job control (bash in a pty): Ctrl-Z at the prompt stops rml-chat, and ``fg`` brings
    the prompt back with the half-typed message, which Enter sends. Before, Ctrl-Z put a control character
    (U+001A) into the message, and the ``fg`` typed after it went to the model too."""
    term = Terminal(tmp_path, command=["bash", "--norc", "--noprofile", "-i"],
                    env={**os.environ, "PS1": "$ ", "HISTFILE": str(tmp_path / "bash_history")})
    term.read_until(lambda out: out.endswith(b"$ "))
    term.send(f"TERM=xterm {sys.executable} -m rml_chat {model_path('smollm2')} --temp 0 -n 8\r".encode())
    term.read_until(lambda out: b"Ctrl-D to leave" in out)
    time.sleep(1)  # (prompt_toolkit asks the terminal where its cursor is, and waits for no answer)
    term.send(b"Say hi.")
    term.read_until(lambda out: b"Say hi." in out)
    term.send(b"\x1a")
    term.read_until(lambda out: b"Stopped" in out and out.endswith(b"$ "))
    start = len(term.output)
    term.send(b"fg\r")
    term.read_until(lambda out: b"> Say hi." in out[start:])
    start = len(term.output)
    term.send(b"\r")
    term.read_until(lambda out: b"stop: " in out[start:])
    time.sleep(1)
    term.send(b"\x04")
    term.read_until(lambda out: out.endswith(b"$ "))
    term.send(b"exit\r")
    assert _exit_code(term) == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    assert [m["content"] for m in json.loads(chat.read_text())["messages"]][0] == "Say hi."


def test_sigterm_mid_reply_keeps_the_reply_so_far_saves_the_chat_and_exits_143(tmp_path) -> None:
    term = _mid_reply(tmp_path)
    os.kill(term.pid, signal.SIGTERM)
    assert _exit_code(term) == 143
    assert b"rml-chat: terminated (SIGTERM)" in term.output and b"saved 2 messages" in term.output
    assert _saved(tmp_path) == [("user", False), ("assistant", True)]  # (the reply so far, marked cut)


def test_the_terminal_closing_mid_reply_saves_the_chat_and_exits_129(tmp_path) -> None:
    term = _mid_reply(tmp_path)
    os.close(term.fd)  # (the kernel hangs up the pty's session: SIGHUP, and the terminal is gone)
    _, status = os.waitpid(term.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 129
    assert _saved(tmp_path) == [("user", False), ("assistant", True)]


@pytest.mark.parametrize("attempt", range(8))
def test_the_terminal_closing_at_the_prompt_keeps_what_was_typed_in_the_history(tmp_path, attempt: int) -> None:
    """The signal lands wherever the main thread is, often in one of prompt_toolkit's asyncio callbacks.
    Raised there as an exception of another kind than SystemExit, it went to prompt_toolkit's "Press ENTER
    to continue", and the process either left with exit 0 (what was typed lost) or looped on the terminal
    that was gone, taking memory without end (12 GB in 5 minutes). Raised there as a SystemExit, asyncio,
    cancelling the loop's tasks on the way out, waited on them for ever, about one time in eight. Now the
    prompt is ended from its own loop (``signals.asked``). Eight tries, each with a deadline."""
    term = Terminal(tmp_path)
    term.prompt_ready()
    term.send(b"half a thought")
    term.read_until(lambda out: out.endswith(b"half a thought"))
    os.close(term.fd)
    deadline = time.time() + 60
    while (ended := os.waitpid(term.pid, os.WNOHANG)) == (0, 0) and time.time() < deadline:
        time.sleep(0.1)
    if ended == (0, 0):
        os.kill(term.pid, signal.SIGKILL)
        os.waitpid(term.pid, 0)
        pytest.fail("the program did not end after its terminal closed")
    assert os.waitstatus_to_exitcode(ended[1]) == 129
    assert (tmp_path / "history").read_text().splitlines()[-1] == "+half a thought"  # (Up brings it back)


@pytest.mark.parametrize("args", [["-p", "Count to a thousand."], ["--batch", "-"]], ids=["-p", "--batch"])
def test_sigterm_ends_a_scripted_run_with_one_line_and_exit_143(args: list[str]) -> None:
    run = subprocess.Popen([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), *ENDLESS, *args],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if "--batch" in args:
        run.stdin.write(b'{"prompt": "Count to a thousand."}\n')  # type: ignore[union-attr]
    run.stdin.close()  # type: ignore[union-attr]
    if "--batch" in args:
        time.sleep(4)  # (the model loaded, the line being answered: --batch writes a line once it is done)
    else:
        run.stdout.read(200)  # type: ignore[union-attr]  (the reply is streaming)
    os.kill(run.pid, signal.SIGTERM)
    err = run.stderr.read()  # type: ignore[union-attr]
    run.wait(60)
    assert run.returncode == 143, err
    line = "terminated (SIGTERM) (the reply so far is above)" if "-p" in args else \
        "terminated (SIGTERM) after 0 lines; the output holds them whole"
    assert err.decode().strip().splitlines()[-1] == f"rml-chat: {line}"
