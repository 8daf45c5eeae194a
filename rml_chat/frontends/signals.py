"""SIGTERM (``kill``, ``timeout``, a logout) and SIGHUP (the terminal window closed) end a run as Ctrl-C
ends a turn: each raises ``errors.Terminated`` in the main thread, so the reply so far is kept, marked
cut, and the front end saves what it holds (the REPL: the chat and llama.cpp's state, as on leaving)
before the exit code, 128 + the signal's number. Without this, either signal ended the process at once
and the chat's last exchange was lost. At a prompt (``asked``), the signal ends the prompt from
prompt_toolkit's own event loop, as Ctrl-D does, and the same ``Terminated`` comes out of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
from typing import TYPE_CHECKING, Any

from ..errors import Terminated

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession


SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def end_on_signals() -> None:
    """SIGTERM and SIGHUP raise ``Terminated`` in the main thread; the first one only: the save that
    follows is not cut by a second (SIGKILL still ends everything)."""
    for number in SIGNALS:
        try:
            signal.signal(number, _end)
        except (ValueError, OSError):  # (not the main thread: an embedding caller's own handling stays)
            return


def _end(signum: int, _frame: object) -> None:
    _ending(signum)
    raise Terminated(signum)


def _ending(signum: int) -> None:
    """What the first of the signals does before the run ends: a second is ignored, and after a hangup
    nothing is written to the terminal that is gone."""
    for number in SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    if signum == signal.SIGHUP:
        _terminal_gone()


def asked(session: PromptSession, message: str, **options: Any) -> str:
    """``session.prompt(message, **options)``, ended by SIGTERM or SIGHUP from its own event loop: the
    prompt leaves as Ctrl-D leaves it, raising ``Terminated``. Raised from the signal's handler instead,
    wherever the main thread was (often inside one of asyncio's callbacks), it left prompt_toolkit's loop
    half-way, and asyncio, cancelling the loop's tasks on the way out, could wait on them for ever: a
    closed terminal left one run in eight or so hanging at the prompt.

        signal before the prompt's loop runs    recorded; the loop, once running, ends at once
        signal while it runs                    app.exit(exception=Terminated), from a callback of its own
        signal while it closes (Enter pressed)  recorded; Terminated raised once the prompt has returned
    """
    if signal.getsignal(signal.SIGTERM) is not _end:  # (an embedding caller's handling: left as it is)
        return session.prompt(message, **options)
    app, ended = session.app, []

    def leave() -> None:
        if ended and app.future is not None and not app.future.done():
            app.exit(exception=Terminated(ended[0]))

    def on_signal(signum: int, _frame: object) -> None:
        _ending(signum)
        ended.append(signum)
        loop = app.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # (a loop closed meanwhile: the check after the prompt raises)
                loop.call_soon_threadsafe(leave)

    for number in SIGNALS:
        signal.signal(number, on_signal)
    try:
        text = session.prompt(message, pre_run=leave, **options)
    except BaseException:
        if not ended:
            raise
        raise Terminated(ended[0]) from None
    finally:
        if not ended:
            for number in SIGNALS:
                signal.signal(number, _end)
    if ended:
        raise Terminated(ended[0])
    return text


def output_closed() -> Terminated:
    """stdout's reader went away (``rml-chat | head``): the chat ends as after a hangup, keeping the reply
    so far and saving the chat, with exit 141. stdout now writes to the terminal stderr is, else to
    /dev/null, so that the save's own line ("saved 2 messages: …") is seen, and neither it nor the exit's
    flush fails again; the ``Terminated`` to raise."""
    detach_stdout(to_terminal=True)
    return Terminated(signal.SIGPIPE)


def detach_stdout(to_terminal: bool = False) -> None:
    """After the reader of stdout went away, point stdout at /dev/null (``to_terminal``: at stderr where
    that is a terminal) so that what is still written, and the exit's flush, fail no more."""
    try:
        if to_terminal and os.isatty(2):
            os.dup2(2, sys.stdout.fileno())
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _terminal_gone() -> None:
    """After a hangup, stdout and stderr that were the terminal write to /dev/null: a write to a terminal
    that is gone fails (EIO), and the save that follows must not fail with it. A file or a pipe stays."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if stat.S_ISCHR(os.fstat(fd).st_mode):
                os.dup2(null, fd)
    os.close(null)

