"""``rml-chat [MODEL]``: the command line. Reads the flags (``flags.py``; ``settings.py`` is the table),
checks how they combine, loads the model, and runs the REPL, a scripted turn (-p / stdin / --json),
--show-prompt, a batch or the smoke test (--check).

``main`` is the one boundary for errors (``errors.py``): whatever goes wrong is one line on stderr and a
documented exit code, and with ``--json`` also a JSON object on stdout; never a traceback (``--verbose``
adds one for an internal error).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

from ..core.paths import names_a_file
from ..errors import (
    EXIT_CLOSED,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    OUTPUT_CLOSED,
    AppError,
    Terminated,
    UsageError,
    report,
)
from ..terminal import utf8_streams, visible
from .flags import api_key, build_parser, text_under_policy
from .signals import detach_stdout, end_on_signals

if TYPE_CHECKING:
    import argparse

    from ..core.session import ChatSession

def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    from ..engines.bindings import llama_version

    return f"rml-chat {of('rml-chat')}, llama-cpp-python {of('llama-cpp-python')}, llama.cpp {llama_version()}"


def _keep_resumed_turn(session: ChatSession, autosave: Path | None) -> None:
    """``--resume … -p``: the turn goes into the chat, in its autosave (a chat /save wrote elsewhere goes on
    in a new one, as in the REPL), and a line on stderr says where."""
    from ..core.conversation import ChatError
    from ..core.sessions import chat_file
    from ..errors import one_line
    from ..words import counted

    conversation = session.conversation
    target, elsewhere = chat_file(autosave, session.model.name)  # (open in a REPL: a new chat, not over its turns)
    conversation.model = str(session.model.source.resolve())
    try:
        conversation.save(target)
    except (ChatError, OSError) as err:
        print(visible(f"rml-chat: note: the turn was not saved ({one_line(str(err))})"), file=sys.stderr)
        return
    saved = "the chat is open in another rml-chat: saved in a new chat" if elsewhere else "saved in the chat"
    resume = "rml-chat --resume" + (f" {conversation.name}" if conversation.name and not elsewhere else "")
    print(visible(f"rml-chat: note: {saved} ({counted(len(conversation.messages), 'message')}, {target}): {resume} "
                  "goes on with it"), file=sys.stderr)


def main(argv: Sequence[str] | None = None, *, free: bool = True) -> int:
    """Run rml-chat; the exit code. ``free`` False leaves llama.cpp's memory to the process's exit."""
    args_given = list(sys.argv[1:] if argv is None else argv)  # (a file name's bytes kept: TEXT_FLAGS)
    as_json = "--json" in args_given
    verbose = "--verbose" in args_given
    phase = ["starting"]  # what an interruption interrupts
    _closed_stderr_to_devnull()
    if sys.stdout is None:  # (>&-)
        return report("stdout is closed: nowhere to write", "closed", EXIT_CLOSED, False)
    utf8_streams()
    end_on_signals()
    try:
        return _main(args_given, phase, free)
    except KeyboardInterrupt:
        doing = " while loading the model" if phase[0] == "loading" else ""
        return report(f"interrupted{doing}", "interrupted", EXIT_INTERRUPTED, as_json)
    except Terminated as err:
        return report(str(err), err.kind, err.exit_code, as_json)
    except BrokenPipeError:
        detach_stdout()
        return report(OUTPUT_CLOSED, "closed", EXIT_CLOSED, False)
    except AppError as err:
        return report(str(err), err.kind, err.exit_code, as_json)
    except Exception as err:  # the last line of defence: still one line, never a traceback
        if _output_failed(err):
            return _output_failed_report(err)
        from tokenizer.chat import ChatFormatError

        if isinstance(err, ChatFormatError):
            return report(str(err), "chat format", 1, as_json)
        if isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:  # (pathlib's exists() raises it)
            name = str(err.filename or "")
            return report(f"{name[:40]}… ({len(name)} characters): a name too long for a path", "input", 1, as_json)
        if verbose:
            traceback.print_exc()
        return report(f"internal error ({type(err).__name__}: {err}); please report it"
                      + ("" if verbose else " (--verbose shows the traceback)"), "internal", 1, as_json)


def _closed_stderr_to_devnull() -> None:
    """``2>&-``: no notes wanted. File descriptor 2 becomes /dev/null, so that neither our notes nor
    llama.cpp's fail on it (a note failing with EBADF ended the run with exit 1), and ``sys.stderr`` is
    never None (``print(file=None)`` would put the notes into the output). A descriptor 2 that can't be
    written counts as closed: a launcher started with it closed (pyenv's shim) may have opened a file of
    its own there, for reading."""
    try:
        writable = (fcntl.fcntl(2, fcntl.F_GETFL) & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    except OSError:
        writable = False
    if not writable:
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            if null != 2:
                os.dup2(null, 2)
                os.close(null)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 (the process's stderr, open to its end)


def _output_failed(err: BaseException) -> TypeGuard[OSError]:
    """A write to stdout that failed for lack of room or a broken device (``> /dev/full``, a full disk):
    every file rml-chat opens itself says its own name when it fails, so an OSError with no file name and
    one of these reasons is the output's."""
    return isinstance(err, OSError) and err.filename is None and err.errno in _OUTPUT_ERRNOS


_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _output_failed_report(err: OSError) -> int:
    return report(f"can't write to stdout ({err.strerror})", "output", EXIT_ERROR, False)


def _cap_from_environment(parse, text: str) -> int:
    try:
        return parse(text)
    except ValueError as err:
        raise UsageError(f"$RML_CHAT_SESSIONS_MAX must be {err}") from None


def run() -> None:
    """The ``rml-chat`` program: ``main``, then an exit that leaves the memory to the OS. Freeing llama.cpp's
    model and our tokenizer's tables one by one, as the interpreter's own exit would, costs time after the
    last word (docs/performance.md); everything we wrote is flushed first (files are closed as they are written)."""
    code = main(free=False)
    if (mcp_tools := sys.modules.get("rml_chat.tools.mcp_tools")) is not None:  # (never imported for it)
        mcp_tools.end_all()  # the MCP servers and the processes they started end with us
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        detach_stdout()
        if code != EXIT_CLOSED:  # (main said so already when a write failed)
            code = report(OUTPUT_CLOSED, "closed", EXIT_CLOSED, False)
    except OSError as err:
        if _output_failed(err) and code == EXIT_OK:
            code = _output_failed_report(err)
    except ValueError:
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def _inline_or_file(inline: str | None, path: str | None, both: str) -> str | None:
    """A value given inline, or by the flag's file twin of llama.cpp's (``-jf``, ``-sysf``) as ``@PATH``, read
    where an inline ``@FILE`` is read; both given: ``both``, a usage line."""
    if path is None:
        return inline
    if inline is not None:
        raise UsageError(both)
    return "@" + path


def _words_after_the_model(args: argparse.Namespace) -> list[str]:
    """ollama's ``ollama run MODEL why is the sky blue``: the words after MODEL (all of them, where -m or -hf
    names the model) are a one-turn prompt, as -p's. None of them may name a file: that is a second model,
    a mistake to say (``rml-chat a.gguf b.gguf``)."""
    words = args.model if args.model_flag or args.hf_repo else args.model[1:]
    if any(names_a_file(word) or word.lower().endswith(".gguf") for word in words):
        return []
    return words


def _main(argv: list[str], phase: list[str], free: bool) -> int:
    args = build_parser(full_help=bool({"-h", "--help"} & set(argv))).parse_args(argv)
    text_under_policy(args)
    words = [] if args.check else _words_after_the_model(args)
    if words and args.prompt is not None:
        raise UsageError(f"a prompt twice: -p TEXT and the words after the model ({' '.join(words)!r})")
    if words:
        args.prompt, args.model = " ".join(words), args.model[:len(args.model) - len(words)]
    args.models = [*args.model, *args.model_flag]  # (MODEL or llama.cpp's -m MODEL: one list)
    args.model = args.models[0] if args.models else None
    if len(args.models) > 1 and not args.check:
        raise UsageError(f"one MODEL at a time, not {len(args.models)} (--check takes several; words after the model "
                         "that name no file are its prompt, as in ollama run MODEL PROMPT)")
    if (args.strict or args.no_reply or args.junit) and not args.check:
        raise UsageError("--strict, --no-reply and --junit go with --check")
    if args.version:
        print(versions())
        return 0
    if args.sessions or args.delete_session is not None:
        from .sessions_list import run_sessions

        return run_sessions(args)
    if args.list_models:
        from .models_list import run_models_list

        return run_models_list(args.json)
    if sys.stdin is None and args.prompt is None and not args.check and args.batch in (None, "-"):
        raise AppError("stdin is closed: give -p TEXT or --batch FILE, or run rml-chat on a terminal", "input")
    scripted = args.prompt is not None or sys.stdin is None or not sys.stdin.isatty() or args.batch is not None
    args.json_schema = _inline_or_file(args.json_schema, args.json_schema_file, "-j and -jf: one schema, inline or "
                                                                                 "from a file")
    if args.ollama_format is not None:  # (ollama's --format json|SCHEMA)
        if args.json_schema is not None:
            raise UsageError("--format and -j: one schema")
        if args.ollama_format != "json" and not args.ollama_format.lstrip().startswith("{"):
            raise UsageError(f"--format: json or a JSON schema, not {args.ollama_format!r}")
        args.json_schema = "{}" if args.ollama_format == "json" else args.ollama_format
    shapes = [flag for flag, value in (("--json-schema", args.json_schema), ("--grammar", args.grammar),
                                       ("--grammar-file", args.grammar_file)) if value is not None]
    if len(shapes) > 1:
        raise UsageError(f"{' and '.join(shapes)}: one constraint at a time")
    if shapes and shapes[0] != "--json-schema" and (args.functions or args.mcp) and args.tool_choice != "none":
        raise UsageError(f"{shapes[0]} and tools: the grammar leaves the model no way to call them, and llama.cpp "
                         "refuses the two together (--tool-choice none keeps the tools out of the reply)")
    if args.batch is not None and (args.prompt is not None or args.show_prompt or args.resume or args.check):
        raise UsageError("--batch runs the file's prompts; drop -p, --show-prompt, --resume and --check")
    if (args.json or args.show_prompt) and not (scripted or args.check):
        flag = "--json" if args.json else "--show-prompt"
        raise UsageError(f"{flag} needs -p TEXT or text on stdin" + (" (or --check)" if args.json else ""))
    if args.prefill is not None and (not scripted or args.batch is not None or args.check):
        raise UsageError("--prefill starts the reply of -p TEXT or of text on stdin (in the chat, /continue goes on "
                         "with a reply)")
    if args.system_file is not None:  # (-sys TEXT is the text as given, @ or not: only -sysf reads a file)
        from ..core.structured import text_or_file

        text = text_or_file(_inline_or_file(args.system, args.system_file, "-sys and -sysf: one system message, "
                                                                            "from the flag or from a file"), "-sysf")
        args.system = text[:-1] if text.endswith("\n") else text
    if args.check and (args.prompt is not None or args.show_prompt or args.system is not None or args.resume):
        raise UsageError("--check runs its own conversation; drop -p, -sys, --show-prompt and --resume")
    if args.server is not None:
        from ..engines.server import server_url

        args.server = server_url(args.server)
    args.api_key = api_key(args)
    from .launch import open_session, prompt_cache_for, speculation_of

    if (contradiction := speculation_of(args).contradiction()) is not None:
        raise UsageError(contradiction)
    if args.files and (args.check or args.batch is not None):
        raise UsageError(f"--file adds to the message of -p, stdin or the chat, not to {'--check' if args.check else '--batch'}")
    from ..core.attachments import read_attachment

    args.attachments = [read_attachment(path, pipes=True) for path in args.files]  # (a bad file is one line before the load)

    def say(line: str) -> None:
        if not (args.json or scripted) or args.verbose or line.startswith(("note:", "warning:")):
            print(visible(line), file=sys.stderr, flush=True)

    cap = None
    if not scripted and not args.check:  # the REPL's: a bad $RML_CHAT_SESSIONS_MAX is said before the load
        from ..core.sessions import default_cap, parse_size

        cap = args.sessions_max if args.sessions_max is not None else _cap_from_environment(parse_size, default_cap())
    phase[0] = "loading"
    if args.hf_repo or args.hf_file or any(not names_a_file(m) for m in args.models):
        from .models_list import name_the_models

        name_the_models(args, say)
    if args.check:
        from .check import run_check

        return run_check(args, say)

    opened = open_session(args, say)
    session = opened.session
    phase[0] = "running"
    if args.batch is not None or (scripted and not args.show_prompt):
        prompt_cache_for(args, session.engine)
    try:
        if args.batch is not None:
            from .batch import run_batch

            return run_batch(session, args)
        if scripted:
            from .scripted import run_scripted

            code = run_scripted(session, args, opened.display)
            if args.resume is not None and not args.show_prompt:
                _keep_resumed_turn(session, opened.autosave)
            return code
        from .repl import Repl

        return Repl(session, display=opened.display, autosave=opened.autosave, sessions_cap=cap,
                    files=args.attachments).run()
    finally:
        why = session.engine.keep_prompt()  # (nothing where the prompt cache is off or not worth it)
        if why and args.verbose:
            print(visible(f"rml-chat: {why}"), file=sys.stderr)
        if free:
            session.engine.close()


if __name__ == "__main__":
    run()
