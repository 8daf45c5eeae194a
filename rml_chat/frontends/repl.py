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

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyBindingsBase, merge_key_bindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import create_output
from prompt_toolkit.utils import is_dumb_terminal

from tokenizer import TokenizerError
from tokenizer.chat import ChatFormatError

from .. import text_input
from ..core.attachments import Attachment, message_with
from ..core.conversation import ChatError
from ..core.message import Message
from ..core.session import ChatSession
from ..core.sessions import chat_file, prune_states, release_claim, sessions_dir, size_text, state_worth_it
from ..engines.kv_cache import state_path
from ..errors import STOPPED, AppError, Terminated, one_line
from ..terminal import dim as styled_dim
from ..terminal import known_width, visible
from ..tools import loop as tool_loop
from ..words import counted
from .external_editor import editor_key
from .history import FENCE, BlockHistory, SafeFileHistory, block_closed, history_path
from .own_lines import fit_width, folded
from .progress import EvalProgress
from .repl_commands import Commands
from .reply_display import ReplyDisplay
from .signals import asked, output_closed
from .thought_view import ThoughtView
from .typeahead import Typeahead, take_back

SAVING_NOTE_AFTER_S = 0.3  # a state taking longer than this to write is announced ("saving …")


class _SlashCompleter(Completer):
    def __init__(self, names: list[str]):
        self._names = names

    def get_completions(self, document, complete_event):  # type: ignore[no-untyped-def]
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for name in self._names:
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text))


def _mouse_reports_dropped() -> KeyBindings:
    """Keys that look like a terminal's mouse report are dropped. The chat turns no mouse reporting on, and
    what matches a report is often something else: a colour code such as ``ESC [ 31 m`` pasted without
    bracketed paste reads as one, and prompt_toolkit's own mouse handler then fails with a traceback."""
    kb = KeyBindings()

    @kb.add(Keys.Vt100MouseEvent)
    def _mouse_report(event) -> None:
        pass

    return kb


def _key_bindings() -> KeyBindingsBase:
    kb = KeyBindings()

    @kb.add("escape", "enter")
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    editor = editor_key(lambda note: print(dim(f"note: {visible(note)}"), flush=True))  # (Ctrl-X Ctrl-E)
    return merge_key_bindings([_mouse_reports_dropped(), editor, kb])


def dim(text: str) -> str:
    """A dim line on the terminal (its text made visible: ``terminal.py``)."""
    return styled_dim(text, sys.stdout.isatty())


