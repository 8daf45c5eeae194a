"""The app's one boundary for errors: every error is one line and a documented exit code.

Exit codes (``rml-chat --help`` lists them):

| code | name        | when |
|------|-------------|------|
| 0    | ok          | done |
| 1    | error       | a model that can't be loaded, a turn that can't run, a failed ``--check`` |
| 2    | usage       | a flag, a flag value or a combination of flags that is not valid |
| 3    | incomplete  | a reply cut short (``-n`` or a full context) where a complete one was required |
| 130  | interrupted | Ctrl-C |
| 141  | closed      | the output was closed before the reply was written (``rml-chat -p … | head -1``) |

With ``--json`` an error is also a JSON object on stdout: ``{"ok": false, "error": {"kind", "message"}}``.
"""

from __future__ import annotations

import sys

from .terminal import json_text, visible

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_CLOSED = 0, 1, 2, 3, 130, 141
EXIT_CODES = {EXIT_OK: "ok", EXIT_ERROR: "error", EXIT_USAGE: "usage", EXIT_INCOMPLETE: "incomplete",
              EXIT_INTERRUPTED: "interrupted", EXIT_CLOSED: "closed"}


NOT_A_FILE = "not a regular file (a folder, a FIFO or a device)"  # (a path given where a file is read or written)


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
