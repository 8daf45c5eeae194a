"""``--batch FILE|-``: many prompts, one model load. JSONL in, JSONL out, in input order.

A line is a JSON string (the prompt) or an object::

    {"id": "q1", "prompt": "Name a colour.", "system": "Be terse.", "temp": 0, "max_tokens": 8,
     "schema": {"type": "object", …}}

``messages`` instead of ``prompt`` is a whole conversation, as a ``/save`` file holds it (a leading
system message taken as the system text): the line answers its last user message on that history — for
evaluation sets and regression runs. ``id`` is any JSON value (default: the line number); the sampling
keys are the settings table's
(``temp``, ``top_k``, ``top_p``, ``min_p``, ``repeat_penalty``, ``seed``, ``max_tokens``,
``reasoning_budget``), checked as the flags are, and so are ``think`` ("on"/"off") and
``reasoning_effort`` (a line asking what its template can't do is an error); ``schema`` (an object)
or ``grammar`` (GBNF text) constrain that line's reply, else the command line's ``-j``/``--grammar``
apply. Each output line carries the id, the line number, the reply,
the token counts (``prompt_tokens_reused``: taken from the cache — a system prompt shared by consecutive
lines is evaluated once), the stop reason and the timings; a line that can't run carries ``error``
instead, and the batch goes on. Ctrl-C stops after the last complete line: what was written stays valid
JSONL. On a terminal, stderr shows n/N, tokens/s and the time left.

Exit code: 0 when every line ran and (under a constraint) is complete and valid, 1 otherwise; a summary
line on stderr names the lines that did not.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TextIO

from .. import text_input
from ..core.conversation import MAX_CHAT_BYTES, ChatError, Conversation
from ..core.message import Message
from ..core.session import ChatSession
from ..core.settings import ON_OFF, SAMPLING, SETTINGS, SettingError, sampling_value, settable
from ..core.structured import Constraint, check, from_schema
from ..errors import EXIT_ERROR, EXIT_OK, STOPPED, AppError, how_stopped, one_line
from ..terminal import json_text, one_row
from ..tools import loop as tool_loop
from ..words import counted
from .scripted import result_json

_TEXT_KEYS = ("id", "prompt", "system", "schema", "grammar", "messages")
SAMPLING_KEYS = tuple(row.name for row in SETTINGS if row.settable and row.group == SAMPLING)
PROMPT_KEYS = ("think", "reasoning_effort")  # the session's, set for the line and put back after it
MAX_LINE_BYTES = MAX_CHAT_BYTES  # a line: one prompt or a whole conversation, as a saved chat


@dataclass
class Job:
    number: int
    id: object
    prompt: str
    system: str | None
    overrides: dict
    constraint: Constraint | None
    prompt_settings: dict | None = None
    history: list[Message] = field(default_factory=list)  # a ``messages`` line's conversation before the prompt


def _lines(path: str) -> Iterator[tuple[int, str | AppError]]:
    """The input's lines that hold text, numbered as the input numbers them, each under the text policy.
    A line with no newline in its first
    ``MAX_LINE_BYTES`` (``--batch /dev/zero``) is that line's error and the input's end: where the next line
    starts can't be known without reading on without bound."""
    source = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115 (closed below)
    try:
        number = 0
        while raw := source.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                yield number, AppError(f"more than {MAX_LINE_BYTES:,} bytes with no newline (a line holds one "
                                       "prompt or one conversation); the lines after it were not read", "input")
                return
            text = text_input.from_bytes(raw, "the batch input" if path == "-" else path)
            text = text_input.without_bom(text) if number == 1 else text
            if text.strip():  # (without its line ending: a line cut short is "Unterminated string … column 23",
                yield number, text.rstrip("\r\n")  # not an "Invalid control character" at the newline)
    finally:
        if path != "-":
            source.close()


