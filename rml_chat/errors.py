"""The app's one boundary for errors: every error is one line and a documented exit code.

Exit codes (``rml-chat --help`` lists them):

| code | name        | when |
|------|-------------|------|
| 0    | ok          | done |
| 1    | error       | a model that can't be loaded, a turn that can't run, a failed ``--check`` |
| 2    | usage       | a flag, a flag value or a combination of flags that is not valid |
| 3    | incomplete  | a reply cut short (``-n`` or a full context) where a complete one was required |
| 129  | hangup      | the terminal closed (SIGHUP); the chat is saved first |
| 130  | interrupted | Ctrl-C |
| 141  | closed      | the output was closed before the reply was written (``rml-chat -p … | head -1``); a chat is saved first |
| 143  | terminated  | SIGTERM (``kill``, ``timeout``); the chat is saved first |

With ``--json`` an error is also a JSON object on stdout: ``{"ok": false, "error": {"kind", "message"}}``.
"""

from __future__ import annotations

import signal
import sys

from .terminal import json_text, visible

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_CLOSED = 0, 1, 2, 3, 130, 141
EXIT_HANGUP, EXIT_TERMINATED = 128 + signal.SIGHUP, 128 + signal.SIGTERM
EXIT_CODES = {EXIT_OK: "ok", EXIT_ERROR: "error", EXIT_USAGE: "usage", EXIT_INCOMPLETE: "incomplete",
              EXIT_HANGUP: "hangup", EXIT_INTERRUPTED: "interrupted", EXIT_CLOSED: "closed",
              EXIT_TERMINATED: "terminated"}


NOT_A_FILE = "not a regular file (a folder, a FIFO or a device)"  # (a path given where a file is read or written)


OUTPUT_CLOSED = "the output was closed before everything was written"


class Terminated(SystemExit):
    """SIGTERM, SIGHUP (the terminal closed), or SIGPIPE (in the chat, the output closed): the run ends,
    keeping what it has as after a Ctrl-C (the reply so far, marked cut; the message being answered), then
    saving it. Not a KeyboardInterrupt: where a Ctrl-C only stops the work at hand and the session goes on
    (a thought, a tool call, a question at the prompt), this goes past. ``STOPPED`` catches both where the
    work so far is kept.

    A ``SystemExit``, as a program's end is in Python: asyncio lets only that and KeyboardInterrupt out of
    a callback. Raised in one of prompt_toolkit's (a signal lands wherever the main thread is), any other
    exception went to its "Press ENTER to continue", which, on a terminal that is gone, looped and took
    memory without end."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        self.kind = EXIT_CODES.get(self.exit_code, "terminated")
        super().__init__("the terminal closed (SIGHUP)" if signum == signal.SIGHUP else
                         OUTPUT_CLOSED if signum == signal.SIGPIPE else f"terminated ({signal.Signals(signum).name})")


STOPPED = (KeyboardInterrupt, Terminated)  # what stops a run, where what was done so far is kept


def how_stopped(err: BaseException) -> tuple[str, int]:
    """What stopped a run (one of ``STOPPED``), in words, and its exit code::

        >>> how_stopped(KeyboardInterrupt()), how_stopped(Terminated(signal.SIGTERM))
        (('interrupted', 130), ('terminated (SIGTERM)', 143))
    """
    return (str(err), err.exit_code) if isinstance(err, Terminated) else ("interrupted", EXIT_INTERRUPTED)


class AppError(Exception):
    """An error for the user: one line. ``kind`` names what failed (model, chat, input, usage …)."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, kind: str = "error", exit_code: int | None = None):
        super().__init__(message)
        self.kind = kind
        if exit_code is not None:
            self.exit_code = exit_code


class ModelError(AppError):
    """A model that can't be found or loaded; the message is one line for the user."""

    def __init__(self, message: str, unsupported: bool = False):
        super().__init__(message, "model")
        self.unsupported = unsupported  # well-formed, but a tokenizer kind rml-chat does not implement (BERT's)


class UsageError(AppError):
    exit_code = EXIT_USAGE

    def __init__(self, message: str):
        super().__init__(message, "usage")


def one_line(text: str) -> str:
    """Newlines and tabs shown as escapes, so a message stays one line whatever it quotes."""
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")


def report(message: str, kind: str, code: int, as_json: bool) -> int:
    """Print one error line on stderr (and, with ``as_json``, the JSON object on stdout); return ``code``."""
    message = one_line(message)
    hint = " (rml-chat --help lists the flags)" if code == EXIT_USAGE else ""
    line = f"rml-chat: {message}" if message.startswith(kind) else f"rml-chat: {kind}: {message}{hint}"
    try:
        print(visible(line), file=sys.stderr, flush=True)
        if as_json:
            print(json_text({"ok": False, "error": {"kind": kind, "message": message}, "exit_code": code}), flush=True)
    except (BrokenPipeError, OSError):
        pass
    return code
