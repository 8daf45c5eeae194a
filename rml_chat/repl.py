"""The interactive chat: prompt_toolkit line editing, history, multiline input, slash commands.

Multiline: Alt-Enter inserts a newline; a message that starts with triple quotes continues until a
line ends with triple quotes; a bracketed paste is one message whatever its newlines. Ctrl-C during a
reply stops it (the partial reply stays, marked as cut); Ctrl-C at the prompt keeps what was typed in
the history (Up brings it back); Ctrl-D exits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings

from .engine import Sampling
from .prompt_view import marked_prompt
from .session import ChatError, ChatSession, Conversation

FENCE = '"""'


def history_path() -> Path:
    """``$RML_CHAT_HISTORY``, else ``$XDG_DATA_HOME/rml-chat/history``, else ``~/.local/share/rml-chat/history``."""
    if os.environ.get("RML_CHAT_HISTORY"):
        return Path(os.environ["RML_CHAT_HISTORY"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "rml-chat" / "history"


class SafeFileHistory(FileHistory):
    """A history file that, when it can't be written, warns once and keeps the history in memory."""

    def __init__(self, path: Path, warn: Callable[[str], None]):
        super().__init__(str(path))
        self._warn = warn
        self._broken = False

    def load_history_strings(self):
        try:
            yield from super().load_history_strings()
        except (OSError, UnicodeDecodeError) as err:
            self._fail(err)

    def store_string(self, string: str) -> None:
        if self._broken:
            return
        try:
            Path(self.filename).parent.mkdir(parents=True, exist_ok=True)
            super().store_string(string)
        except OSError as err:
            self._fail(err)

    def _fail(self, err: Exception) -> None:
        if not self._broken:
            self._broken = True
            self._warn(f"note: history file {self.filename} can't be used ({err}); history is kept in memory only")


def _key_bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("escape", "enter")
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add("c-c")
    def _interrupt(event) -> None:
        buffer = event.current_buffer
        if buffer.text.strip():
            buffer.history.append_string(buffer.text)  # nothing typed is lost: Up brings it back
        event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    return kb


def _dim(text: str) -> str:
    return f"\x1b[2m{text}\x1b[0m" if sys.stdout.isatty() else text


class Repl:
    """Reads messages and commands, runs turns, prints replies and a stats line after each."""

    def __init__(self, session: ChatSession, *, input=None, output=None, history: Path | None = None):
        self.session = session
        self._input = input
        store = SafeFileHistory(history or history_path(), self._say) if history is not False else InMemoryHistory()
        self.prompt = PromptSession(history=store, key_bindings=_key_bindings(), input=input, output=output,
                                    enable_history_search=False)
        self.commands: dict[str, tuple[Callable[[str], bool | None], str]] = {
            "/help": (self._help, "this list"),
            "/system": (self._system, "TEXT  set the system message (empty: remove it)"),
            "/clear": (self._clear, "start over (the system message stays)"),
            "/undo": (self._undo, "drop the last exchange"),
            "/regen": (self._regen, "generate the last reply again"),
            "/save": (self._save, "FILE  save the conversation as JSON"),
            "/load": (self._load, "FILE  load a conversation saved with /save"),
            "/info": (self._info, "model, chat format, stop ids, settings"),
            "/prompt": (self._prompt, "the prompt the model sees next, special tokens marked"),
            "/stats": (self._stats, "figures of the last reply"),
            "/set": (self._set, f"NAME VALUE  change a setting ({', '.join(Sampling.SETTABLE)})"),
            "/exit": (lambda _: True, "leave (or Ctrl-D)"),
        }

    # ----- the loop ----------------------------------------------------------------------

    def run(self) -> int:
        d = self.session.model.detection
        self._say(f"rml-chat · {self.session.model.name} · {d.format.name} format · "
                  f"/help for commands, Alt-Enter for a new line, Ctrl-D to leave")
        while True:
            try:
                text = self.read_message()
            except KeyboardInterrupt:
                self._say(_dim("(Ctrl-C again does nothing here: Ctrl-D or /exit leaves; what you typed is in "
                               "the history, press Up)"))
                continue
            except EOFError:
                self._say("")
                return 0
            if not text.strip():
                continue
            if text.startswith("/"):
                if self.command(text):
                    return 0
                continue
            self.reply(text)

    def read_message(self) -> str:
        text = self.prompt.prompt("> ")
        if not text.lstrip().startswith(FENCE):
            return text
        body = text.lstrip()[len(FENCE):]
        lines = [body]
        while not (lines[-1].rstrip().endswith(FENCE) and (len(lines) > 1 or body.strip() != "")):
            try:
                lines.append(self.prompt.prompt("… "))
            except EOFError:  # Ctrl-D inside a block ends the block
                lines.append(FENCE)
            except KeyboardInterrupt:  # the block so far goes to the history: Up brings it back
                self.prompt.history.append_string(FENCE + "\n".join(lines))
                raise
        joined = "\n".join(lines).rstrip()
        return joined[:-len(FENCE)].strip("\n")

    def reply(self, text: str | None) -> None:
        def emit(chunk: str) -> None:
            if chunk:
                sys.stdout.write(chunk)
                sys.stdout.flush()

        try:
            result = self.session.turn(text, emit, lambda line: self._say(_dim(line)))
        except KeyboardInterrupt:
            self._say("\n" + _dim("[reply cut by Ctrl-C; the part shown stays in the conversation]"))
            return
        except ChatError as err:
            self._say(f"error: {err}")
            if text is not None:
                self.prompt.history.append_string(text)
                self._say(_dim("your message was not sent; it is in the history (press Up)"))
            return
        if not result.reply.endswith("\n"):
            sys.stdout.write("\n")
        self._say(_dim(self._stats_line()))

    def command(self, line: str) -> bool:
        name, _, rest = line.strip().partition(" ")
        entry = self.commands.get(name) or (self.commands.get("/exit") if name == "/quit" else None)
        if entry is None:
            self._say(f"unknown command {name}; /help lists them")
            return False
        return bool(entry[0](rest.strip()))

    def _say(self, line: str) -> None:
        print(line, flush=True)

    def _stats_line(self) -> str:
        last = self.session.last
        if last is None:
            return "no reply yet"
        g = last.generation
        cut = " · cut" if g.stop_reason == "interrupted" else ""
        return (f"{g.evaluated} prompt tokens evaluated · TTFT {g.ttft_s * 1000:.0f} ms · "
                f"{len(g.tokens)} tokens at {g.tokens_per_s:.1f} tok/s · context {last.context_used}/"
                f"{self.session.engine.n_ctx} · stop: {g.stop_reason}{cut}")

    # ----- commands ----------------------------------------------------------------------

    def _help(self, _: str) -> None:
        for name, (_, text) in self.commands.items():
            self._say(f"  {name:8} {text}")

    def _system(self, text: str) -> None:
        self.session.conversation.system = text or None
        self._say("system message set" if text else "system message removed")

    def _clear(self, _: str) -> None:
        self.session.conversation.messages.clear()
        self._say("conversation cleared")

    def _undo(self, _: str) -> None:
        self._say("last exchange dropped" if self.session.conversation.undo() else "nothing to undo")

    def _regen(self, _: str) -> None:
        messages = self.session.conversation.messages
        if not messages or messages[-1]["role"] != "assistant":
            self._say("no reply to generate again")
            return
        messages.pop()
        self.reply(None)

    def _save(self, path: str) -> None:
        if not path:
            self._say("usage: /save FILE")
            return
        try:
            self.session.conversation.save(Path(path))
            self._say(f"saved {len(self.session.conversation.messages)} messages to {path}")
        except ChatError as err:
            self._say(f"error: {err}")

    def _load(self, path: str) -> None:
        if not path:
            self._say("usage: /load FILE")
            return
        try:
            self.session.conversation = Conversation.load(Path(path))
            self._say(f"loaded {len(self.session.conversation.messages)} messages from {path}")
        except ChatError as err:
            self._say(f"error: {err}")

    def _info(self, _: str) -> None:
        for line in self.session.model.describe():
            self._say(line)
        s = self.session.sampling
        self._say(f"context: {self.session.engine.n_ctx} tokens · overflow: {self.session.overflow}")
        self._say("settings: " + " ".join(f"{k}={getattr(s, k)}" for k in Sampling.SETTABLE))

    def _prompt(self, _: str) -> None:
        ids = self.session.prompt_ids()
        self._say(marked_prompt(self.session.model.tokenizer, ids, sys.stdout.isatty()))
        self._say(_dim(f"({len(ids)} tokens)"))

    def _stats(self, _: str) -> None:
        self._say(self._stats_line())

    def _set(self, rest: str) -> None:
        name, _, value = rest.partition(" ")
        name = name.replace("-", "_")
        if name not in Sampling.SETTABLE or not value.strip():
            self._say(f"usage: /set NAME VALUE, NAME one of {', '.join(Sampling.SETTABLE)}")
            return
        kind = type(getattr(self.session.sampling, name))
        try:
            setattr(self.session.sampling, name, kind(value.strip()))
        except ValueError:
            self._say(f"{name} needs a {kind.__name__}, not {value.strip()!r}")
            return
        self._say(f"{name} = {getattr(self.session.sampling, name)}")
