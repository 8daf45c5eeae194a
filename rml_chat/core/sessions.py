"""The sessions folder: every REPL chat autosaved as a conversation (small; kept), with llama.cpp's state
beside it (large; kept only while the folder stays under its cap).

Where: ``$RML_CHAT_SESSIONS``, else ``$XDG_DATA_HOME/rml-chat/sessions``, else
``~/.local/share/rml-chat/sessions``; one ``<start time>-<model>.json`` per chat, and its ``.json.kv``.

**Bounded.** The states together stay under ``--sessions-max`` (``$RML_CHAT_SESSIONS_MAX``, default 1G):
after a state is written, the oldest other states go first until the folder fits. A state is written at
all only when it is worth it (``state_worth_it``): the tokens it saves evaluating again are many, or slow.
Conversations are never pruned; ``--delete-session`` removes one with its state.

**Findable.** ``rml-chat --sessions`` lists them newest first, numbered; ``--resume N``, ``--resume NAME``
(given with ``/name``) or ``--resume FILE`` opens one. With 3 chats, ``--resume 1`` is the newest and
``--resume 3`` the oldest.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..engines.base import prune_oldest, state_path
from ..text_input import whole_number
from . import fences
from .conversation import ChatError, chat_json
from .paths import user_path

DEFAULT_CAP = "1G"
STATE_MIN_TOKENS = 256     # fewer cached tokens than this: evaluating them again is quicker than a file
STATE_MIN_SECONDS = 1.0    # ... unless evaluating them again would take this long on this model
_UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_size(text: str) -> int:
    """Bytes for a size such as ``500M``, ``1.5G`` or ``0``; ValueError for anything else.

        >>> parse_size("1.5G"), parse_size("200k"), parse_size("0")
        (1500000000, 200000, 0)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)B?\s*", text)
    if not match:
        raise ValueError(f"a size such as 500M or 2G (0: keep no state), not {text!r}")
    return int(float(match[1]) * _UNITS[match[2].upper()])


def size_text(n: int) -> str:
    """A size as the listing shows it: ``12 KB``, ``73.4 MB``, ``1.2 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{max(round(n / 1e3), 1 if n else 0)} KB"


def sessions_dir() -> Path:
    if os.environ.get("RML_CHAT_SESSIONS"):
        return user_path(os.environ["RML_CHAT_SESSIONS"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "rml-chat" / "sessions"


def default_cap() -> str:
    return os.environ.get("RML_CHAT_SESSIONS_MAX") or DEFAULT_CAP


def new_autosave_path(model_name: str) -> Path:
    """A new chat's autosave file, claimed at once: created empty and exclusively, so that two chats started
    in the same second never share one (the second takes ``…-2.json``). A chat that saves nothing gives
    its claim back (``release_claim``). Where the folder can't be written, the name alone: the first save
    says why."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model_name)[:60] or "chat"
    folder = sessions_dir()
    for n in range(1, 10_000):
        path = folder / (f"{stamp}-{safe}.json" if n == 1 else f"{stamp}-{safe}-{n}.json")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return path
        except FileExistsError:
            continue
        except OSError:
            return path
    return folder / f"{stamp}-{safe}-{os.getpid()}.json"


_HELD: dict[Path, int] = {}  # the lock files this process holds, open (a lock lasts while its file is open)


def hold(path: Path) -> bool:
    """Hold the chat saved at ``path`` for this process, so that a second rml-chat going on with the same
    chat can tell, and does not save over this one's turns (nor this one over its): an advisory lock
    (``flock``) on ``.NAME.lock`` beside it, which ends with the process however it ends. False: another
    process holds it. Where no lock can be taken (a folder that can't be written, a file system without
    locks) True: the lock is a courtesy, never a reason to refuse a chat."""
    lock = lock_path(path)
    if lock in _HELD:  # (this process's own: a second REPL of the same run, a delete after a resume)
        return True
    try:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except OSError:
        os.close(fd)
        return True
    _HELD[lock] = fd
    return True


def chat_file(resumed: Path | None, model_name: str) -> tuple[Path, bool]:
    """The file a chat goes on in, held for this process: a resumed chat's own, else a new one, which is
    also where another rml-chat holds the resumed chat (True: saving there would undo that one's turns)."""
    elsewhere = resumed is not None and not hold(resumed)
    path = resumed if resumed is not None and not elsewhere else new_autosave_path(model_name)
    hold(path)  # (a new chat's too: a later --resume of it, from another window, can tell)
    return path, elsewhere


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def release_claim(path: Path) -> None:
    """Remove an autosave file claimed and never written (still empty), and its lock."""
    with contextlib.suppress(OSError):
        if path.is_file() and path.stat().st_size == 0:
            path.unlink()
            lock_path(path).unlink(missing_ok=True)


def state_worth_it(tokens: int, eval_tokens_per_s: float | None) -> bool:
    """Is a state of ``tokens`` cached tokens worth a file? Yes from STATE_MIN_TOKENS on, or when this model
    would take STATE_MIN_SECONDS to evaluate them again (``eval_tokens_per_s``: as measured this chat).

        >>> state_worth_it(100, 2000.0), state_worth_it(300, 2000.0), state_worth_it(100, 50.0)
        (False, True, True)
    """
    if tokens >= STATE_MIN_TOKENS:
        return True
    return bool(eval_tokens_per_s) and tokens / eval_tokens_per_s >= STATE_MIN_SECONDS


