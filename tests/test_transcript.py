"""/copy and /export: the chat as Markdown, and a reply (or one of its code blocks) put on the clipboard
with the terminal's OSC 52 sequence — in a real pty, and the Markdown read back."""

from __future__ import annotations

import base64
import json
import os
import re

import pytest
from test_repl import Terminal

from rml_chat.core.message import Message
from rml_chat.frontends.transcript import as_markdown, code_blocks, osc52

CALL = {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
MESSAGES = [{"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "reasoning": "They want Oslo.", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "Sunny ```not a fence```"},
            {"role": "assistant", "content": "Sunny.\n\n```sh\ncurl wttr.in/Oslo\n```", "cut": True}]


@pytest.mark.offline
def test_the_markdown_holds_every_message_in_order_with_the_thought_folded_and_the_call_as_json() -> None:
    text = as_markdown("Be brief.", [Message.of(m, "a test message") for m in MESSAGES], "Oslo")
    assert re.findall(r"^#+ .*$", text, re.M) == ["# Oslo", "## System", "## 1 · You", "## 2 · Assistant",
                                                   "## 3 · Tool result (get_weather)", "## 4 · Assistant (cut)"]
    assert "<details><summary>Thought</summary>\n\nThey want Oslo.\n\n</details>" in text
    fenced = re.search(r"^```json\n(.*?)\n```$", text, re.M | re.S)
    assert fenced and json.loads(fenced.group(1)) == {"name": "get_weather", "arguments": {"city": "Oslo"},
                                                      "id": "call00001"}
    assert "````text\nSunny ```not a fence```\n````" in text  # (a longer fence than the result's own)
    assert code_blocks(text)[-1] == "curl wttr.in/Oslo" and text.endswith("```\n")


@pytest.mark.offline
def test_osc52_is_base64_of_the_text_and_wrapped_for_tmux() -> None:
    assert osc52("héllo", tmux=False) == "\x1b]52;c;" + base64.b64encode("héllo".encode()).decode() + "\x07"
    wrapped = osc52("x", tmux=True)
    assert wrapped.startswith("\x1bPtmux;\x1b\x1b]52;c;") and wrapped.endswith("\x07\x1b\\")


def test_copy_and_export_in_a_real_terminal(tmp_path) -> None:
    term = Terminal(tmp_path, "--temp", "0", "-n", "24")
    term.prompt_ready()
    term.ask(b"/copy", b"no reply yet")
    term.ask(b"Write a Python line that prints 1, in a code block.", b"evaluated")
    start = len(term.output)
    term.ask(b"/copy", b"with OSC 52")
    saved = tmp_path / "chat.json"
    term.ask(f"/save {saved}".encode(), b"saved 2 messages")
    reply = json.loads(saved.read_text())["messages"][1]["content"]
    assert osc52(reply, tmux=bool(os.environ.get("TMUX"))).encode() in term.output[start:]  # (the reply as written)
    term.ask(b"/copy 9", b"/copy N")
    exported = tmp_path / "chat.md"
    term.ask(f"/export {exported}".encode(), b"exported 2 messages")
    term.ask(f"/export {tmp_path}".encode(), b"is not a regular file")  # (a folder: one line, and the chat goes on)
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    term.ask(f"/export {fifo}".encode(), b"is not a regular file")  # (never opened: it would block the chat)
    mine = tmp_path / "mine.md"
    mine.write_text("the user's own notes")
    term.ask(f"/export {mine}".encode(), b"--force replaces it")
    assert mine.read_text() == "the user's own notes"
    term.ask(f"/export {mine} --force".encode(), b"exported 2 messages")
    link = tmp_path / "link.md"
    link.symlink_to(exported)
    exported.write_text("older")
    term.ask(f"/export {link} --force".encode(), b"exported 2 messages")
    assert term.finish() == 0
    text = exported.read_text()
    assert text.startswith("# Chat with ") and "## 1 · You\n\nWrite a Python line" in text and reply in text
    assert mine.read_text() == text and not list(tmp_path.glob(".*.part"))
    assert link.is_symlink() and link.read_text() == text  # (written through the link, which stays)


@pytest.mark.offline
def test_code_blocks_are_read_in_one_pass_whatever_the_fences() -> None:
    """A line of 30,000 backticks, an unclosed fence, a longer or other fence inside: one pass, and only
    blocks closed by their own fence."""
    assert code_blocks("`" * 30_000 + "\nx\n" + "`" * 29_999) == []
    assert code_blocks("```\na\n~~~\nb\n````\nc\n```\nd") == ["a\n~~~\nb\n````\nc"]
    assert code_blocks("~~~sh\nls\n~~~  \n```\nopen") == ["ls"]


@pytest.mark.offline
def test_a_fence_a_reply_left_open_is_closed_and_a_replys_own_heading_is_not_the_exports() -> None:
    text = as_markdown(None, [Message("user", "Code?"), Message("assistant", "## You\n```python\nprint(1)", cut=True),
                              Message("user", "Thanks.")], "T")
    assert code_blocks(text) == ["print(1)"]  # (closed after the reply: the next heading is a heading)
    assert re.findall(r"^## \d+ · .*$", text, re.M) == ["## 1 · You", "## 2 · Assistant (cut)", "## 3 · You"]
