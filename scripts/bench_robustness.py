"""Crash consistency, concurrency, a full disk and a long run, measured on the real program in one run.

* **kills**: a process runs every kind of write rml-chat makes, over and over — the conversation's
  autosave (``Conversation.save``), a llama.cpp state (``kv_cache.write_state``, a few MB), the input
  history (``SafeFileHistory``) — and is killed with SIGKILL at a random moment, N times. After each kill the
  conversation must load with every message the writer had confirmed (and never a torn one), the state must
  read back whole or be refused by its checksum, and the history must load. The temporary files the kills
  left are counted, then swept the way the program sweeps them.
* **concurrent**: three REPLs in three ptys, at once, on one sessions folder and one prompt cache; and three
  ``-p`` runs at once on one prompt cache. Nothing may be lost: three autosaves, each with all its messages;
  every ``-p`` reply equal to the same run alone.
* **full disk**: a REPL and a ``-p`` run under ``ulimit -f`` (RLIMIT_FSIZE): the autosave and the prompt
  cache can't be written. One line each, the chat goes on, exit 0.
* **soak**: one REPL in a pty at ``-c 512`` answering TURNS messages; the resident memory after a warm-up
  and at the end.

    python scripts/bench_robustness.py [--kills 50] [--turns 500]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import random
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WRITER = r"""
import os, random, sys
from pathlib import Path
from rml_chat.core.conversation import Conversation
from rml_chat.engines import kv_cache
from rml_chat.frontends.history import SafeFileHistory

folder = Path(sys.argv[1])
chat, state, history = folder / "chat.json", folder / "state.kv", folder / "history"
conversation = Conversation.load(chat) if chat.exists() else Conversation()
store = SafeFileHistory(history, lambda line: None)
rng = random.Random(int(sys.argv[2]))
stamp = {"weights": "w", "size": 1, "mtime_ns": 1, "n_ctx": 512}
while True:
    n = len(conversation.messages)
    conversation.add({"role": "user" if n % 2 == 0 else "assistant",
                      "content": f"message {n} " + "x" * rng.randrange(20000)})
    conversation.save(chat)
    print(len(conversation.messages), flush=True)  # (confirmed: the file holds this many)
    kv_cache.write_state(state, os.urandom(rng.randrange(1, 4_000_000)), stamp, list(range(n)))
    store.store_string(f"line {n}")