class Repl:
    """Reads messages and commands, runs turns, prints replies and a stats line after each."""

    def __init__(self, session: ChatSession, *, input=None, output=None, history: Path | None = None,
                 autosave: Path | None = None, sessions_cap: int | None = None, files: Sequence[Attachment] = (),
                 display: ReplyDisplay | None = None):
        self.session = session
        self.files = list(files)  # held for the next message (-f, /file)
        self._pending: list[str] = []  # notes raised while the prompt owns the terminal: printed after it
        self._prompting = False
        store = BlockHistory(SafeFileHistory(history or history_path(), self._say) if history is not False
                             else InMemoryHistory())
        self.history = store
        self.commands = Commands(self)
        if output is None and not sys.stdout.isatty():  # the prompt on the terminal where the replies go to a
            output = create_output(always_prefer_tty=True)  # file or a pipe, as Python's (stderr, if it is one)
        self.dumb = output is None and is_dumb_terminal()  # (prompt_toolkit's plain prompt then: no text redrawn)
        self.prompt = PromptSession(history=store, key_bindings=_key_bindings(), input=input, output=output,
                                    enable_history_search=False, completer=_SlashCompleter(self.commands.names()),
                                    complete_while_typing=False, enable_suspend=True)  # (Ctrl-Z: as in bash)
        self.autosave_path, self.open_elsewhere = chat_file(autosave, session.model.name)
        self._autosave_failed = False
        self.sessions_cap = sessions_cap  # bytes for the sessions folder's states (None: no cap)
        self.typeahead = Typeahead.for_stdin(input is None)
        self.display = display or ReplyDisplay()  # how replies are shown (/set hidethinking, thinking-display, markdown)
        tools = session.options.tools
        if tools is not None:  # nothing runs unasked: each call is put to the user
            from .tools_setup import Consent

            asking = PromptSession(input=input, output=output, key_bindings=_mouse_reports_dropped(),
                                   enable_suspend=True)
            tools.approve = Consent(asking, self._say)  # type: ignore[attr-defined]
            tools.shown = lambda line: self._say(dim(line))  # type: ignore[attr-defined]

    # ----- the loop ----------------------------------------------------------------------

    def run(self) -> int:
        self.typeahead.start()  # keys typed between two prompts wait as bytes (a Ctrl-D too): typeahead.py
        try:
            return self._loop()
        except Terminated:  # SIGTERM, or the terminal closed: the chat saved as on leaving, then the exit code
            self.leave()
            raise
        except BrokenPipeError:  # (stdout's reader went away outside a reply: the same, with exit 141)
            closed = output_closed()
            self.leave()
            raise closed from None
        finally:
            self.typeahead.stop()

    def _loop(self) -> int:
        d = self.session.model.detection
        self._say(fit_width([f"rml-chat · {self.session.model.name}", f"{d.format.name} format"]))
        self._say(dim(fit_width(["/help for commands", "Alt-Enter for a new line", "Ctrl-D to leave"])))
        if self.session.conversation.messages:
            self.show_last_exchange()
        if self.open_elsewhere:
            self._say(dim(f"this chat is open in another rml-chat: this one goes on as a new chat, "
                          f"{self.autosave_path.name} (--sessions lists both)"))
        for attachment in self.files:
            self._say(dim(f"{attachment.path}: held for your first message (/file lists the files, /file --clear "
                          "lets them go)"))
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
            try:
                if self.work(text):
                    return 0
            except KeyboardInterrupt:  # a Ctrl-C just as the work ended (its stats line, the autosave)
                self._say(dim("[stopped by Ctrl-C; the conversation is kept]"))
                self.autosave()

    def work(self, text: str) -> bool:
        """A command or a turn, the keys typed meanwhile held for the next prompt; True: leave now. Once a
        Ctrl-D was typed while busy, every line typed before the REPL leaves is answered first, in order, as
        a shell runs typed-ahead commands (those a prompt had not read yet too), however the keys came."""
        queue, leaving_asked, rest = deque([text]), False, ""
        while queue:
            line = queue.popleft()
            if leaving_asked:
                self.history.keep(line)
                self._say(f"> {visible(line)}" + dim("  (typed ahead)"))
            with self.typeahead:  # keys typed meanwhile wait for the next prompt, unseen
                leaving = self.guarded(partial(self.commands.run, line)) if line.startswith("/") else self.reply(line)
            if leaving:
                self.leave()
                return True
            if self.typeahead.eof or leaving_asked:  # (past a Ctrl-D, every line typed is one to answer)
                if not leaving_asked:
                    self.typeahead.held = take_back(self.typeahead.held, self.prompt.input)
                leaving_asked = True
                queue.extend(self.typeahead.lines)
                rest = self.typeahead.text or rest
        if not leaving_asked:
            self.typeahead.hand_to(self.prompt.input)
            return False
        if rest:
            self.history.keep(rest)
        self._say(dim("(Ctrl-D while busy: leaving now" + ("; what you typed is in the history)" if rest else ")")))
        self.leave()
        return True

    def show_last_exchange(self, lines: int = 6, chars: int = 600) -> None:
        """On --resume: where the chat stopped (its last exchange, each message to a few lines)."""
        messages = self.session.conversation.messages
        self._say(dim(f"resumed: {counted(len(messages), 'message')}; the last exchange:"))
        start = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
        for m in messages[start:]:
            content = m.content.strip()
            shown = content[:chars].split("\n")[:lines]
            rest = len(content) - sum(len(line) + 1 for line in shown) + 1
            if rest > 0:
                shown.append(f"… ({rest} more characters)")
            mark = "> " if m.role == "user" else ""
            self._say(dim("\n".join(mark + line for line in shown) + (" [cut]" if m.cut else "")))

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
        lines = [text.lstrip()[len(FENCE):]]
        self.history.holding = True  # the block's lines: one history entry once it is closed
        try:
            while not block_closed(lines):
                try:
                    lines.append(self._prompt("… ", kept=False))
                except EOFError:  # Ctrl-D inside a block ends the block
                    lines.append(FENCE)
        except (KeyboardInterrupt, Terminated):  # the block so far, the line being typed too: one history entry
            self.history.keep(FENCE + "\n".join([*lines, self.prompt.default_buffer.text]))
            raise
        finally:
            self.history.holding = False
        if len(lines) > 1:  # (a block closed on its first line went to the history as it was)
            self.history.keep(FENCE + "\n".join(lines))
        joined = "\n".join(lines).rstrip()
        return joined[:-len(FENCE)].strip("\n")

    def edited(self, text: str) -> str | None:
        """``text`` at an ``edit>`` prompt to change (Ctrl-X Ctrl-E: in ``$EDITOR``); None when left with
        Ctrl-C or Ctrl-D (a change typed so far is in the history). A dumb terminal shows no text a prompt
        starts with, so there the text is written after the marker."""
        marker = "edit> " + (visible(text) if self.dumb else "")
        try:
            return self._prompt(marker, default=text)
        except (KeyboardInterrupt, EOFError):
            if self.prompt.default_buffer.text.strip() and self.prompt.default_buffer.text != text:
                self._say(dim("(your change is in the history, press Up)"))
            return None

    def _prompt(self, marker: str, default: str = "", kept: bool = True) -> str:
        """A line typed at ``marker``; left with Ctrl-C or ended by a signal, what was typed goes to the history
        (Up brings it back next time), unless ``kept`` is False (a block's line: the block keeps it)."""
        self._prompting = True
        try:
            text = asked(self.prompt, marker, default=default)
        except (KeyboardInterrupt, Terminated):
            typed = self.prompt.default_buffer.text
            if kept and typed.strip() and typed != default:
                self.history.keep(typed)
            raise
        finally:
            self._prompting = False
            for line in self._pending:
                self._say(line)
            self._pending.clear()
        return text_input.from_str(text, "the chat input", warn=lambda line: self._say(f"note: {line}"))

    def reply(self, text: str | None, go_on: bool = False) -> None:
        """A turn for ``text`` (None: regenerate the last reply), with the files held by /file or -f;
        ``go_on``: the last reply continued (``ChatSession.go_on``)."""
        files, self.files = (self.files, []) if text is not None else ([], self.files)  # (held for a message)
        message = message_with("", files, text) if files and text is not None else text
        progress = EvalProgress()
        view = ThoughtView(self.display.mode, self.display.hidden)
        answer = self.display.answer_writer(sys.stdout)

        def emit(chunk: str) -> None:
            if chunk:
                progress.clear()
                if view.open:
                    view.answer()
                answer.write(chunk)

        def notify(line: str) -> None:
            answer.pause()
            self._say(dim(line))

        def think(chunk: str) -> None:
            if chunk:
                progress.clear()
                view.thought(chunk)

        emit, notify, think = _or_closed(emit), _or_closed(notify), _or_closed(think)  # (notify: the reply's pause)

        try:
            if go_on:
                result = tool_loop.go_on(self.session, emit, notify, progress, think=think, ctrl_c_ends_thought=True)
            else:
                result = tool_loop.exchange(self.session, message, emit, notify, progress, think=think,
                                               ctrl_c_ends_thought=True)  # (a second Ctrl-C stops the reply)
        except STOPPED as err:
            progress.clear()
            answer.end()
            if isinstance(err, Terminated):  # (the reply so far is in the conversation, marked cut: run() saves it)
                raise
            if self.session.conversation.unanswered() is not None:
                self._say(dim("[cut during the prompt's evaluation: your message stays, with no reply; /regen "
                              "answers it, or it goes with your next message]"))
            else:
                self._say("\n" + dim("[reply cut by Ctrl-C; the part shown stays in the conversation, and /continue goes on]"))
            self.autosave()
            return
        except Exception as err:  # no error ends the session; the message goes back to the history
            answer.end()
            known = isinstance(err, (AppError, ChatFormatError, TokenizerError, OSError))
            self._say(f"error: {one_line(str(err))}" if known else
                      f"internal error ({type(err).__name__}: {one_line(str(err))}); the conversation is kept")
            if text is not None and self.session.conversation.messages[-1:] == [Message("user", message)]:
                self.session.conversation.drop_last()
                self.prompt.history.append_string(text)
                self.files = files
                self._say(dim("your message was not sent; it is in the history (press Up)" +
                              ("; the files stay held for it (/file lists them)" if files else "")))
            elif self.session.conversation.messages[-1:] and self.session.conversation.messages[-1].cut:
                self._say(dim("[the reply broke off; the part shown stays in the conversation, and /continue goes on]"))
                self.autosave()
            return
        progress.clear()
        if view.open:  # a thought that never closed
            view.close()
        answer.end()
        if result.outcome is not None and result.outcome.problem:
            self._say(f"note: {result.outcome.problem}")
        elif cut := result.cut_note(self.session.engine.n_ctx, repl=True):
            self._say(dim(f"[{cut}]"))
        elif go_on and not any(g.tokens for g in result.generations):
            self._say(dim("[nothing added: the model ended the reply again at once; the reply stays as it was]"))
        self._say(dim(self.stats_line()))
        self.autosave()

    def autosave(self) -> None:
        """Save the conversation after a change; a failure warns once (until saving works again). A chat
        with no message yet is not saved (a /set before the first message): --sessions lists chats."""
        conversation = self.session.conversation
        if not conversation.messages and _unwritten(self.autosave_path):
            return
        conversation.model = str(self.session.model.source.resolve())  # found again from any folder
        try:
            self.autosave_path.parent.mkdir(parents=True, exist_ok=True)
            conversation.save(self.autosave_path)
        except (ChatError, OSError) as err:
            if isinstance(err, OSError):  # (the sessions folder can't be made: a file is there, a read-only place)
                folder = self.autosave_path.parent
                why = "a file, not a folder" if folder.exists() and not folder.is_dir() else err.strerror or err
                err = ChatError(f"the sessions folder {folder}: {why}")
            if not self._autosave_failed:
                self._say(f"note: autosave failed ({one_line(str(err))}); the conversation is still here — "
                          "/save FILE keeps it")
            self._autosave_failed = True
            return
        if self._autosave_failed:
            self._say(dim(f"autosave works again: {self.autosave_path}"))
        self._autosave_failed = False

    def leave(self) -> None:
        """On the way out: the conversation, and llama.cpp's state beside it when it is worth a file
        (``sessions.state_worth_it``), so that --resume starts where this chat stopped without evaluating it
        again; then the sessions folder is brought under its cap (the oldest states go first)."""
        conversation = self.session.conversation
        if not conversation.messages:
            release_claim(self.autosave_path)  # (nothing said: the file claimed at start goes)
            return
        self.autosave()
        if self._autosave_failed:
            return
        kept = self.guarded(self._save_state)
        self._say(dim(f"saved {counted(len(conversation.messages), 'message')}{kept or ''}: rml-chat --resume "
                      f"{conversation.name or ''}".rstrip() + " reopens it"))

    def _save_state(self) -> str:
        """Write the state (announced when it takes more than a moment); what was kept, for the last line."""
        engine, target = self.session.engine, state_path(self.autosave_path)
        cached = len(engine.cached_ids())
        if self.sessions_cap == 0 or not state_worth_it(cached, self.session.eval_rate()):
            target.unlink(missing_ok=True)  # an older state of this chat no longer matches it
            return ""
        started = time.perf_counter()
        announce = threading.Timer(SAVING_NOTE_AFTER_S, lambda: self._say(dim(
            f"saving llama.cpp's state ({counted(cached, 'token')}) …")))
        announce.start()
        try:
            size, why = engine.save_state(target, self.session.model.weights)
        finally:
            announce.cancel()
        if not size:
            return f" (state not saved: {why})"
        if self.sessions_cap is not None and target in prune_states(self.sessions_cap, target):
            return (f" (its state, {size_text(size)}, is over --sessions-max {size_text(self.sessions_cap)}: not "
                    "kept)")
        return f" and llama.cpp's state ({size_text(size)}, {time.perf_counter() - started:.1f} s)"

    def say(self, line: str) -> None:
        """A line for the user (``repl_commands.Host``): held while the prompt is up, as every note is."""
        self._say(line)

    def _say(self, line: str) -> None:
        if self._prompting:
            self._pending.append(line)
            return
        # (our own styling is Styled: kept; anything else made visible; folded at spaces, as a reply is)
        width = known_width(sys.stdout)
        _or_closed(partial(print, flush=True))(folded(visible(line), width) if width else visible(line))

    def stats_line(self) -> str:
        last = self.session.last
        if last is None:
            return "no reply yet"
        g = last.generation
        if g.stop_reason == "interrupted" and not g.first_token_at:
            return (f"cut during the prompt's evaluation: {g.evaluated} of {counted(g.to_evaluate, 'token')} "
                    "evaluated (the cache keeps them; the next turn evaluates the rest)")
        fields = [f"{counted(g.evaluated, 'prompt token')} evaluated",
                  f"TTFT {g.ttft_s * 1000:.0f} ms" if g.first_token_at else "no token yet",
                  f"{counted(len(g.tokens), 'token')}" + (f" ({last.reasoning_tokens} thinking)" if last.reasoning_tokens
                                                         else "") + (f" at {g.tokens_per_s:.1f} tok/s" if g.tokens_per_s else ""),
                  *([f"drafts: {g.accepted}/{g.drafted} accepted ({g.accepted / g.drafted:.0%})"] if g.drafted else []),
                  *([f"drawn on the device: {g.on_device}"] if self.session.options.sampling.backend_sampling
                    and hasattr(self.session.engine, "report") else []),
                  f"context {last.context_used}/{self.session.engine.n_ctx}",
                  f"stop: {g.stop_reason}" + (" (cut)" if g.stop_reason == "interrupted" else "")]
        return fit_width(fields)

    def sessions_note(self) -> str:
        return f"autosave: {self.autosave_path} (rml-chat --resume reopens the newest in {sessions_dir()})"


def _unwritten(path: Path) -> bool:
    """The autosave file is not there, or only claimed (empty): this chat has saved nothing yet."""
    try:
        return path.stat().st_size == 0
    except OSError:
        return True


def _or_closed(write: Callable[[str], None]) -> Callable[[str], None]:
    """``write``, a closed stdout ending the chat as a hangup does (``signals.output_closed``): raised as
    ``Terminated`` inside a turn, the reply so far is kept, marked cut, and the chat saved."""

    def written(text: str) -> None:
        try:
            write(text)
        except BrokenPipeError:
            raise output_closed() from None

    return written