@dataclass
class SessionInfo:
    """One autosaved chat, as the listing shows it."""

    path: Path
    when: float            # last written (the file's mtime)
    name: str | None       # given with /name
    model: str | None
    messages: int
    first_line: str        # the first user message's first line
    size: int              # the conversation and its state, in bytes

    def line(self, number: int) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.when))
        model = Path(self.model).name if self.model else "?"
        title = f"[{self.name}] " if self.name else ""
        first = self.first_line if len(self.first_line) <= 48 else self.first_line[:47] + "…"
        return f"{number:>3}  {when}  {model[:32]:32}  {self.messages:>8}  {size_text(self.size):>8}  {title}{first}"


def title_line(message: str) -> str:
    """What names a chat in the list: the first line of its first message outside a fenced block (a file
    attached with ``-f`` or ``/file`` comes before the question), else its first line::

        >>> title_line("```pyproject.toml\\n[project]\\n```\\n\\nWhat does this build?")
        'What does this build?'
    """
    outside = (line.strip() for line, role in fences.read(message)[0] if role == "text")
    lines = message.strip().splitlines()
    return next((line for line in outside if line), lines[0].strip() if lines else "")


def _read(path: Path) -> SessionInfo | None:
    try:
        data = chat_json(path, quiet=True)  # (as --resume reads it: one it can't resume is left out)
        stat = path.stat()
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return None
    messages = [m for m in data["messages"] if isinstance(m, dict)]
    first = next((m.get("content") for m in messages if m.get("role") == "user"), "")
    first = title_line(first) if isinstance(first, str) else ""
    state = state_path(path)
    size = stat.st_size + (state.stat().st_size if state.is_file() else 0)
    name, model = data.get("name"), data.get("model")
    return SessionInfo(path, stat.st_mtime, name if isinstance(name, str) else None,
                       model if isinstance(model, str) else None, len(messages), first, size)


def list_sessions(folder: Path | None = None) -> list[SessionInfo]:
    """Every readable conversation in the folder, newest first (a file that is not one is left out)."""
    folder = folder or sessions_dir()
    # Regular files only: reading a FIFO or a device would wait forever.
    found = [_read(p) for p in folder.glob("*.json") if p.is_file()] if folder.is_dir() else []
    return sorted((s for s in found if s is not None), key=lambda s: s.when, reverse=True)


def name_problem(name: str) -> str:
    """Why ``name`` can't name a chat ("" where it can): it would read as one of ``find_session``'s other
    keys — "last", a listing's number, a path — and reopen (or delete) another chat than this one."""
    if name.strip().lower() == "last" or name.strip().isdigit():  # (any script's digits: they read as a number)
        return f"{name!r} selects a chat by its place in the listing (--resume {name}); pick a name that isn't one"
    if os.sep in name or (os.altsep and os.altsep in name) or name.endswith(".json"):
        return f"{name!r} reads as a file's path; pick a name without {os.sep!r} and not ending .json"
    return ""


def find_session(key: str, flag: str = "--resume", doing: str = "resume") -> Path:
    """``--resume KEY`` (``flag`` and ``doing``: what the chat is found for): "last" (the newest), N (the listing's
    number), a name given with /name, a file's stem in the folder, or a path; ChatError naming what was
    looked for."""
    if not key.strip():
        raise ChatError(f"{flag} needs a chat: last, its number or its name (rml-chat --sessions lists them)")
    if key != "last" and (os.sep in key or key.endswith(".json")):
        return user_path(key)
    sessions = list_sessions()
    if not sessions:
        raise ChatError(f"no saved chat in {sessions_dir()} to {doing}")
    if key == "last":
        return sessions[0].path
    number = whole_number(key)
    if number is not None:
        if not 1 <= number <= len(sessions):
            raise ChatError(f"no chat number {key}: rml-chat --sessions lists {len(sessions)}")
        return sessions[number - 1].path
    for s in sessions:
        if key in (s.name, s.path.stem):
            return s.path
    if user_path(key).exists():
        return user_path(key)
    raise ChatError(f"no chat named {key!r} in {sessions_dir()} (rml-chat --sessions lists them)")


def delete_session(key: str) -> SessionInfo:
    """Remove a chat of the folder (``find_session``'s keys) and its state; what was removed."""
    path = find_session(key, "--delete-session", "delete")
    info = _read(path)
    if info is None or path.parent.resolve() != sessions_dir().resolve():
        raise ChatError(f"{path}: not a chat in {sessions_dir()}")
    if not hold(path):
        raise ChatError(f"{path.name}: the chat is open in another rml-chat; leave it there first")
    for p in (state_path(path), path, lock_path(path)):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    return info


def prune_states(cap: int, newest: Path | None = None) -> list[Path]:
    """Delete the oldest states (never a conversation) until the folder's files together are within
    ``cap`` bytes; ``newest`` (the state just written) goes last, only when it alone is over the cap. The
    states removed; a file that can't be removed is passed over."""
    folder = sessions_dir()
    return prune_oldest(folder, cap, newest) if folder.is_dir() else []
