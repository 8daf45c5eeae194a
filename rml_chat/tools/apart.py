"""A tool call run in a process of its own: ended when it runs past its time, its prints kept apart.

A ``--functions`` tool is the user's Python. Run in a thread, one that hangs can't be stopped (Python has no
way to end a thread), and what it prints would land in the reply. So each call runs in a child forked from
this process: it has the tool's module as loaded, the call's arguments, and a file of its own for fd 1
and 2 (prints from Python and from C alike). The child sends back the result as the text the model reads;
past ``timeout`` seconds, or on Ctrl-C, the child is killed. What a tool keeps in its module's globals does
not carry from one call to the next (each call starts from the module as it was loaded)::

    >>> apart_call(lambda arguments: arguments["x"] * 2, {"x": 21}, str, timeout=10)
    Outcome(kind='value', text='42', printed='')
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

PRINTED_KEPT = 4096  # bytes of what a call printed that are kept for the note


@dataclass(frozen=True)
class Outcome:
    """How a call ended: ``kind`` "value" (``text``: the result as the model reads it), "error" (``text``:
    what it raised), "timeout" or "interrupted"; ``printed``: the start of what it printed."""

    kind: str
    text: str = ""
    printed: str = ""


def apart_call(run: Callable[[dict], object], arguments: dict, as_text: Callable[[object], str],
               timeout: float) -> Outcome:
    """``run(arguments)`` in a forked child, its value made text by ``as_text`` there (a value of any type
    comes back as the text the model reads)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    with tempfile.TemporaryFile() as printed:
        child = context.Process(target=_child, args=(run, arguments, as_text, send, printed.fileno()), daemon=True)
        child.start()
        send.close()
        try:
            answered = receive.poll(timeout)
            kind, text = receive.recv() if answered else ("timeout", "")
        except KeyboardInterrupt:
            kind, text = "interrupted", ""
        except (EOFError, OSError):  # (the child died without a word: killed, or it ended the process itself)
            kind, text = "error", f"the tool's process ended (exit code {child.exitcode})"
        finally:
            if child.is_alive():
                child.kill()
            child.join()
            receive.close()
        printed.seek(0)
        said = printed.read(PRINTED_KEPT).decode("utf-8", "replace")
    return Outcome(kind, text, said)


def _child(run: Callable[[dict], object], arguments: dict, as_text: Callable[[object], str], send: object,
           printed: int) -> None:
    """The child's side: fd 1 and 2 into the file, the call, its text or its error sent back."""
    os.dup2(printed, 1)
    os.dup2(printed, 2)
    sys.stdout = sys.stderr = open(printed, "w", buffering=1, closefd=False)  # noqa: SIM115  (the process's own)
    try:
        answer = ("value", as_text(run(arguments)))
    except BaseException as err:  # the tool's own failure is its result
        answer = ("error", f"{type(err).__name__}: {err}")
    with contextlib.suppress(OSError):
        sys.stdout.flush()
    send.send(answer)  # type: ignore[attr-defined]
