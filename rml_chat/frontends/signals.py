"""SIGTERM (``kill``, ``timeout``, a logout) and SIGHUP (the terminal window closed) end a run as Ctrl-C
ends a turn: each raises ``errors.Terminated`` in the main thread, so the reply so far is kept, marked
cut, and the front end saves what it holds (the REPL: the chat and llama.cpp's state, as on leaving)
before the exit code, 128 + the signal's number. Without this, either signal ended the process at once
and the chat's last exchange was lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat

from ..errors import Terminated


def end_on_signals() -> None:
    """SIGTERM and SIGHUP raise ``Terminated`` in the main thread; the first one only: the save that
    follows is not cut by a second (SIGKILL still ends everything)."""

    def ended(signum: int, _frame: object) -> None:
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)
        if signum == signal.SIGHUP:
            _terminal_gone()
        raise Terminated(signum)

    for number in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(number, ended)
        except (ValueError, OSError):  # (not the main thread: an embedding caller's own handling stays)
            return


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

