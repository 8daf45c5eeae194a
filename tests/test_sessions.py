"""The sessions folder without a model: listing, finding, naming, deleting, the cap on states, and the
conversation file's name and settings (core/sessions.py, frontends/sessions_list.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from rml_chat.core.conversation import ChatError, Conversation
from rml_chat.core.sessions import delete_session, find_session, list_sessions, parse_size, prune_states, state_worth_it
from rml_chat.engines.kv_cache import state_path

pytestmark = pytest.mark.offline


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """Three chats, oldest first: 'alpha' (named), one with a 3 MB state, one without a user message."""
    monkeypatch.setenv("RML_CHAT_SESSIONS", str(tmp_path))
    chats = [Conversation(messages=[{"role": "user", "content": "first chat\nsecond line"},
                                    {"role": "assistant", "content": "ok"}], model="/m/a.gguf", name="alpha"),
             Conversation(messages=[{"role": "user", "content": "the middle one"}], model="/m/b.gguf"),
             Conversation(system="only a system message")]
    for age, chat in zip((300, 200, 100), chats):
        path = tmp_path / f"2026010{age // 100}-chat.json"
        chat.save(path)
        if age == 200:
            state_path(path).write_bytes(b"x" * 3_000_000)
        then = time.time() - age
        for p in (path, state_path(path)):
            if p.exists():
                os.utime(p, (then, then))
    (tmp_path / "notes.json").write_text("[1, 2]")  # not a chat: left out
    return tmp_path


def test_sizes_parse_as_a_user_writes_them_and_a_bad_one_says_what_is_allowed() -> None:
    assert [parse_size(t) for t in ("0", "500M", "1.5G", "200k", "2GB", "1024")] == [0, 500e6, 1.5e9, 200e3, 2e9, 1024]
    with pytest.raises(ValueError, match="a size such as 500M or 2G"):
        parse_size("lots")


def test_a_state_is_worth_a_file_when_it_saves_many_tokens_or_slow_ones() -> None:
    assert not state_worth_it(40, 2000.0) and state_worth_it(256, 2000.0) and state_worth_it(40, 30.0)
    assert not state_worth_it(40, None)


def test_the_listing_is_newest_first_and_leaves_out_what_is_not_a_chat(folder) -> None:
    sessions = list_sessions()
    assert [s.first_line for s in sessions] == ["", "the middle one", "first chat"]
    assert [s.name for s in sessions] == [None, None, "alpha"] and [s.messages for s in sessions] == [0, 1, 2]
    assert sessions[1].size > 3_000_000  # the state counts


def test_the_listing_reads_a_chat_as_resume_does(folder, monkeypatch) -> None:
    """Under --resume's bound, so a huge file costs the bound, not its size; and without a byte-order mark,
    so a chat an editor saved with one is listed (it was left out, though --resume read it)."""
    from rml_chat.core import conversation

    Conversation(messages=[{"role": "user", "content": "big " * 1000}]).save(folder / "20260104-chat.json")
    marked = folder / "20260105-chat.json"
    marked.write_bytes(b"\xef\xbb\xbf" + json.dumps({"messages": [{"role": "user", "content": "marked"}]}).encode())
    assert [s.first_line for s in list_sessions()][:2] == ["marked", ("big " * 1000).strip()]
    monkeypatch.setattr(conversation, "MAX_CHAT_BYTES", 2000)
    assert [s.first_line for s in list_sessions()] == ["marked", "", "the middle one", "first chat"]


def test_a_chat_is_found_by_number_name_stem_or_path_and_a_miss_names_what_was_looked_for(folder) -> None:
    assert find_session("last") == find_session("1") == folder / "20260101-chat.json"
    assert find_session("3") == find_session("alpha") == find_session("20260103-chat") == folder / "20260103-chat.json"
    assert find_session(str(folder / "x.json")) == folder / "x.json"  # a path is taken as it is
    with pytest.raises(ChatError, match="no chat number 4: rml-chat --sessions lists 3"):
        find_session("4")
    with pytest.raises(ChatError, match="no chat named 'beta'"):
        find_session("beta")


def test_deleting_a_chat_removes_it_and_its_state(folder) -> None:
    gone = delete_session("2")
    assert gone.first_line == "the middle one" and not gone.path.exists() and not state_path(gone.path).exists()
    assert len(list_sessions()) == 2


def test_the_cap_removes_the_oldest_states_first_and_the_newest_only_when_it_alone_is_over(folder) -> None:
    newest = state_path(folder / "20260101-chat.json")
    newest.write_bytes(b"y" * 2_000_000)
    older = state_path(folder / "20260102-chat.json")
    assert prune_states(4_500_000, newest) == [older] and newest.exists()
    assert all(p.exists() for p in folder.glob("*.json"))  # conversations stay
    assert prune_states(1_000_000, newest) == [newest]
    assert prune_states(0) == []  # nothing left to remove


def test_a_conversation_keeps_its_name_and_settings_and_a_bad_one_is_one_line(tmp_path) -> None:
    path = tmp_path / "c.json"
    Conversation(messages=[{"role": "user", "content": "hi"}], name="work", settings={"temp": "0.2"}).save(path)
    back = Conversation.load(path)
    assert back.name == "work" and back.settings == {"temp": "0.2"}
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "settings": ["temp"]}))
    with pytest.raises(ChatError, match="'settings' must be an object"):
        Conversation.load(path)
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(data).encode())  # a byte-order mark is no part of the JSON
    assert Conversation.load(path).name == "work"


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rml_chat", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def test_sessions_and_delete_session_on_the_command_line(folder) -> None:
    env = {"RML_CHAT_SESSIONS": str(folder)}
    listed = _cli("--sessions", env=env)
    lines = listed.stdout.splitlines()
    assert listed.returncode == 0 and lines[0].split()[:3] == ["N", "last", "written"]
    assert lines[3].split()[0] == "3" and "a.gguf" in lines[3] and "[alpha] first chat" in lines[3]
    assert "3 chats, 3.0 MB in" in lines[-1]
    as_json = json.loads(_cli("--sessions", "--json", env=env).stdout)
    assert [s["name"] for s in as_json["sessions"]] == [None, None, "alpha"]
    deleted = _cli("--delete-session", "alpha", env=env)
    assert deleted.returncode == 0 and deleted.stdout.startswith("deleted 20260103-chat.json (2 messages")
    missing = _cli("--delete-session", "alpha", env=env)
    assert missing.returncode == 1 and missing.stderr.strip().endswith("(rml-chat --sessions lists them)")
    for flag in ("--delete-session", "--resume"):  # (an empty key was the folder ".", a path to read)
        blank = _cli(flag, " ", env=env)
        assert blank.returncode == 1 and blank.stderr == (f"rml-chat: chat: {flag} needs a chat: last, its number "
                                                          "or its name (rml-chat --sessions lists them)\n")
    nothing = _cli("--delete-session", "last", env={"RML_CHAT_SESSIONS": str(folder / "none")})
    assert nothing.stderr.strip().endswith("none to delete")
    bad = _cli("--sessions-max", "lots", "--sessions", env=env)
    assert bad.returncode == 2 and "--sessions-max: must be a size such as 500M or 2G" in bad.stderr
    empty = _cli("--sessions", env={"RML_CHAT_SESSIONS": str(folder / "none")})
    assert empty.returncode == 0 and empty.stdout.startswith("no saved chats in")


def test_two_chats_started_in_the_same_second_each_claim_their_own_file_and_an_unused_claim_goes(folder) -> None:
    from rml_chat.core.sessions import hold, lock_path, new_autosave_path, release_claim

    first, second = new_autosave_path("m"), new_autosave_path("m")
    assert first != second and first.is_file() and second.is_file()  # (claimed at once, not at the first save)
    assert hold(first) and hold(second)  # (as the REPL holds its chat)
    Conversation(messages=[{"role": "user", "content": "kept"}]).save(second)
    release_claim(first)
    release_claim(second)
    assert not first.exists() and second.exists()  # (only an empty claim goes, with its lock)
    assert not lock_path(first).exists() and lock_path(second).exists()
    assert [s.path for s in list_sessions()].count(second) == 1


def test_a_name_that_reads_as_a_selector_or_a_path_is_refused_with_why() -> None:
    from rml_chat.core.sessions import name_problem

    assert "place in the listing" in name_problem("last") and "place in the listing" in name_problem("3")
    assert "path" in name_problem("team/alpha") and "path" in name_problem("x.json")
    assert name_problem("team-alpha") == "" and name_problem("last week") == ""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="this OS has no named pipes (os.mkfifo) to test with")
def test_the_listing_reads_only_regular_files(folder) -> None:
    os.mkfifo(folder / "x.json")  # (reading it would wait for a writer forever)
    assert [s.name for s in list_sessions()].count("alpha") == 1


@pytest.mark.offline
def test_a_calls_message_keeps_a_string_content_and_is_none_only_where_the_template_renders_it(tmp_path) -> None:
    """DeepSeek R1's distills take a message of calls with its content None: the conversation holds "" (so
    /history, /branches and a save read a string), the prompt gets None, and a chat an earlier version
    saved with None loads."""
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    chat = Conversation(messages=[{"role": "user", "content": "Hi"}, call,
                                  {"role": "tool", "content": "1", "tool_call_id": "c1", "name": "f"}])
    assert chat.for_prompt(calls_without_content=True)[1]["content"] is None
    assert chat.for_prompt()[1]["content"] == ""
    saved = tmp_path / "chat.json"
    chat.save(saved)
    assert Conversation.load(saved).messages[1].content == ""
    old = json.loads(saved.read_text())
    old["messages"][1]["content"] = None
    saved.write_text(json.dumps(old))
    assert Conversation.load(saved).messages == chat.messages


def test_a_chat_held_by_another_process_is_not_deleted_and_its_lock_ends_with_that_process(folder) -> None:
    chat = folder / "20260103-chat.json"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from rml_chat.core.sessions import hold\n"
                               "assert hold(Path(sys.argv[1]))\nprint('held', flush=True)\ntime.sleep(60)",
                               str(chat)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"  # type: ignore[union-attr]
        with pytest.raises(ChatError, match="the chat is open in another rml-chat; leave it there first"):
            delete_session("alpha")
    finally:
        holder.kill()
        holder.wait()
    assert delete_session("alpha").path == chat and not chat.exists()  # (the lock went with its process)
    assert not (folder / ".20260103-chat.json.lock").exists()
