"""The REPL's input history file (frontends/history.py) against what a file can be: one grown large over
months, a FIFO, an endless device, /dev/null; each bounded, none waited on, none changed."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from rml_chat.frontends import history
from rml_chat.frontends.history import SafeFileHistory, entries

pytestmark = pytest.mark.offline


def _loaded(target, notes: list[str]) -> tuple[list[str], SafeFileHistory]:
    found: list[str] = []
    done = threading.Event()

    def load() -> None:
        found.extend(kept.load_history_strings())
        done.set()

    kept = SafeFileHistory(target, notes.append)
    threading.Thread(target=load, daemon=True).start()
    assert done.wait(10), "the history file was waited on"
    return found, kept


def test_entries_round_trip_what_prompt_toolkit_writes_carriage_returns_and_line_separators_included(tmp_path) -> None:
    texts = ["one", "two\nlines", "a\rb", "c\u2028d", "+plus", ""]
    kept = SafeFileHistory(tmp_path / "history", print)
    for text in texts:
        kept.store_string(text)
    assert entries((tmp_path / "history").read_bytes()) == texts
    assert list(kept.load_history_strings()) == texts[::-1]  # (newest first, as prompt_toolkit wants them)


def test_a_large_history_file_is_read_from_its_newest_bytes_from_the_first_whole_entry(tmp_path, monkeypatch) -> None:
    path = tmp_path / "history"
    kept = SafeFileHistory(path, print)
    for n in range(1000):
        kept.store_string(f"message {n}\nits second line")
    monkeypatch.setattr(history, "MAX_HISTORY_BYTES", 2000)
    found, _ = _loaded(path, [])
    assert found[0] == "message 999\nits second line" and 20 < len(found) < 50
    assert all(f.startswith("message ") and f.endswith("\nits second line") for f in found)  # (none cut in two)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_history_path_that_is_no_file_is_not_waited_on_and_the_history_stays_in_memory(tmp_path, kind: str) -> None:
    target = tmp_path / "fifo" if kind == "fifo" else kind
    if kind == "fifo":
        os.mkfifo(target)
    notes: list[str] = []
    found, kept = _loaded(target, notes)
    kept.store_string("kept in memory")  # (a FIFO opened for writing would wait for a reader)
    assert found == [] and notes == [f"note: history file {target} can't be used (not a regular file (a folder, a "
                                     "FIFO or a device)); history is kept in memory only"]


def test_dev_null_as_the_history_is_no_history_file_quietly_and_is_left_as_it_is() -> None:
    before = os.stat(os.devnull)
    notes: list[str] = []
    found, kept = _loaded(os.devnull, notes)
    kept.store_string("not written")
    after = os.stat(os.devnull)
    assert found == [] and notes == []
    assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode)  # (never made the owner's alone)
