"""The interactive chat: prompt_toolkit line editing, history, multiline input, slash commands.

Multiline: Alt-Enter inserts a newline; a message that starts with triple quotes continues until a
line ends with triple quotes; a bracketed paste is one message whatever its newlines. Ctrl-C during a
reply stops it (the partial reply stays, marked as cut); Ctrl-C at the prompt keeps what was typed in
the history (Up brings it back); Ctrl-D exits. Tab completes slash commands.

No error ends the session: a turn or a command that fails prints one line and the prompt comes back.
The conversation is autosaved after every turn and every command that changes it (``conversation.py``),
so nothing typed or replied is lost, even to a kill.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings

from tokenizer import TokenizerError
from tokenizer.chat import ChatFormatError

from .. import text_input
from ..core.conversation import ChatError, new_autosave_path, sessions_dir
from ..core.session import ChatSession
from ..engines.kv_cache import state_path
from ..errors import AppError, one_line
from ..words import counted
from .progress import EvalProgress
from .repl_commands import Commands

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
        string = text_input.from_str(string, "history", warn=lambda _: None)  # the text policy, quietly
        try:
            Path(self.filename).parent.mkdir(parents=True, exist_ok=True)
            super().store_string(string)
        except (OSError, UnicodeEncodeError) as err:
            self._fail(err)

    def _fail(self, err: Exception) -> None:
        if not self._broken:
            self._broken = True
            self._warn(f"note: history file {self.filename} can't be used ({err}); history is kept in memory only")


class _SlashCompleter(Completer):
    def __init__(self, names: list[str]):
        self._names = names

    def get_completions(self, document, complete_event):  # type: ignore[no-untyped-def]
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for name in self._names:
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text))


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


def dim(text: str) -> str:
    return f"\x1b[2m{text}\x1b[0m" if sys.stdout.isatty() else text


def fit_width(fields: list[str], width: int | None = None) -> str:
    """Fields joined with " · ", wrapped between fields (never inside one) to the terminal's width."""
    width = width or shutil.get_terminal_size((80, 24)).columns
    lines, line = [], ""
    for part in fields:
        joined = f"{line} · {part}" if line else part
        if line and len(joined) > width:
            lines.append(line)
            line = part
        else:
            line = joined
    return "\n".join([*lines, line])