def parse_job(number: int, text: str | AppError, session: ChatSession, constraints: dict[str, Constraint]) -> Job:
    """One input line as a job, or AppError saying what is wrong with it (``text`` is one already where the
    line could not be read: ``_lines``)."""
    if isinstance(text, AppError):
        raise text
    try:
        data = text_input.from_json(text, "the --batch input")
    except json.JSONDecodeError as err:
        raise AppError(f"not JSON ({err})", "input") from None
    except RecursionError:  # (a line nested thousands deep: its own error, the batch goes on)
        raise AppError("not read: its JSON is nested too deeply", "input") from None
    if isinstance(data, str):
        data = {"prompt": data}
    if not isinstance(data, dict):
        raise AppError("a line is a JSON string or object", "input")
    prompt, system = data.get("prompt"), data.get("system")
    if system is not None and not isinstance(system, str):
        raise AppError("'system' must be a string", "input")
    history: list[Message] = []
    if "messages" in data:
        prompt, system, history = _conversation(data, system)
    if not isinstance(prompt, str) or not prompt.strip():
        raise AppError("'prompt' must be a string with text in it", "input")
    overrides, prompt_settings = {}, {}
    for key, value in data.items():
        if key in _TEXT_KEYS:
            continue
        row = settable(key)
        if row is None or (row.group != SAMPLING and row.name not in PROMPT_KEYS):
            raise AppError(f"unknown key {key!r}; a line takes {', '.join(_TEXT_KEYS + SAMPLING_KEYS + PROMPT_KEYS)}",
                           "input")
        if row.name in ON_OFF and isinstance(value, bool):  # (JSON's true and false: the flag's on and off)
            value = "on" if value else "off"
        texts = value if row.repeat and isinstance(value, list) else [value]
        wanted = (int, float) if isinstance(row.default, (int, float)) and row.name not in PROMPT_KEYS else str
        if not texts or any(isinstance(v, bool) or not isinstance(v, wanted) for v in texts):
            raise AppError(f"{key} must be {row.parse.allowed}{' (or a list of them)' if row.repeat else ''}, "  # type: ignore[attr-defined]
                           f"not {json.dumps(value)}", "input")
        try:
            parsed = [row.check(str(v), flag=key) for v in texts]
        except SettingError as err:
            raise AppError(str(err), "input") from None
        if row.name in PROMPT_KEYS:
            prompt_settings[row.name] = parsed[0]
        else:
            overrides[row.name] = sampling_value(row.name, parsed if row.repeat else parsed[0])
    constraint = _constraint(data, session, constraints)
    return Job(number, data.get("id", number), prompt, system, overrides, constraint, prompt_settings, history)


def _conversation(data: dict, system: str | None) -> tuple[str, str | None, list[Message]]:
    """A ``messages`` line: (the last user message, the system text, the history before it). The messages
    are a ``/save`` file's (a leading system message, OpenAI's way, is taken as the system text)."""
    if "prompt" in data:
        raise AppError("a line takes 'prompt' or 'messages', not both", "input")
    messages = data["messages"]
    if isinstance(messages, list) and messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        if system is not None:
            raise AppError("a line takes 'system' or a system message, not both", "input")
        system, messages = messages[0].get("content"), messages[1:]
    try:
        conversation = Conversation.from_json({"messages": messages, "system": system}, "'messages'")
    except ChatError as err:
        raise AppError(str(err), "input") from None
    if not conversation.messages or conversation.messages[-1].role != "user":
        raise AppError("'messages' must end with the user message to answer", "input")
    return conversation.messages[-1].content, conversation.system, conversation.messages[:-1]


def _constraint(data: dict, session: ChatSession, constraints: dict[str, Constraint]) -> Constraint | None:
    """The line's schema or grammar (each distinct one converted and checked once), else the session's."""
    if "schema" in data and "grammar" in data:
        raise AppError("a line takes 'schema' or 'grammar', not both", "input")
    if "schema" in data:
        if not isinstance(data["schema"], dict):
            raise AppError("'schema' must be a JSON object", "input")
        key = "schema:" + json.dumps(data["schema"], sort_keys=True)
    elif "grammar" in data:
        if not isinstance(data["grammar"], str):
            raise AppError("'grammar' must be GBNF text", "input")
        key = "grammar:" + data["grammar"]
    else:
        return session.options.constraint
    if key not in constraints:
        made = (from_schema(json.dumps(data["schema"]), "schema") if key.startswith("schema:")
                else Constraint(data["grammar"], None, "grammar"))  # GBNF as written (no @FILE in a line)
        check(made, session.engine)
        constraints[key] = made
    return constraints[key]


def run_job(session: ChatSession, job: Job, base) -> dict:  # type: ignore[no-untyped-def]
    session.conversation = Conversation(job.system, list(job.history))
    options = session.options
    options.sampling = replace(base, **job.overrides)
    before = replace(options.reasoning)
    try:
        for name, value in (job.prompt_settings or {}).items():
            why = session.apply(name, value)
            if why:
                raise AppError(why, "input")
        result = tool_loop.exchange(session, job.prompt, lambda _: None, lambda _: None, constraint=job.constraint)
    finally:
        options.reasoning = before
    return {"id": job.id, "line": job.number, **result_json(session, result, job.constraint)}


