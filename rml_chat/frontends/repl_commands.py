"""The REPL's slash commands, as a table: name, what it takes, what it does.

Each returns True to leave the REPL. Settings go through the same table as the command line
(``settings.py``), so ``/set top-p 5`` is refused with the same sentence as ``--top-p 5``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..core.attachments import Attachment, read_attachment
from ..core.conversation import ChatError, Conversation, window_note
from ..core.paths import names_a_file, typed_path, user_path
from ..core.sampling_sources import set_by
from ..core.session import ChatSession
from ..core.sessions import name_problem
from ..core.settings import BY_NAME, SETTINGS, SettingError, settable
from ..core.structured import check, from_grammar, from_schema
from ..engines.kv_cache import state_path
from ..engines.sampler_chain import describe, stages
from ..errors import NOT_A_FILE
from ..text_input import whole_number
from ..words import counted
from .other_commands import LOAD_MODEL, as_ours
from .prompt_view import marked_prompt
from .reply_display import SETTINGS as DISPLAYED
from .transcript import OSC52_LIMIT, as_markdown, code_blocks, osc52

KEYS = (("Enter", "send the message"), ("Alt-Enter", "a new line in the message"),
        ('"""', 'a message from """ to a line ending with """'), ("paste", "a pasted text is one message"),
        ("Up / Down", "earlier messages"), ("Tab", "complete a /command"), ("Ctrl-C", "stop the reply (the part "
        "shown stays); during a thought, end the thought (the model answers), again to stop; at the prompt, keep "
        "the line in the history"), ("Ctrl-Z", "stop rml-chat, as any program in the shell (fg: back, with what "
        "was typed)"), ("Ctrl-D", "leave"))


class Host(Protocol):
    """What the commands need of the REPL that runs them (``repl.Repl`` is one): this narrow interface, so
    that the commands never import the REPL."""

    session: ChatSession
    files: list[Attachment]  # held for the next message

    def say(self, line: str) -> None:
        """Show a line (held while the user is typing)."""

    def autosave(self) -> None:
        """Save the conversation after it changed."""

    def reply(self, text: str | None, go_on: bool = False) -> None:
        """Run a turn (None: regenerate the last reply; ``go_on``: continue it)."""

    def edited(self, text: str) -> str | None:
        """``text`` changed by the user at a prompt (None: left unchanged)."""

    def sessions_note(self) -> str:
        """Where the conversation is autosaved, for /info."""

    def stats_line(self) -> str:
        """The last turn's figures, for /stats."""


