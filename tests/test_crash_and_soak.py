"""Crash consistency, concurrency, a full disk and a long chat, on the real program (smaller runs of
``scripts/bench_robustness.py``, whose full figures are in docs/robustness.md)."""

from __future__ import annotations

import os
import time

from bench_robustness import concurrent, full_disk, kills, soak

from rml_chat.engines.base import prune_oldest


def test_a_writer_killed_at_random_moments_loses_no_confirmed_message_and_tears_nothing() -> None:
    found = kills(12, seed=7)
    checked = 12 - found["killed_before_a_first_write"]
    assert found["conversation_loads"] == found["histories_load"] == checked > 6, found
    assert found["torn_conversations"] == 0 and found["messages_lost"] == 0, found
    assert found["states_whole"] + found["states_refused"] == checked and found["messages_at_end"] > 0, found
    assert found["temporary_files_after_sweep"] == 0, found  # (what the kills left is swept)


def test_only_our_own_temporary_files_are_swept_and_only_once_they_are_old(tmp_path) -> None:
    old = time.time() - 3600
    ours = {".chat.json.abcd1234.tmp": b'{"messages": [', ".0123.kv.zz_y9x8w.tmp": b"RMLKV\0\1\0", ".s.kv.a1b2c3d4.tmp": b""}
    theirs = {".notes.kv.abcd1234.tmp": b"my notes", "notes.kv": b"RMLKV", ".x.json.abcd1234.tmp.bak": b"{"}
    for name, data in {**ours, **theirs}.items():
        (tmp_path / name).write_bytes(data)
        os.utime(tmp_path / name, (old, old))
    fresh = tmp_path / ".new.json.qwer5678.tmp"
    fresh.write_bytes(b"{")  # (a write under way: never touched)
    assert prune_oldest(tmp_path, 1 << 40) == []  # (the states removed: none; the left-overs are no states)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*theirs, fresh.name])


def test_three_chats_and_three_runs_at_once_on_one_folder_lose_nothing() -> None:
    found = concurrent(turns=2)
    assert found["repl_exit_codes"] == [0, 0, 0] and found["autosaves"] == 3, found
    assert found["messages_each"] == [4, 4, 4], found
    assert found["p_exit_codes"] == [0, 0, 0] and found["p_replies_equal_alone"] == 3, found


def test_a_full_disk_is_one_line_and_the_chat_goes_on() -> None:
    found = full_disk()
    assert found["repl_exit_code"] == 0 and found["both_turns_answered"], found
    assert found["autosave_failed_lines"] == 1 and "File too large" in found["first_line"], found  # (said once)
    assert "the conversation is still here" in found["first_line"], found
    assert found["p_exit_code"] == 0 and found["p_reply"], found  # (the prompt cache not written: the reply is)


def test_a_long_chat_at_c_512_answers_every_turn_and_keeps_every_message() -> None:
    found = soak(60)
    assert found["answered"] == 60 and found["saved_messages"] == 120 and found["exit_code"] == 0, found
