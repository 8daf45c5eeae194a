"""/edit, /branches, /branch: an earlier message edited into a new path, the old path kept as a branch
with its thoughts and calls, saved and loaded whole; llama.cpp's cache follows, so only what differs from
the cached prefix is evaluated. The REPL driven through prompt_toolkit's pipe input, with SmolLM2."""

from __future__ import annotations

import json

import pytest
from conftest import smollm_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rml_chat.core.conversation import ChatError, Conversation
from rml_chat.core.message import Message
from rml_chat.core.session import ChatSession
from rml_chat.frontends.repl import Repl

ENTER, CLEAR_LINE = "\r", "\x15"  # (Ctrl-U: the edit prompt's text, cleared)
QUESTIONS = ["Name a fruit.", "Name a colour.", "Name an animal.", "Name a city."]


@pytest.fixture(scope="module")
def session() -> ChatSession:
    with smollm_session(2048, 8) as made:
        yield made


def run_repl(session: ChatSession, keys: str, tmp_path, capsys) -> tuple[str, list[int]]:
    """What the REPL printed for ``keys``, and the prompt tokens each turn evaluated."""
    evaluated: list[int] = []
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        pipe.close()
        repl = Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history",
                    autosave=tmp_path / "chat.json")
        turn = repl.reply

        def counted_reply(text):  # type: ignore[no-untyped-def]
            turn(text)
            evaluated.append(session.last.generation.evaluated)

        repl.reply = counted_reply  # type: ignore[method-assign]
        assert repl.run() == 0
    return capsys.readouterr().out, evaluated


def test_an_edit_three_turns_back_branches_and_evaluates_only_the_difference(session, tmp_path, capsys) -> None:
    session.conversation.clear()
    keys = "".join(q + ENTER for q in QUESTIONS) + "/edit 3" + ENTER + CLEAR_LINE + "Name a shape." + ENTER
    out, evaluated = run_repl(session, keys, tmp_path, capsys)
    messages = session.conversation.messages
    assert [m.content for m in messages if m.role == "user"] == ["Name a fruit.", "Name a shape."]
    assert len(session.conversation.branches) == 1
    old = session.conversation.branches[0]
    assert [m.content for m in old if m.role == "user"] == QUESTIONS and len(old) == 8
    assert "the path before this edit is branch 1" in out
    tokenizer = session.model.tokenizer
    edited = len(tokenizer.encode("Name a shape."))
    # the edited turn evaluates its own message (and the few tokens that open it and the reply), nothing before it
    assert edited <= evaluated[-1] <= edited + 8 < session.last.generation.prompt_tokens, evaluated
    saved = json.loads((tmp_path / "chat.json").read_text())
    assert saved["branches"] == [[m.as_dict() for m in old]] and saved["messages"] == [m.as_dict() for m in messages]

    capsys.readouterr()
    out, evaluated = run_repl(session, "/branches" + ENTER + "/branch 1" + ENTER + "Name a river." + ENTER, tmp_path,
                              capsys)
    assert "1  8 messages, parts from this one at message 3: Name a colour." in out
    assert "on branch 1's path (8 messages)" in out and "again from message 3 on" in out
    users = [m.content for m in session.conversation.messages if m.role == "user"]
    assert users == [*QUESTIONS, "Name a river."]
    assert [m.content for m in session.conversation.branches[0] if m.role == "user"] == ["Name a fruit.",
                                                                                             "Name a shape."]
    # back on the old path, the cache held the other one: messages 3 on are evaluated again, and no more
    shared = len(tokenizer.encode("Name a fruit.")) + 2
    assert shared < evaluated[-1] < session.last.generation.prompt_tokens - shared, evaluated


def test_edit_refuses_what_it_cannot_edit_and_leaves_the_chat_as_it_was(session, tmp_path, capsys) -> None:
    session.conversation.clear()
    out, _ = run_repl(session, "/edit" + ENTER + "/branch 1" + ENTER + "Hi." + ENTER + "/edit 2" + ENTER
                      + "/edit 9" + ENTER + "/edit" + ENTER + ENTER + "/branches" + ENTER, tmp_path, capsys)
    assert "/edit: no message of yours yet" in out and "/branch: no branches yet" in out
    assert out.count("/edit N: N is one of your messages as /history numbers them (1)") == 2
    assert "/edit: unchanged; nothing generated" in out and "no branches yet (/edit makes one)" in out
    assert len(session.conversation.messages) == 2 and not session.conversation.branches


@pytest.mark.offline
def test_a_file_without_branches_loads_and_a_bad_branch_is_one_line(tmp_path) -> None:
    old = {"format": "rml-chat conversation", "version": 1, "system": None, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "reasoning": "greet"}]}
    assert Conversation.from_json(old, "old.json").branches == []
    tree = Conversation.from_json({**old, "branches": [old["messages"][:1]]}, "tree.json")
    assert tree.branches == [[Message("user", "hi")]]
    with pytest.raises(ChatError, match="tree.json: branch 1: message 0 needs a role"):
        Conversation.from_json({**old, "branches": [[{"role": "x"}]]}, "tree.json")
    with pytest.raises(ChatError, match="'branches' must be a list of message lists"):
        Conversation.from_json({**old, "branches": {"a": 1}}, "tree.json")


@pytest.mark.offline
def test_fork_and_switch_keep_every_path_whole() -> None:
    u1, a1, u2, a2, u3 = (Message(r, c) for r, c in
                          [("user", "1"), ("assistant", "a"), ("user", "2"), ("assistant", "b"), ("user", "3")])
    chat = Conversation(None, [u1, a1, u2, a2])
    chat.fork(2)
    chat.add(u3)
    assert chat.branch_list() == [(1, 2, "2")]
    assert chat.switch(1) == 2 and chat.messages == [u1, a1, u2, a2] and chat.branches == [[u1, a1, u3]]


def test_ctrl_x_ctrl_e_edits_the_message_in_the_editor(tmp_path) -> None:
    from test_rendering import SizedTerminal

    term = SizedTerminal(tmp_path, 100, "--temp", "0", "-n", "8", env={"EDITOR": "sed -i s/colour/shape/"})
    term.prompt_ready()
    term.ask(b"Name a colour.", b"tok/s")
    start = len(term.output)
    term.send(b"/edit\r")
    term.read_until(lambda out: b"edit> Name a colour." in out[start:] and out.endswith(b"\x1b[?25h"))
    start = len(term.output)
    term.send(b"\x18\x05")  # (Ctrl-X Ctrl-E: $EDITOR on the message, then it is sent)
    term.read_until(lambda out: b"tok/s" in out[start:] and term.at_prompt(out))
    saved = tmp_path / "chat.json"
    term.ask(f"/save {saved}".encode(), b"saved 2 messages")
    chat = json.loads(saved.read_text())
    assert chat["messages"][0]["content"] == "Name a shape."
    assert chat["branches"][0][0]["content"] == "Name a colour."
    assert term.finish() == 0
