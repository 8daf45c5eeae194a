"""Files into a message: ``-f/--file`` (repeatable) after piped text and before ``-p``; the REPL's
``/file``; every path that is not a text file refused in one line before the model loads; a message too
big for the context says what each file weighs and how many tokens fit."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
from conftest import model_path, smollm_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rml_chat.core.attachments import Attachment, FileRefused, message_with, read_attachment
from rml_chat.core.model import load_model
from rml_chat.frontends.repl import Repl
from tokenizer.chat import segments_text
from tokenizer.chat.template import compiled

ENTER = "\r"


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), *args],
                          input=None if stdin is None else stdin.decode(), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL if stdin is None else None)


def test_piped_text_then_the_files_in_order_then_the_prompt_make_one_message(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("Alpha file.\n")
    (tmp_path / "b.md").write_text("```python\nprint(1)\n```\n")  # a fence inside: the block's fence is longer
    done = _run("-f", str(tmp_path / "a.txt"), "--file", str(tmp_path / "b.md"), "-p", "Compare them.",
                "--show-prompt", "--json", stdin=b"Piped notes.\n")
    assert done.returncode == 0, done.stderr
    prompt = json.loads(done.stdout)["prompt"]
    expected = (f"Piped notes.\n\n```{tmp_path / 'a.txt'}\nAlpha file.\n```\n\n"
                f"````{tmp_path / 'b.md'}\n```python\nprint(1)\n```\n````\n\nCompare them.")
    assert prompt == _rendered(expected)  # the template's own rendering of that one message


def _rendered(message: str) -> str:
    """The model's chat template (jinja2, as transformers renders it) on one user message."""
    model = load_model(str(model_path("smollm2")))
    return compiled(model.tokenizer.chat_template).render([{"role": "user", "content": message}], True,
                                                          bos_token=model.encoder.bos_text, eos_token=model.encoder.eos_text)


