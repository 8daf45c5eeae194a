"""A conversation: its messages, saved and loaded atomically, and autosaved by the REPL.

Files are JSON (``{"format": "rml-chat conversation", "version": 1, "system", "messages", "model"}``),
written to a temporary file beside the target and renamed into place, so a failed write (a full disk)
leaves the old file whole. A file read back follows the text policy (``text_input``: invalid UTF-8 becomes
U+FFFD, with a warning) and is checked message by message; what is wrong is one line naming the file.

A file holds the transcript, the model's window over it, the model, a name (``/name``), the settings
changed with ``/set`` (brought back by ``--resume``) and the branches: the paths left by ``/edit``, each
whole, with its thoughts and tool calls (a file written before branches existed loads with none). The
REPL's autosaves live in the sessions folder
(``sessions.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tokenizer.chat.reasoning import Reasoning

from .. import text_input
from ..engines.base import common_prefix
from ..errors import NOT_A_FILE, AppError
from ..words import counted
from .message import Message, MessageError
from .paths import user_path

MAX_CHAT_BYTES = 16 * text_input.MAX_TEXT_BYTES  # a saved chat: its messages and the paths /edit left


class ChatError(AppError):
    """A turn that can't be run, or a conversation file that can't be used; one line for the user."""

    def __init__(self, message: str):
        super().__init__(message, "chat")


@dataclass
class Conversation:
    """The transcript: every message so far (the system message kept apart), and the window over it that
    the model sees. An overflow moves the window (``window_start``: the index of its first message, a user
    message, or 0); it never deletes a message, and both are saved.

    With 3 exchanges and ``window_start`` 2, the prompt holds the system message and exchanges 2 and 3;
    the file holds all 6 messages.

    The conversation is the only writer of its messages (``add``, ``drop_last``, ``replace_last``, ``undo``,
    ``fork``, ``switch``, ``clear``): everyone else reads them. Messages given as their file form (dicts)
    are checked and typed as they come in."""

    system: str | None = None
    messages: list[Message] = field(default_factory=list)
    model: str | None = None  # the model it was held with (a path), for --resume
    window_start: int = 0
    name: str | None = None  # given with /name: --resume NAME opens it
    settings: dict[str, object] = field(default_factory=dict)  # /set changes, as NAME: value text
    branches: list[list[Message]] = field(default_factory=list)  # the other paths, each its whole message list

    def __post_init__(self) -> None:
        self.messages = _typed(self.messages, "message")
        self.branches = [_typed(branch, f"branch {n}: message") for n, branch in enumerate(self.branches, 1)]

    def add(self, message: Message | dict) -> Message:
        """A message at the end (a dict is checked and typed: a ChatError where it is not a message)."""
        (typed,) = _typed([message], "the message")
        self.messages.append(typed)
        return typed

    def drop_last(self) -> Message:
        """The last message, out of the conversation."""
        dropped = self.messages.pop()
        self.window_start = min(self.window_start, len(self.messages))
        return dropped

    def replace_last(self, message: Message) -> None:
        """The last message, changed (a reply's message rewritten as the template takes its calls)."""
        self.messages[-1] = message

    def for_prompt(self, reasoning: Reasoning | None = None, calls_without_content: bool = False) -> list[dict]:
        """The window as the template takes it: the system message, then the messages from ``window_start``
        on; a reply's thought handed over the way the template takes one (``reasoning``), so that it drops or
        keeps it. ``calls_without_content``: the template takes a message of calls with its content None
        (DeepSeek R1's distills), which is written so here alone: a message's content is always a string."""
        head = [{"role": "system", "content": self.system}] if self.system else []
        shown = []
        for m in self.messages[self.window_start:]:
            written = (reasoning.message(m.content, m.reasoning, bool(m.tool_calls))
                       if reasoning is not None and m.reasoning is not None else {"role": m.role, "content": m.content})
            written.update(m.call_fields())
            if calls_without_content and m.tool_calls and not m.content:
                written["content"] = None
            shown.append(written)
        return head + shown

    def next_window_start(self) -> int | None:
        """Where the window starts once its oldest exchange leaves it (None: one exchange or less is left)."""
        return next((i for i in range(self.window_start + 1, len(self.messages)) if self.messages[i].role == "user"),
                    None)

    def unanswered(self) -> str | None:
        """The last message's text when it is a user message with no reply (its turn was cut before the
        model wrote anything)."""
        return self.messages[-1].content if self.messages and self.messages[-1].role == "user" else None

    def take_last_reply(self) -> Message:
        """The last message, the model's reply, out of the conversation (``/continue`` goes on from it;
        ``add`` puts it back); a ChatError where the last message is not the model's."""
        if not self.messages or self.messages[-1].role != "assistant":
            raise ChatError("there is no reply to continue: the last message is not the model's")
        return self.drop_last()

    def undo(self) -> bool:
        """Drop the last exchange (the last user message and what follows it)."""
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "user":
                del self.messages[i:]
                self.window_start = min(self.window_start, len(self.messages))
                return True
        return False

    def fork(self, at: int) -> None:
        """Keep the messages as a branch and go on from the first ``at`` of them (``/edit`` of message
        ``at``). Worked example: messages ``[u1, a1, u2, a2]``, ``fork(2)``: the branch ``[u1, a1, u2, a2]`` is
        kept, and the messages are ``[u1, a1]``, where the edited ``u2`` goes."""
        self.branches.append(list(self.messages))
        del self.messages[at:]
        self.window_start = min(self.window_start, at)

    def switch(self, number: int) -> int:
        """Branch ``number`` (1-based, as ``branch_list`` counts) becomes the messages, and the messages a
        branch; the index of the first message where the two part."""
        chosen = self.branches.pop(number - 1)
        self.branches.insert(number - 1, list(self.messages))
        parted = common_prefix(self.messages, chosen)
        self.messages[:] = chosen
        self.window_start = min(self.window_start, parted)
        return parted

    def branch_list(self) -> list[tuple[int, int, str]]:
        """Each branch: its number, the index of its first message past what it shares with the messages,
        and that message's first line."""
        listed = []
        for number, branch in enumerate(self.branches, 1):
            parted = common_prefix(self.messages, branch)
            first = branch[parted].content.strip().split("\n")[0] if parted < len(branch) else ""
            listed.append((number, parted, first))
        return listed

    def clear(self) -> None:
        """Start over: no message, the window at the start (the system message stays)."""
        self.messages.clear()
        self.window_start = 0
        self.branches.clear()

    def to_json(self) -> dict:
        return {"format": "rml-chat conversation", "version": 1, "system": self.system,
                "messages": [m.as_dict() for m in self.messages], "model": self.model, "window_start": self.window_start,
                "name": self.name, "settings": self.settings,
                "branches": [[m.as_dict() for m in branch] for branch in self.branches]}

    @classmethod
    def from_json(cls, data: object, source: str) -> Conversation:
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise ChatError(f"{source}: not an rml-chat conversation (no 'messages' list)")
        messages = _checked(data["messages"], source)
        branches = data.get("branches") or []
        if not isinstance(branches, list) or not all(isinstance(b, list) for b in branches):
            raise ChatError(f"{source}: 'branches' must be a list of message lists")
        branches = [_checked(branch, f"{source}: branch {n}") for n, branch in enumerate(branches, 1)]
        system = data.get("system")
        if system is not None and not isinstance(system, str):
            raise ChatError(f"{source}: 'system' must be a string or null")
        model = data.get("model")
        start = data.get("window_start", 0)
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= len(messages):
            raise ChatError(f"{source}: 'window_start' must be a message index from 0 to {len(messages)}")
        name, settings = data.get("name"), data.get("settings")
        if name is not None and not isinstance(name, str):
            raise ChatError(f"{source}: 'name' must be a string or null")
        if settings is not None and not (isinstance(settings, dict) and all(isinstance(v, (str, int, float))
                                                                            for v in settings.values())):
            raise ChatError(f"{source}: 'settings' must be an object of setting names and values")
        return cls(system, messages, model if isinstance(model, str) else None, start, name, dict(settings or {}),
                   branches)

    def called_tools(self) -> list[str]:
        """The names of the tools the assistant called, in the order of their first call."""
        names = (c["function"].get("name") for m in self.messages for c in m.tool_calls)
        return list(dict.fromkeys(n for n in names if isinstance(n, str)))

    def save(self, path: Path) -> None:
        """Write atomically: a temporary file beside the target, then rename (the old file stays intact
        if anything fails)."""
        path = user_path(path)
        if path.is_symlink():  # (the link stays; the file it names is written)
            path = Path(os.path.realpath(path))
        if path.exists() and not path.is_file():  # (renamed over, a device such as /dev/full would be lost)
            raise ChatError(f"{path}: {NOT_A_FILE}; give a file's path")
        text = json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n"
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
        except OSError as err:
            raise ChatError(f"{path}: can't write there ({err.strerror})") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise ChatError(f"{path}: save failed ({err.strerror}); the old file is unchanged") from None

    @classmethod
    def load(cls, path: Path) -> Conversation:
        path = user_path(path)
        try:
            parsed = chat_json(path)
        except OSError as err:
            raise ChatError(f"{path}: can't read ({err.strerror})") from None
        except (json.JSONDecodeError, RecursionError) as err:
            raise ChatError(f"{path}: not valid JSON ({err})") from None
        return cls.from_json(parsed, str(path))


def chat_json(path: Path, quiet: bool = False) -> object:
    """A saved chat's JSON as ``--resume`` reads it: at most ``MAX_CHAT_BYTES``, under the text policy
    (``quiet``: without its warnings, for the ``--sessions`` listing), a byte-order mark left out. OSError,
    ValueError or RecursionError where it can't be read."""
    warn = {"warn": lambda _: None} if quiet else {}
    data = text_input.read_limited(path, MAX_CHAT_BYTES)
    return text_input.from_json(text_input.without_bom(text_input.from_bytes(data, str(path), **warn)), str(path),
                                **warn)


def _checked(listed: list, source: str) -> list[Message]:
    """A file's message list, each message checked (what is wrong: one line naming the file)."""
    return _typed(listed, f"{source}: message")


def _typed(listed: list, what: str) -> list[Message]:
    try:
        return [Message.of(m, f"{what} {i}") for i, m in enumerate(listed)]
    except MessageError as err:
        raise ChatError(str(err)) from None


def window_note(conversation: Conversation) -> str:
    """"" when the model sees the whole transcript, else where its window starts (for /prompt, --resume)."""
    start = conversation.window_start
    if not start:
        return ""
    return (f"; the model's window starts at message {start + 1} of {len(conversation.messages)}: the "
            f"{counted(start, 'message')} before it stay in the transcript")