class Repl:
    """Reads messages and commands, runs turns, prints replies and a stats line after each."""

    def __init__(self, session: ChatSession, *, input=None, output=None, history: Path | None = None,
                 autosave: Path | None = None):
        self.session = session
        self._pending: list[str] = []  # notes raised while the prompt owns the terminal: printed after it
        self._prompting = False
        store = SafeFileHistory(history or history_path(), self._say) if history is not False else InMemoryHistory()
        self.commands = Commands(self)
        self.prompt = PromptSession(history=store, key_bindings=_key_bindings(), input=input, output=output,
                                    enable_history_search=False, completer=_SlashCompleter(self.commands.names()),
                                    complete_while_typing=False)
        self.autosave_path = autosave or session.autosave_path or new_autosave_path(session.model.name)
        self._autosave_failed = False

    # ----- the loop ----------------------------------------------------------------------

    def run(self) -> int:
        d = self.session.model.detection
        self._say(fit_width([f"rml-chat · {self.session.model.name}", f"{d.format.name} format"]))
        self._say(dim(fit_width(["/help for commands", "Alt-Enter for a new line", "Ctrl-D to leave"])))
        if self.session.conversation.messages:
            self._say(dim(f"resumed: {counted(len(self.session.conversation.messages), 'message')}"))
        while True:
            try:
                text = self.read_message()
            except KeyboardInterrupt:
                self._say(dim("(Ctrl-C again does nothing here: Ctrl-D or /exit leaves; what you typed is in "
                              "the history, press Up)"))
                continue
            except EOFError:
                self._say("")
                self.leave()
                return 0
            if not text.strip():
                continue
            if text.startswith("/"):
                if self.guarded(lambda: self.commands.run(text)):  # noqa: B023
                    self.leave()
                    return 0
                continue
            self.reply(text)

    def guarded(self, action: Callable[[], object]) -> object:
        """Run a command or a turn; an error is one line and the session goes on."""
        try:
            return action()
        except (AppError, ChatFormatError, TokenizerError) as err:
            self._say(f"error: {one_line(str(err))}")
        except OSError as err:
            self._say(f"error: {one_line(str(err))}")
        except Exception as err:  # never ends the session
            self._say(f"internal error ({type(err).__name__}: {one_line(str(err))}); the conversation is kept")
        return None

    def read_message(self) -> str:
        text = self._prompt("> ")
        if not text.lstrip().startswith(FENCE):
            return text
        body = text.lstrip()[len(FENCE):]
        lines = [body]
        while not (lines[-1].rstrip().endswith(FENCE) and (len(lines) > 1 or body.strip() != "")):
            try:
                lines.append(self._prompt("… "))
            except EOFError:  # Ctrl-D inside a block ends the block
                lines.append(FENCE)
            except KeyboardInterrupt:  # the block so far goes to the history: Up brings it back
                self.prompt.history.append_string(FENCE + "\n".join(lines))
                raise
        joined = "\n".join(lines).rstrip()
        return joined[:-len(FENCE)].strip("\n")

    def _prompt(self, marker: str) -> str:
        self._prompting = True
        try:
            text = self.prompt.prompt(marker)
        finally:
            self._prompting = False
            for line in self._pending:
                self._say(line)
            self._pending.clear()
        return text_input.from_str(text, "the chat input", warn=lambda line: self._say(f"note: {line}"))

    def reply(self, text: str | None) -> None:
        progress = EvalProgress()

        def emit(chunk: str) -> None:
            if chunk:
                progress.clear()
                sys.stdout.write(chunk)
                sys.stdout.flush()

        try:
            result = self.session.turn(text, emit, lambda line: self._say(dim(line)), progress)
        except KeyboardInterrupt:
            progress.clear()
            if self.session.conversation.unanswered() is not None:
                self._say(dim("[cut during the prompt's evaluation: your message stays, with no reply; /regen "
                              "answers it, or it goes with your next message]"))
            else:
                self._say("\n" + dim("[reply cut by Ctrl-C; the part shown stays in the conversation]"))
            self.autosave()
            return
        except Exception as err:  # no error ends the session; the message goes back to the history
            known = isinstance(err, (AppError, ChatFormatError, TokenizerError, OSError))
            self._say(f"error: {one_line(str(err))}" if known else
                      f"internal error ({type(err).__name__}: {one_line(str(err))}); the conversation is kept")
            if text is not None:
                if self.session.conversation.messages[-1:] == [{"role": "user", "content": text}]:
                    self.session.conversation.messages.pop()
                self.prompt.history.append_string(text)
                self._say(dim("your message was not sent; it is in the history (press Up)"))
            return
        progress.clear()
        if not result.reply.endswith("\n"):
            sys.stdout.write("\n")
        if result.outcome is not None and result.outcome.problem:
            self._say(f"note: {result.outcome.problem}")
        self._say(dim(self.stats_line()))
        self.autosave()

    def autosave(self) -> None:
        """Save the conversation after a change; a failure warns once (until saving works again)."""
        conversation = self.session.conversation
        conversation.model = str(self.session.model.source)
        try:
            self.autosave_path.parent.mkdir(parents=True, exist_ok=True)
            conversation.save(self.autosave_path)
        except (ChatError, OSError) as err:
            if not self._autosave_failed:
                self._say(f"note: autosave failed ({one_line(str(err))}); the conversation is still here — "
                          "/save FILE keeps it")
            self._autosave_failed = True
            return
        if self._autosave_failed:
            self._say(dim(f"autosave works again: {self.autosave_path}"))
        self._autosave_failed = False

    def leave(self) -> None:
        """On the way out: the conversation, and llama.cpp's state beside it, so that --resume starts
        where this chat stopped without evaluating it again."""
        if not self.session.conversation.messages:
            return
        self.autosave()
        if not self._autosave_failed:
            self.guarded(lambda: self.session.engine.save_state(state_path(self.autosave_path),
                                                                self.session.model.weights))

    def say(self, line: str) -> None:
        """A line for the user (``repl_commands.Host``): held while the prompt is up, as every note is."""
        self._say(line)

    def _say(self, line: str) -> None:
        if self._prompting:
            self._pending.append(line)
            return
        print(line, flush=True)

    def stats_line(self) -> str:
        last = self.session.last
        if last is None:
            return "no reply yet"
        g = last.generation
        if g.stop_reason == "interrupted" and not g.first_token_at:
            return (f"cut during the prompt's evaluation ({g.evaluated} of {g.prompt_tokens} tokens to evaluate; "
                    "the cache keeps what was done)")
        fields = [f"{counted(g.evaluated, 'prompt token')} evaluated",
                  f"TTFT {g.ttft_s * 1000:.0f} ms" if g.first_token_at else "no token yet",
                  f"{counted(len(g.tokens), 'token')} at {g.tokens_per_s:.1f} tok/s",
                  f"context {last.context_used}/{self.session.engine.n_ctx}",
                  f"stop: {g.stop_reason}" + (" (cut)" if g.stop_reason == "interrupted" else "")]
        return fit_width(fields)

    def sessions_note(self) -> str:
        return f"autosave: {self.autosave_path} (rml-chat --resume reopens the newest in {sessions_dir()})"