class _Progress:
    def __init__(self, total: int | None, stream: TextIO):
        self.total, self.stream, self.live = total, stream, stream.isatty()
        self.started, self.tokens = time.perf_counter(), 0

    def show(self, done: int, tokens: int) -> None:
        self.tokens += tokens
        if not self.live:
            return
        spent = time.perf_counter() - self.started
        rate = self.tokens / spent if spent > 0 else 0.0
        left = f" · {spent / done * (self.total - done):.0f} s left" if self.total and done else ""
        of = f"/{self.total}" if self.total else ""
        line = one_row([f"batch: {done}{of} · {rate:.1f} tok/s{left}", f"batch: {done}{of} · {rate:.1f} tok/s"])
        self.stream.write(f"\r\x1b[K\x1b[2m{line}\x1b[0m")
        self.stream.flush()

    def clear(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _count_lines(path: str) -> int | None:
    """A file's lines, for the progress line's n/N; None for stdin, a pipe or a device (which may never end)."""
    if path == "-":
        return None
    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            lines, last = 0, b"\n"
            while chunk := handle.read(2**20):  # (in chunks: a line may be longer than memory should hold)
                lines, last = lines + chunk.count(b"\n"), chunk[-1:]
            return lines + (last != b"\n")
    except OSError as err:
        raise AppError(f"--batch: {path}: {err.strerror}", "input") from None


def _failed(text: str | AppError, number: int, err: AppError) -> dict:
    return {"id": _id_of(text, number) if isinstance(text, str) else None, "line": number, "ok": False,
            "error": {"kind": err.kind, "message": one_line(str(err))}}


def _summary(done: int, failed: list[int]) -> int:
    if failed:
        shown = ", ".join(map(str, failed[:10])) + (" …" if len(failed) > 10 else "")
        print(f"rml-chat: batch: {done - len(failed)} of {counted(done, 'line')} ran cleanly; not: line "
              f"{shown}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def run_parallel(session: ChatSession, args: argparse.Namespace) -> int:
    """``-np N``: N worker threads, each a twin of the session over one of the engine's lines (decoded
    together: engines/parallel.py); lines are parsed here, in order, and written in input order."""
    twins = [session.twin(engine) for engine in session.engine.lines(args.parallel)]
    progress = _Progress(_count_lines(args.batch), sys.stderr)
    base, constraints = session.options.sampling, {}
    jobs: queue.Queue = queue.Queue(maxsize=2 * len(twins))
    results: dict[int, tuple[int, dict]] = {}
    ready = threading.Condition()

    def work(twin: ChatSession) -> None:
        while (item := jobs.get()) is not None:
            index, job, text = item
            try:
                out = run_job(twin, job, base)
            except AppError as err:
                out = _failed(text, job.number, err)
            except Exception as err:  # one line's failure is its own line; the batch goes on
                out = _failed(text, job.number, AppError(f"internal error ({type(err).__name__}: {err})"))
            with ready:
                results[index] = (job.number, out)
                ready.notify_all()

    for twin in twins:
        threading.Thread(target=work, args=(twin,), daemon=True).start()
    written, failed, count = 0, [], 0

    def write_ready(wait_for: int) -> int:
        nonlocal written
        with ready:
            while written < wait_for:
                while written not in results:
                    ready.wait()
                number, out = results.pop(written)
                if not out["ok"]:
                    failed.append(number)
                sys.stdout.write(json_text(out) + "\n")
                sys.stdout.flush()
                progress.show(number, out.get("completion_tokens", 0))
                written += 1
        return written

    try:
        for number, text in _lines(args.batch):
            try:
                jobs.put((count, parse_job(number, text, session, constraints), text))
            except AppError as err:
                with ready:
                    results[count] = (number, _failed(text, number, err))
                    ready.notify_all()
            count += 1
            with ready:
                ready_now = written
                while ready_now in results:
                    ready_now += 1
            write_ready(ready_now)
        write_ready(count)
    except STOPPED as err:
        progress.clear()
        return _stopped(err, written)
    progress.clear()
    return _summary(written, failed)


def _stopped(err: BaseException, written: int) -> int:
    """Ctrl-C or a signal after ``written`` lines: one line, and the exit code."""
    why, code = how_stopped(err)
    print(f"rml-chat: {why} after {counted(written, 'line')}; the output holds them whole", file=sys.stderr)
    return code


def run_batch(session: ChatSession, args: argparse.Namespace) -> int:
    """Every line through the one loaded model; returns the exit code."""
    if args.parallel > 1:
        return run_parallel(session, args)
    progress = _Progress(_count_lines(args.batch), sys.stderr)
    base = session.options.sampling
    constraints: dict[str, Constraint] = {}
    failed: list[int] = []
    done = 0
    try:
        for number, text in _lines(args.batch):
            try:
                out = run_job(session, parse_job(number, text, session, constraints), base)
                if not out["ok"]:
                    failed.append(number)
                progress.show(number, out.get("completion_tokens", 0))
            except AppError as err:
                out = _failed(text, number, err)
                failed.append(number)
            sys.stdout.write(json_text(out) + "\n")
            sys.stdout.flush()
            done += 1
    except STOPPED as err:
        progress.clear()
        return _stopped(err, done)
    finally:
        session.options.sampling = base
    progress.clear()
    return _summary(done, failed)


def _id_of(text: str, number: int) -> object:
    """A failed line's id: its own, where it can be read; None where the line can't be (its line number
    could be another line's id: ``"line"`` says which it was)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return data.get("id", number) if isinstance(data, dict) else number