def test_the_json_report_counts_each_file(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("The meeting is on Tuesday at noon.\n")
    done = _run("-f", str(tmp_path / "notes.txt"), "-p", "When is the meeting?", "-n", "4", "--json")
    assert done.returncode == 0, done.stderr
    (counted,) = json.loads(done.stdout)["files"]
    block = Attachment(str(tmp_path / "notes.txt"), "The meeting is on Tuesday at noon.\n").block
    assert counted == {"path": str(tmp_path / "notes.txt"), "chars": 35,
                       "tokens": len(load_model(str(model_path("smollm2"))).tokenizer.encode(block))}


@pytest.mark.parametrize("kind", ["missing", "directory", "binary", "latin-1", "/dev/zero", "2 GB"])
def test_a_path_that_is_not_a_text_file_is_one_line_before_the_model_loads(tmp_path, kind: str) -> None:
    path = tmp_path / kind if not kind.startswith("/") else kind
    if kind == "2 GB":
        with open(path, "wb") as sparse:  # (a sparse file: no disk is used, and none of it is read)
            sparse.truncate(2 * 2**30)
    elif kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(b"PK\x03\x04\x00\x00rest")
    elif kind == "latin-1":
        path.write_bytes("café".encode("latin-1"))
    done = _run("-f", str(path), "-p", "Summarize.")
    expected = {"missing": "no such file", "directory": "a directory, not a file (name the files in it)",
                "binary": "a binary file (a NUL byte at offset 4), not text",
                "latin-1": "not UTF-8 text (byte 0xe9 at offset 3)",
                "/dev/zero": "not a regular file (a device or a socket)",
                "2 GB": "2147483648 bytes; a file up to 8388608 bytes is read (no context holds more)"}[kind]
    assert done.returncode == 1 and done.stderr.splitlines() == [f"rml-chat: input: --file {path}: {expected}"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_pipe_on_the_command_line_is_read_to_its_end_and_its_writer_waited_for(tmp_path) -> None:
    """``-f <(git diff)``: the shell hands over a pipe. A named FIFO's writer is waited for, as ``cat`` waits
    (one that comes late still counts), and Ctrl-C ends the wait in one line; the chat's ``/file`` refuses
    any pipe."""
    script = f"{shlex.quote(sys.executable)} -m rml_chat {shlex.quote(str(model_path('smollm2')))} " \
             "-f <(printf 'line one\\nline two\\n') -p 'Count the lines.' --show-prompt --json"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    prompt = json.loads(done.stdout)["prompt"]
    path = re.search(r"```(\S+)\nline one", prompt).group(1)  # (/dev/fd/63, as bash names the pipe)
    assert prompt == _rendered(f"```{path}\nline one\nline two\n```\n\nCount the lines.")

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-f", str(fifo), "-p", "Hi.",
               "--show-prompt", "--json"]
    waiting = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    time.sleep(2)  # (the writer comes after the reader has opened the FIFO)
    fifo.write_text("late text\n")
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, err
    assert json.loads(out)["prompt"] == _rendered(f"```{fifo}\nlate text\n```\n\nHi.")

    nobody = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    time.sleep(3)
    nobody.send_signal(signal.SIGINT)
    out, err = nobody.communicate(timeout=60)
    assert (nobody.returncode, err.splitlines()) == (130, ["rml-chat: interrupted"])
    assert json.loads(out) == {"ok": False, "error": {"kind": "interrupted", "message": "interrupted"},
                               "exit_code": 130}
    with pytest.raises(FileRefused, match=r"^/file .*: not a regular file \(a pipe or a device; pipe text into stdin"):
        read_attachment(str(fifo), "/file")


def test_a_file_too_big_for_the_context_says_what_it_weighs_and_what_fits(tmp_path) -> None:
    (tmp_path / "long.txt").write_text("word " * 3000)
    done = _run("-c", "1024", "-f", str(tmp_path / "long.txt"), "-p", "Summarize.")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("rml-chat: chat: the message alone needs ") and "fit in the context of 1024" in line
    assert f"(the files: {tmp_path / 'long.txt'} 30" in line  # (3,000 words and the fence: 3,00x tokens)


def test_file_goes_with_the_next_message_in_the_chat_and_errors_keep_the_session(tmp_path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("Milk, eggs.\n")
    with smollm_session(2048, 8) as session, create_pipe_input() as pipe:
        pipe.send_text(f"/file {tmp_path / 'nothing.txt'}{ENTER}/file '{tmp_path / 'notes.txt'}'{ENTER}/file{ENTER}"
                       f"What do I buy?{ENTER}Thanks.{ENTER}")
        pipe.close()
        assert Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history").run() == 0
        users = [m.content for m in session.conversation.messages if m.role == "user"]
    out = capsys.readouterr().out
    assert f"error: /file {tmp_path / 'nothing.txt'}: no such file" in out
    assert f"{tmp_path / 'notes.txt'}: 1" in out and "held for your next message" in out
    assert f"{tmp_path / 'notes.txt'}: 12 characters" in out
    assert users == [message_with("", [Attachment(str(tmp_path / "notes.txt"), "Milk, eggs.\n")], "What do I buy?"),
                     "Thanks."]  # (held for one message only)


def test_file_in_a_real_terminal_and_dash_f_held_for_the_first_message(tmp_path) -> None:
    from test_repl import Terminal

    (tmp_path / "a.txt").write_text("Alpha.\n")
    (tmp_path / "b.txt").write_text("Beta.\n")
    term = Terminal(tmp_path, "-f", str(tmp_path / "a.txt"), "--temp", "0", "-n", "4", "--sessions-max", "0")
    term.read_until(lambda out: b"held for your first message" in out)
    term.prompt_ready()
    term.ask(f"/file {tmp_path / 'b.txt'}".encode(), b"held for your next message")
    term.ask(b"Name both.", b"stop: ")
    assert term.finish() == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    message = json.loads(chat.read_text())["messages"][0]["content"]
    assert message == message_with("", [Attachment(str(tmp_path / "a.txt"), "Alpha.\n"),
                                        Attachment(str(tmp_path / "b.txt"), "Beta.\n")], "Name both.")
    prompt = segments_text(load_model(str(model_path("smollm2"))).encoder.format([{"role": "user", "content": message}]))
    assert prompt == _rendered(message)


@pytest.mark.offline
def test_a_files_path_may_start_with_a_tilde_as_typed_at_the_prompt(tmp_path, monkeypatch) -> None:
    """No shell expands ``/file ~/notes.txt``: rml-chat does, and labels the block as the path was given."""
    from rml_chat.core.attachments import read_attachment

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes.txt").write_text("Milk.\n")
    assert read_attachment("~/notes.txt", "/file") == Attachment("~/notes.txt", "Milk.\n")