"""


def kills(count: int, seed: int = 0) -> dict:
    """Kill the writer ``count`` times at random moments; what was found after each kill."""
    from prompt_toolkit.history import FileHistory

    from rml_chat.core.conversation import Conversation
    from rml_chat.engines import kv_cache
    from rml_chat.engines.base import prune_oldest

    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="rml-kills-"))
    stamp = {"weights": "w", "size": 1, "mtime_ns": 1, "n_ctx": 512}
    found = {"kills": 0, "killed_before_a_first_write": 0, "conversation_loads": 0, "messages_lost": 0,
             "torn_conversations": 0, "states_whole": 0, "states_refused": 0, "histories_load": 0}
    confirmed = 0
    for k in range(count):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(k)], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.2, 0.9))
        writer.send_signal(signal.SIGKILL)
        said = writer.communicate()[0].split()
        confirmed = int(said[-1]) if said else confirmed
        found["kills"] += 1
        if not (folder / "chat.json").exists() and not confirmed:
            found["killed_before_a_first_write"] += 1  # (still loading: nothing to lose yet)
            continue
        try:
            messages = Conversation.load(folder / "chat.json").messages
        except Exception:  # (a torn file: the one thing that must never happen)
            found["torn_conversations"] += 1
            continue
        found["conversation_loads"] += 1
        found["messages_lost"] += max(confirmed - len(messages), 0)
        if any(not m.content.startswith(f"message {i} ") for i, m in enumerate(messages)):
            found["torn_conversations"] += 1
        ids, _, why = kv_cache.read_state(folder / "state.kv", stamp) if (folder / "state.kv").exists() else ([], b"", "x")
        found["states_whole" if not why else "states_refused"] += 1
        list(FileHistory(str(folder / "history")).load_history_strings())
        found["histories_load"] += 1
    left = [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    found["temporary_files_left"] = len(left)
    for path in left:  # (as if they were old enough: what the program sweeps)
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    prune_oldest(folder, 1 << 40)
    found["temporary_files_after_sweep"] = sum(1 for p in folder.iterdir() if p.name.endswith(".tmp"))
    found["messages_at_end"] = confirmed
    return found


class Pty:
    """rml-chat in a real pty (its sessions folder, history and caches under ``home``)."""

    def __init__(self, home: Path, *args: str, limit_bytes: int | None = None):
        self.env = {**os.environ, "RML_CHAT_HISTORY": str(home / "history"), "TERM": "dumb",
                    "RML_CHAT_SESSIONS": str(home / "sessions"), "RML_CHAT_PROMPT_CACHE": str(home / "cache")}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            if limit_bytes is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
            os.chdir(ROOT)
            os.execve(sys.executable, [sys.executable, "-m", "rml_chat", *args], self.env)
        self.output = b""

    def read_until(self, done, timeout: float = 300) -> None:  # type: ignore[no-untyped-def]
        end = time.time() + timeout
        while not done(self.output) and time.time() < end:
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.output += os.read(self.fd, 65536)
                except OSError:
                    break
        if not done(self.output):
            raise TimeoutError(self.output[-1000:])

    def ready(self) -> None:
        self.read_until(lambda out: out.endswith(b"> "))
        time.sleep(0.2)

    def ask(self, line: str) -> None:
        start = len(self.output)
        os.write(self.fd, line.encode() + b"\r")
        self.read_until(lambda out: b" evaluated" in out[start:] and out.endswith(b"> "))
        time.sleep(0.05)

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def leave(self) -> int:
        """Ctrl-D; the exit code (-9: still running a minute later, killed)."""
        os.write(self.fd, b"\x04")
        end, reaped = time.time() + 60, (0, 0)
        while time.time() < end and reaped == (0, 0):
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.output += os.read(self.fd, 65536)
                except OSError:  # (its side of the pty closed: it is leaving)
                    pass
            reaped = os.waitpid(self.pid, os.WNOHANG)
        if reaped == (0, 0):
            os.kill(self.pid, signal.SIGKILL)
            reaped = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(reaped[1])


CHAT = ("--temp", "0", "-n", "8")


def concurrent(turns: int = 4) -> dict:
    """Three REPLs at once on one sessions folder and cache, then three -p runs at once on one cache."""
    home = Path(tempfile.mkdtemp(prefix="rml-three-"))
    chats = [Pty(home, *CHAT) for _ in range(3)]
    for chat in chats:
        chat.ready()
    for turn in range(turns):
        for n, chat in enumerate(chats):  # (all three write while the others generate)
            os.write(chat.fd, f"Chat {n}, message {turn}: name a colour.".encode() + b"\r")
        for chat in chats:
            chat.read_until(lambda out, turn=turn: out.count(b" evaluated") > turn and out.endswith(b"> "))
            # (no pause: each line goes the instant its prompt is drawn, and the Ctrl-D at the end too)
    codes = [chat.leave() for chat in chats]
    saved = [json.loads(p.read_text()) for p in sorted((home / "sessions").glob("*.json"))]
    env = {**os.environ, "RML_CHAT_PROMPT_CACHE": str(home / "cache")}
    ask = [sys.executable, "-m", "rml_chat", "-p", "Name three rivers.", *CHAT]
    alone = subprocess.run(ask, cwd=ROOT, env=env, capture_output=True, text=True).stdout
    runs = [subprocess.Popen(ask, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    outputs = [run.communicate() for run in runs]
    return {"repl_exit_codes": codes, "autosaves": len(saved),
            "messages_each": sorted(len(s["messages"]) for s in saved), "messages_expected": 2 * turns,
            "p_exit_codes": [run.returncode for run in runs],
            "p_replies_equal_alone": sum(out == alone for out, _ in outputs)}


def full_disk() -> dict:
    """A REPL and a -p run that can write no file past 4 KB (``ulimit -f``)."""
    home = Path(tempfile.mkdtemp(prefix="rml-full-"))
    chat = Pty(home, *CHAT, limit_bytes=4096)
    chat.ready()
    chat.ask("Write a long line of text about the sea, please, with many words in it. " * 60)
    chat.ask("And another?")
    code = chat.leave()
    text = chat.output.decode(errors="replace")
    notes = [line.strip() for line in text.splitlines() if "autosave" in line and "failed" in line]

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    env = {**os.environ, "RML_CHAT_PROMPT_CACHE": str(home / "cache")}
    done = subprocess.run([sys.executable, "-m", "rml_chat", "-p", "Name three rivers.", *CHAT], cwd=ROOT, env=env,
                          capture_output=True, text=True, preexec_fn=limited)
    return {"repl_exit_code": code, "autosave_failed_lines": len(notes), "first_line": notes[0] if notes else "",
            "both_turns_answered": text.count(" evaluated") >= 2, "p_exit_code": done.returncode,
            "p_stderr_lines": [line for line in done.stderr.splitlines() if line.strip()][-2:],
            "p_reply": done.stdout.strip()[:40]}


def soak(turns: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix="rml-soak-"))
    chat = Pty(home, "-c", "512", *CHAT)
    chat.ready()
    start, warm = time.time(), 0
    for turn in range(turns):
        chat.ask(f"Message {turn}: tell me one fact about the number {turn}.")
        if turn == min(49, turns - 1):
            warm = chat.rss_kb()
    end = chat.rss_kb()
    code = chat.leave()
    (saved,) = list((home / "sessions").glob("*.json"))
    messages = len(json.loads(saved.read_text())["messages"])
    return {"turns": turns, "answered": chat.output.count(b" evaluated"), "saved_messages": messages,
            "rss_after_warm_up_mb": round(warm / 1024, 1), "rss_at_end_mb": round(end / 1024, 1),
            "rss_growth_percent": round(100 * (end - warm) / warm, 2) if warm else None,
            "seconds": round(time.time() - start, 1), "exit_code": code}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--only", choices=["kills", "concurrent", "full-disk", "soak"])
    args = parser.parse_args()
    runs = {"kills": lambda: kills(args.kills), "concurrent": concurrent, "full-disk": full_disk,
            "soak": lambda: soak(args.turns)}
    for name, run in runs.items():
        if args.only in (None, name):
            print(name, json.dumps(run(), ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