class Commands:
    def __init__(self, repl: Host):
        self.repl = repl
        self.table: dict[str, tuple[Callable[[str], bool | None], str]] = {
            "/help": (self._help, "this list, and the keys"),
            "/system": (self._system, "[TEXT | --clear]  show, set or remove the system message"),
            "/clear": (self._clear, "start over (the system message stays)"),
            "/undo": (self._undo, "drop the last exchange"),
            "/regen": (self._regen, "generate the last reply again"),
            "/continue": (self._continue, "go on with the last reply (one cut by -n, Ctrl-C or a full context)"),
            "/edit": (self._edit, "[N]  edit your message N (as /history numbers them; default: your last) and "
                                  "answer it again; the old path stays, as a branch"),
            "/branches": (self._branches, "the paths /edit left, and where each parts from this one"),
            "/branch": (self._branch, "K  go to branch K (the path you leave becomes a branch)"),
            "/save": (self._save, "FILE  save the conversation as JSON"),
            "/load": (self._load, "FILE  load a conversation saved with /save (or an autosave)"),
            "/prompt": (self._prompt, "the prompt the model sees next, special tokens marked"),
            "/history": (self._history, "every message of the chat, one line each, and where the model's window "
                                        "starts"),
            "/name": (self._name, "TEXT  name this chat: rml-chat --resume TEXT reopens it"),
            "/info": (self._info, "model, chat format, stop ids, settings, the autosave file"),
            "/stats": (self._stats, "figures of the last reply"),
            "/thought": (self._thought, "the last reply's thought, whole"),
            "/raw": (self._raw, "the last reply as the model wrote it (no Markdown drawn)"),
            "/copy": (self._copy, "[N]  the last reply, or its Nth code block, to the clipboard (the terminal's OSC 52)"),
            "/export": (self._export, "FILE.md [--force]  the chat as Markdown (thoughts folded, calls as JSON); "
                                      "--force replaces a file that exists"),
            "/set": (self._set, "[NAME VALUE]  change a setting; alone: list them"),
            "/schema": (self._schema, "JSON|@FILE|off  replies are JSON following this schema"),
            "/grammar": (self._grammar, "GBNF|@FILE|off  replies follow this GBNF grammar"),
            "/file": (self._file, "[PATH | --clear]  add a text file to your next message; alone: the files held"),
            "/tools": (self._tools, "[on|off NAME|all]  the tools the model may call (--functions, --mcp), on or off"),
            "/exit": (lambda _: True, "leave (or Ctrl-D)"),
        }

    def names(self) -> list[str]:
        return [*self.table, "/quit"]

    def run(self, line: str) -> bool:
        theirs = as_ours(line)  # (ollama's /bye, llama-cli's /read …)
        if theirs is not None:
            if theirs.note:
                self.say(theirs.note)
            if theirs.line is None:
                return False
            line = theirs.line
        name, _, rest = line.strip().partition(" ")
        entry = self.table.get("/exit" if name == "/quit" else name)
        if entry is None:
            self.say(f"unknown command {name}; /help lists them")
            return False
        return bool(entry[0](rest.strip()))

    @property
    def session(self) -> ChatSession:
        return self.repl.session

    def say(self, line: str) -> None:
        self.repl.say(line)

    def _changed(self) -> None:
        self.repl.autosave()

    # ----- the commands ------------------------------------------------------------------

    def _help(self, _: str) -> None:
        for name, (_, text) in self.table.items():
            self.say(f"  {name:8} {text}")
        self.say("  (ollama's and llama-cli's commands work too: /bye, /set parameter NAME VALUE, /show info, "
                 "/read FILE …)")
        self.say("keys:")
        for key, text in KEYS:
            self.say(f"  {key:10} {text}")

    def _system(self, text: str) -> None:
        conversation = self.session.conversation
        if not text:
            self.say(f"system message: {conversation.system!r}" if conversation.system else self._no_system())
            return
        conversation.system = None if text == "--clear" else text
        self.say(("system message removed" if text == "--clear" else "system message set") + self._cost())
        self._changed()

    def _no_system(self) -> str:
        fmt = self.session.model.detection.format
        default = getattr(fmt, "default_system", None)
        if default:
            return f"no system message of yours: the template writes its default one, {default!r} (/system TEXT " \
                   "replaces it)"
        if default is None and not hasattr(fmt, "default_system"):
            return "no system message of yours (/system TEXT sets one; /prompt shows whether the template writes one)"
        return "no system message (/system TEXT sets one)"

    def _clear(self, _: str) -> None:
        self.session.conversation.clear()
        self.say("conversation cleared")
        self._changed()

    def _undo(self, _: str) -> None:
        self.say("last exchange dropped" if self.session.conversation.undo() else "nothing to undo")
        self._changed()

    def _regen(self, _: str) -> None:
        messages = self.session.conversation.messages
        if not messages:
            self.say("no reply to generate again")
            return
        if messages[-1].role == "assistant":
            self.session.conversation.drop_last()
        self.repl.reply(None)  # or the first reply to a message whose evaluation was cut

    def _continue(self, _: str) -> None:
        messages = self.session.conversation.messages
        if not messages or messages[-1].role != "assistant":
            self.say("no reply to continue: the last message is not the model's (/regen answers a message)")
            return
        self.repl.reply(None, go_on=True)

    def _edit(self, rest: str) -> None:
        conversation = self.session.conversation
        messages = conversation.messages
        yours = [i for i, m in enumerate(messages) if m.role == "user"]
        if not yours:
            self.say("/edit: no message of yours yet")
            return
        number = whole_number(rest)
        if rest and not (number is not None and number - 1 in yours):
            self.say(f"/edit N: N is one of your messages as /history numbers them ({', '.join(str(i + 1) for i in yours)})")
            return
        at = number - 1 if number is not None else yours[-1]
        text = self.repl.edited(messages[at].content)
        if text is None:
            self.say("/edit: left; nothing generated")
            return
        if not text.strip() or text == messages[at].content:
            self.say("/edit: unchanged; nothing generated")
            return
        conversation.fork(at)
        self.say(f"the path before this edit is branch {len(conversation.branches)} (/branches lists them)")
        self.repl.reply(text)

    def _branches(self, _: str) -> None:
        conversation = self.session.conversation
        if not conversation.branches:
            self.say("no branches yet (/edit makes one)")
            return
        self.say(f"  this path: {counted(len(conversation.messages), 'message')}")
        for number, parted, first in conversation.branch_list():
            size = counted(len(conversation.branches[number - 1]), "message")
            shown = first if len(first) <= 60 else first[:59] + "…"
            self.say(f"{number:>3}  {size}, parts from this one at message {parted + 1}: {shown}")

    def _branch(self, rest: str) -> None:
        conversation = self.session.conversation
        count = len(conversation.branches)
        number = whole_number(rest)
        if number is None or not 1 <= number <= count:
            self.say(f"/branch K: K is a branch's number (1 to {count}; /branches lists them)" if count else
                     "/branch: no branches yet (/edit makes one)")
            return
        parted = conversation.switch(number)
        self._changed()
        self.say(f"on branch {rest}'s path ({counted(len(conversation.messages), 'message')}); the one you left is "
                 f"branch {rest}. The next turn evaluates it again from message {parted + 1} on (llama.cpp's cache "
                 "holds the other path from there)")

    def _save(self, path: str) -> None:
        path = typed_path(path)
        if not path:
            self.say("usage: /save FILE")
            return
        target = user_path(path)
        self.session.conversation.save(target)
        note = ""
        try:
            size, why = self.session.engine.save_state(state_path(target), self.session.model.weights)
            note = f", and llama.cpp's state ({size / 1e6:.1f} MB) beside it" if size else f" (state not saved: {why})"
        except OSError as err:
            note = f" (llama.cpp's state could not be written: {err.strerror}; a reload will evaluate it again)"
        self.say(f"saved {counted(len(self.session.conversation.messages), 'message')} to {path}{note}")

    def _load(self, path: str) -> None:
        path = typed_path(path)
        if not path:
            self.say("usage: /load FILE")
            return
        source = user_path(path)
        try:
            loaded = Conversation.load(source)
        except ChatError as err:
            if names_a_file(path):
                raise
            raise ChatError(f"{err} (/load reads a chat saved with /save; {LOAD_MODEL})") from None
        self.session.conversation = loaded
        restored, why = self.session.restore_state(state_path(source))
        if restored:
            note = f"; llama.cpp's state restored ({counted(restored, 'token')})" + (self._cost() or
                                                                                  ": nothing to evaluate again")
        else:
            note = f"; {why}" + self._cost()
        self.say(f"loaded {counted(len(loaded.messages), 'message')} from {path}{note}")
        self._changed()

    def _cost(self) -> str:
        """What the change costs the next turn in evaluation, when it costs anything."""
        again = self.session.reevaluation()
        return f" (the next turn evaluates {counted(again, 'token')} again)" if again else ""

    def _schema(self, text: str) -> None:
        self._constrain(text, lambda value: from_schema(value, "/schema"))

    def _grammar(self, text: str) -> None:
        self._constrain(text, lambda value: from_grammar(value, "/grammar"))

    def _constrain(self, text: str, make) -> None:  # type: ignore[no-untyped-def]
        if not text:
            current = self.session.options.constraint
            self.say(f"replies follow {current.describe()}" if current else "replies are free text")
            return
        if text == "off":
            self.session.options.constraint = None
            self.say("replies are free text again")
            return
        constraint = make(text)
        check(constraint, self.session.engine)
        self.session.options.constraint = constraint
        command = "/schema" if constraint.schema is not None else "/grammar"  # (a schema may be {}: any JSON)
        self.say(f"replies follow {constraint.describe()} now ({command} off to stop)")

    def _file(self, arg: str) -> None:
        held = self.repl.files
        if arg == "--clear":
            self.repl.files = []
            self.repl.say(f"{counted(len(held), 'file')} let go")
            return
        if path := typed_path(arg):  # (a path dragged into the terminal comes quoted, or escaped)
            attachment = read_attachment(path, "/file")
            tokens = len(self.repl.session.model.tokenizer.encode(attachment.block))
            held.append(attachment)
            room = self.repl.session.engine.n_ctx - self.repl.session.reply_room()
            self.repl.say(f"{path}: {counted(tokens, 'token')}, held for your next message" +
                          (f" — more than the {room} a message can have in this context" if tokens > room else ""))
            return
        if not held:
            self.repl.say("no files held (/file PATH adds one to your next message)")
        for attachment in held:
            self.repl.say(f"{attachment.path}: {counted(len(attachment.text), 'character')}")

    def _tools(self, rest: str) -> None:
        box = self.repl.session.options.tools
        if box is None:
            self.say("no tools: start with --functions FILE.py or --mcp \"COMMAND\" to give the model some")
            return
        action, _, name = rest.strip().partition(" ")
        if action in ("on", "off") and name.strip():
            why = box.switch(name.strip(), action == "on")
            self.say(f"error: {why}" if why else f"{name.strip()}: {action}")
            return
        if action:
            self.say("usage: /tools, /tools on NAME, /tools off NAME (or all)")
            return
        for line in box.listing():
            self.say(line)

    def _prompt(self, _: str) -> None:
        ids = self.session.prompt_ids()
        self.say(marked_prompt(self.session.model.tokenizer, ids, sys.stdout.isatty()))
        self.say(f"({counted(len(ids), 'token')}{window_note(self.session.conversation)})")

    def _history(self, _: str) -> None:
        conversation = self.session.conversation
        if not conversation.messages:
            self.say("no message yet")
            return
        for i, message in enumerate(conversation.messages):
            if i == conversation.window_start and i:
                self.say(f"      ── the model's window starts here ({counted(i, 'message')} above are out of it) ──")
            lines = message.content.strip().split("\n")
            first = lines[0] if len(lines[0]) <= 72 else lines[0][:71] + "…"
            more = f" (+{counted(len(lines) - 1, 'line')})" if len(lines) > 1 else ""
            self.say(f"{i + 1:>5} {message.role:9} {first}{more}{' [cut]' if message.cut else ''}")

    def _name(self, text: str) -> None:
        conversation = self.session.conversation
        if not text:
            self.say(f"this chat is named {conversation.name!r}" if conversation.name else
                     "this chat has no name (/name TEXT gives it one)")
            return
        problem = name_problem(text)
        if problem:
            self.say(f"/name: {problem}")
            return
        conversation.name = text
        self._changed()
        self.say(f"this chat is named {text!r}: rml-chat --resume {text!r} reopens it")

    def _info(self, _: str) -> None:
        for line in self.session.model.describe():
            self.say(line)
        engine = self.session.engine
        self.say(f"context: {engine.n_ctx} tokens · overflow: {self.session.options.context.overflow} · "
                 f"threads: {engine.threads} · layers: {engine.placement}"
                 + (f" · flash attention: {engine.flash_attn}" if getattr(engine, "flash_attn", "") else ""))
        self.say("settings: " + " ".join(f"{name}={value}" for name, value in self._settings()))
        options = self.session.options
        self.say(f"sampler chain: {describe(stages(options.sampling, stop_ids=self.session.model.stop_ids))}")
        self.say(f"sampling set by: {set_by(options.sampling_sources)}")
        self.say(self.repl.sessions_note())

    def _stats(self, _: str) -> None:
        self.say(self.repl.stats_line())

    def _thought(self, _: str) -> None:
        replies = [m for m in self.session.conversation.messages if m.role == "assistant"]
        thought = (replies[-1].reasoning or "").strip() if replies else ""
        self.say(thought or ("the last reply has no thought" if replies else "no reply yet"))

    def _raw(self, _: str) -> None:
        reply = self._last_reply()
        self.say("no reply yet" if reply is None else reply.rstrip("\n"))  # (made visible, never drawn)

    def _last_reply(self) -> str | None:
        replies = [m for m in self.session.conversation.messages if m.role == "assistant"]
        return replies[-1].content if replies else None

    def _copy(self, rest: str) -> None:
        reply = self._last_reply()
        if reply is None:
            self.say("/copy: no reply yet")
            return
        what, text = "the last reply", reply
        if rest.strip():
            blocks = code_blocks(reply)
            number = whole_number(rest.strip())
            if number is None or not 1 <= number <= len(blocks):
                self.say(f"/copy N: N counts the last reply's code blocks (it has {len(blocks)})" if blocks else
                         "/copy N: the last reply has no code block; /copy alone copies the reply")
                return
            what, text = f"code block {number} of the last reply", blocks[number - 1]
        sequence = osc52(text, tmux=bool(os.environ.get("TMUX")))
        if len(sequence) > OSC52_LIMIT:
            self.say(f"/copy: {what} is too long for a terminal's clipboard ({counted(len(text), 'character')}); "
                     "/export FILE.md writes it out")
            return
        sys.stdout.write(sequence)
        sys.stdout.flush()
        self.say(f"copied {what} ({counted(len(text), 'character')}) with OSC 52; a terminal may ignore it "
                 "(xterm: allowWindowOps; tmux: set-clipboard on)")

    def _export(self, rest: str) -> None:
        path, force = rest.strip(), False
        if path.endswith(" --force"):
            path, force = path[:-len(" --force")].strip(), True
        path = typed_path(path)
        if not path:
            self.say("usage: /export FILE.md [--force]")
            return
        conversation = self.session.conversation
        title = conversation.name or f"Chat with {self.session.model.name}"
        text = as_markdown(conversation.system, conversation.messages, title)
        target = user_path(path)
        if target.is_symlink():  # (the link stays; the file it names is written, as /save writes one)
            target = Path(os.path.realpath(target))
        if target.exists() and not target.is_file():  # (a FIFO would block the chat; a device, a folder: no)
            self.say(f"/export: {path} is {NOT_A_FILE}; give a file's path")
            return
        if target.exists() and not force:
            self.say(f"/export: {path} exists; /export {path} --force replaces it")
            return
        part = target.with_name(f".{target.name}.part")
        try:
            part.write_text(text, encoding="utf-8", errors="surrogatepass")
            os.replace(part, target)  # (whole or not at all: an export cut by a full disk leaves the old file)
        except OSError as err:
            part.unlink(missing_ok=True)
            self.say(f"/export: {path}: {err.strerror or err}")
            return
        self.say(f"exported {counted(len(conversation.messages), 'message')} to {path} as Markdown")

    def _settings(self) -> list[tuple[str, object]]:
        display = self.repl.display
        return [(row.name.replace("_", "-"), display.setting(row.name) if row.name in DISPLAYED else
                 self.session.setting(row.name)) for row in SETTINGS if row.settable]

    def _set(self, rest: str) -> None:
        name, _, value = rest.partition(" ")
        if not name:
            self.say("settings: " + " ".join(f"{n}={v}" for n, v in self._settings()) + " (/set NAME VALUE)")
            return
        row = settable(name)
        if row is None:
            fixed = BY_NAME.get(name.lstrip("-").replace("-", "_"))
            names = ", ".join(n for n, _ in self._settings())
            resume = " ".join(filter(None, ["rml-chat --resume", self.session.conversation.name, fixed.flag,
                                            value.strip() or "VALUE"])) if fixed else ""
            self.say(f"{fixed.flag} is set when rml-chat starts: leave, then {resume}; /set changes {names}" if fixed else
                     f"unknown setting {name!r}; /set changes {names}")
            return
        if not value.strip():
            self.say(f"usage: /set {name} VALUE, {row.parse.allowed}")  # type: ignore[attr-defined]
            return
        try:
            parsed = row.check(value.strip(), flag=row.name.replace("_", "-"))
        except SettingError as err:
            self.say(f"error: {err}")
            return
        problem = "" if row.name in DISPLAYED else self.session.apply(row.name, parsed)
        if row.name in DISPLAYED:
            self.repl.display.apply(row.name, parsed)
        if problem:
            self.say(problem)
            return
        self.session.conversation.settings[row.name] = value.strip()  # --resume brings it back
        self._changed()
        self.say(f"{row.name.replace('_', '-')} = {parsed}")
