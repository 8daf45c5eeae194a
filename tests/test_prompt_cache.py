"""The prompt cache across runs (engines/prompt_cache.py), through the real CLI in separate processes on
SmolLM2: a second run restores what the first kept and replies the same, greedy; whatever does not
belong (another system prompt, other weights, another -c, a damaged entry, a read-only folder, the
cache turned off) falls back to evaluating, never to a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import model_path

SYSTEM = " ".join(["The archive holds the records of ships, ports and cargo from many years."] * 40)  # ~600 tokens


def _run(folder: Path, *args: str, question: str = "Name a ship.", system: str = SYSTEM,
         model: str | None = None) -> tuple[dict, str]:
    env = {**os.environ, "RML_CHAT_PROMPT_CACHE": str(folder)}
    done = subprocess.run([sys.executable, "-m", "rml_chat", model or str(model_path("smollm2")), "-sys", system,
                           "-p", question, "-n", "12", "--temp", "0", "--json", "--verbose", *args],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr


def test_a_second_run_restores_the_first_runs_state_and_replies_the_same(tmp_path) -> None:
    first, _ = _run(tmp_path)
    assert first["prompt_tokens_reused"] == 0 and len(list(tmp_path.glob("*.kv"))) == 1
    again, _ = _run(tmp_path)
    assert again["reply"] == first["reply"] and again["prompt_tokens_evaluated"] <= 1  # the whole prompt: kept
    other, _ = _run(tmp_path, question="Name a port.")
    fresh, _ = _run(tmp_path / "off", "--prompt-cache", "off", question="Name a port.")
    assert fresh["prompt_tokens_reused"] == 0
    # The oracle: both prompts in one process without the prompt cache, where llama.cpp's own cache keeps the
    # first one's state and the second evaluates the same tokens after it. (Evaluated in one batch with the
    # rest, the prefix's tokens are summed in another order: a run from nothing is the same prompt, not the
    # same arithmetic, as in llama-server.)
    lines = "".join(json.dumps({"prompt": q, "system": SYSTEM}) + "\n" for q in ("Name a ship.", "Name a port."))
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "--batch", "-", "-n", "12",
                           "--temp", "0", "--prompt-cache", "off"], input=lines, capture_output=True, text=True,
                          timeout=300)
    ship, port = (json.loads(line) for line in done.stdout.splitlines())
    assert ship["reply"] == first["reply"] and port["reply"] == other["reply"]
    assert port["prompt_tokens_evaluated"] == other["prompt_tokens_evaluated"]
    assert other["prompt_tokens_evaluated"] < 20 < other["prompt_tokens_reused"]  # the question and its glue only
    assert len(list(tmp_path.glob("*.kv"))) == 1  # a new question adds too little to be worth a second state
    assert not list((tmp_path / "off").glob("*.kv"))


def test_what_does_not_belong_falls_back_cleanly(tmp_path) -> None:
    base, _ = _run(tmp_path)
    changed, _ = _run(tmp_path, system="Be brief. " + SYSTEM)
    assert changed["prompt_tokens_reused"] == 0  # another system prompt shares too little
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(model_path("smollm2"), copy)
    os.utime(copy, (time.time() + 5, time.time() + 5))
    moved, said = _run(tmp_path, model=str(copy))
    assert moved["prompt_tokens_reused"] == 0 and "saved with other weights" in said
    wider, said = _run(tmp_path, "-c", "2048")
    assert wider["prompt_tokens_reused"] == 0 and "saved with another context size" in said
    assert wider["reply"] == base["reply"] == moved["reply"]


def test_a_damaged_entry_and_a_read_only_folder_never_fail_a_run(tmp_path) -> None:
    base, _ = _run(tmp_path)
    (entry,) = tmp_path.glob("*.kv")
    entry.write_bytes(entry.read_bytes()[:-1000])  # truncated
    damaged, said = _run(tmp_path)
    assert damaged["reply"] == base["reply"] and damaged["prompt_tokens_reused"] == 0
    assert "passed over: its state file is damaged" in said
    blocked = tmp_path / "a-file"  # a folder that can't be made: unwritable for root too
    blocked.write_text("x")
    done, said = _run(blocked / "cache")
    assert done["reply"] == base["reply"] and "prompt cache can't be written" in said


def test_the_cache_is_bounded_by_size_the_least_recently_used_going_first(tmp_path) -> None:
    from rml_chat.engines.prompt_cache import PromptCache

    cache = PromptCache(tmp_path, cap=6000)  # each entry: ~2.5 KB (1,000 bytes of state, 300 ids)
    stamp = {"weights": "w", "size": 1, "mtime_ns": 1, "n_ctx": 512}
    for n in range(3):
        assert cache.keep(stamp, list(range(n * 300, n * 300 + 300)), b"x" * 1000) == ""
        time.sleep(0.01)
    kept = sorted(tmp_path.glob("*.kv"), key=lambda p: p.stat().st_mtime)
    assert len(kept) == 2  # the oldest went
    hit = cache.best(stamp, list(range(300, 600)) + [1], better_than=0)
    assert hit is not None and hit.shared == 300


@pytest.mark.offline
@pytest.mark.whitebox  # (the entries the cache reads: a FIFO among them would hang every run)
def test_the_cache_counts_and_prunes_only_its_own_entries_and_reads_only_regular_files(tmp_path) -> None:
    """A cache folder pointed at a folder of the user's: their ``notes.kv`` is neither counted toward the cap
    nor removed; a FIFO named like an entry is never opened."""
    from rml_chat.engines.prompt_cache import PromptCache, is_entry

    notes = tmp_path / "notes.kv"
    notes.write_bytes(b"x" * 5000)
    cache = PromptCache(tmp_path, cap=3000)
    stamp = {"weights": "w", "n_ctx": 512}
    for n in range(3):
        assert cache.keep(stamp, list(range(n, n + 40)), b"s" * 1000) == ""
        time.sleep(0.01)
    entries = sorted(p for p in tmp_path.iterdir() if is_entry(p))
    assert notes.read_bytes() == b"x" * 5000 and len(entries) == 2  # (the oldest entry went; the notes count for nothing)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / ("f" * 24 + ".kv"))
        assert len(PromptCache(tmp_path)._entries()) == len(entries)


@pytest.mark.offline
def test_the_user_is_told_each_time_the_cache_grows_past_another_step(tmp_path, monkeypatch) -> None:
    """It grew to 449 MB in 15 runs without a word: now a line says so at each step (where, its cap, how
    to change it), once a step."""
    from rml_chat.engines import prompt_cache

    monkeypatch.setattr(prompt_cache, "NOTE_EVERY", 5000)
    said: list[str] = []
    cache = prompt_cache.PromptCache(tmp_path, cap=100_000, note=said.append)
    stamp = {"weights": "w", "size": 1, "mtime_ns": 1, "n_ctx": 512}
    for n in range(5):  # (each entry about 2.5 KB: the steps at 5 and 10 KB)
        assert cache.keep(stamp, list(range(n * 300, n * 300 + 300)), b"x" * 1000) == ""
    assert len(said) == 2 and all("the prompt cache holds" in line and "--prompt-cache off" in line for line in said)
