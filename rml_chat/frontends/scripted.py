"""Scripted runs: one turn from ``-p TEXT`` or stdin, the reply on stdout (or one JSON object)."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence

from tokenizer import TokenType

from .. import text_input
from ..core.attachments import Attachment, files_note, message_with
from ..core.continuation import Prefill
from ..core.conversation import ChatError
from ..core.message import Message
from ..core.sampling_sources import as_json
from ..core.session import ChatSession, TurnResult
from ..core.structured import Constraint, Outcome
from ..engines.base import Generation
from ..engines.sampler_chain import describe, stages
from ..errors import EXIT_INCOMPLETE, STOPPED, AppError, how_stopped, report
from ..terminal import dim, json_text, visible
from ..tools import loop as tool_loop
from .progress import EvalProgress
from .prompt_view import marked_prompt
from .reply_display import ReplyDisplay


def result_json(session: ChatSession, result: TurnResult, constraint: Constraint | None = None) -> dict:
    """A turn as a script reads it: reply, counts (evaluated and reused from the cache), stop reason,
    timings; under a schema or grammar also whether the reply is complete and valid. A turn with tool calls
    is counted whole: the counts add up every step (each step's prompt is the whole conversation so far, most
    of it reused from llama.cpp's cache), the timings run from the first step's start to the last one's end
    (the tools' own time included), and ``steps`` gives each step's counts."""
    g, steps = result.generation, result.generations
    outcome = result.outcome
    shaped = {} if outcome is None or constraint is None else {
        "complete": outcome.complete, "schema_valid": outcome.valid, "problem": outcome.problem}
    return {
        "ok": outcome is None or (outcome.complete and outcome.valid is not False),
        **shaped,
        "reply": result.reply,
        "reasoning": result.reasoning if session.model.reasoning is not None else None,
        "reasoning_tokens": result.reasoning_tokens,
        **({"tool_calls": [r.as_json() for r in result.tool_calls]} if session.options.tools is not None else {}),
        "model": session.model.name,
        "chat_format": session.model.detection.format.name,
        **_counts(steps),
        "stop_reason": g.stop_reason,
        "stop_note": result.cut_note(session.engine.n_ctx) or None,  # why a reply is empty or cut, in words
        "context_used": result.context_used,
        "context_size": session.engine.n_ctx,
        "sampling": _with_seed(as_json(session.options.sampling, session.options.sampling_sources),
                               result.generation.seed),
        "sampler_chain": describe(stages(session.options.sampling, stop_ids=session.model.stop_ids)),
        **_engine_report(session.engine, steps, session.options.sampling.backend_sampling),
        "timings": {"ttft_ms": round(steps[0].ttft_s * 1000, 2), "tokens_per_s": round(_tokens_per_s(steps), 2),
                    "total_ms": round((steps[-1].finished - steps[0].started) * 1000, 2)},
        **({"steps": [{**_counts([step]), "stop_reason": step.stop_reason,
                       "ms": round((step.finished - step.started) * 1000, 2)} for step in steps]}
           if len(steps) > 1 else {}),
    }


def _engine_report(engine: object, steps: list[Generation], backend_sampling: bool) -> dict[str, object]:
    """The threads, flash attention, batch sizes and speculative decoding llama.cpp ran with in this process
    (none for a server: its own), with the tokens drafted and accepted over the steps, and with ``-bs`` the
    tokens the sampler chain drew on the device (a stop id among them; 0 where a stage of the chain, or a
    grammar, kept the draw here)."""
    report = getattr(engine, "report", None)
    made = report() if report is not None else {}
    if "speculative" in made:
        made["speculative"] = {"type": made["speculative"], "drafted": sum(s.drafted for s in steps),
                               "accepted": sum(s.accepted for s in steps)}
    if made and backend_sampling:
        made["backend_sampling"] = {"tokens_drawn_on_device": sum(s.on_device for s in steps)}
    return made


def _counts(steps: list[Generation]) -> dict[str, int]:
    prompt, evaluated = sum(s.prompt_tokens for s in steps), sum(s.evaluated for s in steps)
    return {"prompt_tokens": prompt, "prompt_tokens_evaluated": evaluated, "prompt_tokens_reused": prompt - evaluated,
            "completion_tokens": sum(len(s.tokens) for s in steps)}


def _tokens_per_s(steps: list[Generation]) -> float:
    """The generation speed over the steps: tokens after each step's first, over the time they took."""
    tokens = sum(max(len(s.tokens) - 1, 0) for s in steps)
    span = sum(s.finished - s.first_token_at for s in steps if s.first_token_at and len(s.tokens) > 1)
    return tokens / span if span > 0 else 0.0


def show_prompt(session: ChatSession, text: str, as_json: bool, prefill: str | None = None) -> int:
    """--show-prompt: the prompt the model would see for ``text`` (and the reply's start, ``--prefill``),
    special tokens marked (or, with --json, its text, ids and control tokens as one object)."""
    session.conversation.add(Message("user", text))
    ids = session.continued_prompt_ids(Prefill(prefill)) if prefill else session.prompt_ids()
    tok, detection = session.model.tokenizer, session.model.detection
    if as_json:
        controls = [{"at": n, "id": i, "text": tok.id_to_token(i)} for n, i in enumerate(ids)
                    if tok.token_type(i) == TokenType.CONTROL]
        print(json_text({"ok": True, "prompt": tok.decode(ids), "ids": ids, "tokens": len(ids),
                         "control_tokens": controls, "model": session.model.name,
                         "chat_format": detection.format.name, "established_by": detection.source}))
        return 0
    print(marked_prompt(tok, ids, sys.stdout.isatty()))
    print(visible(f"({len(ids)} tokens; chat format {detection.format.name}, established by {detection.source})"),
          file=sys.stderr)
    return 0


class ThoughtOnStderr:
    """A reasoning model's thought for ``-p``: on stderr (dim and made visible on a terminal, exact elsewhere),
    so that stdout is the answer."""

    def __init__(self, hidden: bool, progress: EvalProgress):
        self.hidden, self.progress, self.open = hidden, progress, False
        self.tty = sys.stderr.isatty()

    def write(self, text: str) -> None:
        if self.hidden or not text:
            return
        self.progress.clear()
        sys.stderr.write(dim(text, True) if self.tty else text)
        sys.stderr.flush()
        self.open = True

    def end(self) -> None:
        if self.open:
            sys.stderr.write("\n")
            self.open = False


def turn_text(prompt: str | None, files: Sequence[Attachment] = ()) -> str:
    """The turn's text: ``-p TEXT``, stdin, ``-f`` files, or all of them. Text piped in or redirected from a
    file goes first, then the files, then the instruction, a blank line apart (``cat notes.txt | rml-chat -p
    "Summarize the text above"``), as llm, ollama and aichat put them in one message
    (core/attachments.py); a terminal or ``/dev/null`` on stdin adds nothing."""
    if prompt is None and not files:
        return text_input.read_stdin()
    piped = text_input.read_stdin() if _stdin_carries_text() else ""
    return message_with(piped, files, prompt or "")


def _stdin_carries_text() -> bool:
    """Whether stdin is a pipe or a regular file (not a terminal, not a device such as ``/dev/null``)."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode if sys.stdin is not None else 0
    except (OSError, ValueError):  # (closed, or no real file)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def run_scripted(session: ChatSession, args: argparse.Namespace, display: ReplyDisplay) -> int:
    """One turn: the reply streamed to stdout (or one JSON object), its thought to stderr unless the
    ``display`` hides it; the exit code."""
    files = getattr(args, "attachments", [])
    text = turn_text(args.prompt, files)
    if not text.strip():
        raise AppError("empty prompt (give -p TEXT or text on stdin)", "input")
    if getattr(args, "show_prompt", False):
        return show_prompt(session, text, args.json, getattr(args, "prefill", None))

    def weights() -> list[int]:  # what each file weighs in tokens (only where it is said: an error, --json)
        return [len(session.model.tokenizer.encode(a.block)) for a in files]

    progress = EvalProgress()
    answer = display.answer_writer(sys.stdout)  # (exact bytes into a pipe or a file; Markdown on a terminal)

    begun = False  # (whether any of the answer was written: a turn that fails then ends its line first)
    start = getattr(args, "prefill", None)
    unshown = start or ""  # (the reply's start, the user's: written with the model's first text, or when the
    # turn ends without any, so that a start the turn refuses, or a prompt that can't take it, writes nothing)

    def emit(chunk: str) -> None:
        nonlocal begun, unshown
        if not args.json and (chunk or unshown):
            progress.clear()
            answer.write(unshown + chunk)
            unshown, begun = "", True

    def notify(line: str) -> None:
        answer.pause()
        print(visible(f"note: {line}"), file=sys.stderr)

    thinking = ThoughtOnStderr(display.hidden or args.json, progress)
    try:
        result = tool_loop.exchange(session, text, emit, notify, progress, think=thinking.write,
                                  prefill=Prefill(start) if start else None)
        thinking.end()
    except AppError as err:  # (one that fails mid-reply: the reply so far stays on a line of its own)
        progress.clear()
        thinking.end()
        if begun:
            answer.end()
        if isinstance(err, ChatError) and files and "the message alone needs" in str(err):
            raise ChatError(f"{err} (the files: {files_note(files, weights())})") from None  # (what each weighs)
        raise
    except STOPPED as err:  # (the turn so far is kept: --resume saves it)
        progress.clear()
        emit("")
        if not args.json:
            answer.end()
        why, code = how_stopped(err)
        print(f"rml-chat: {why} (the reply so far is above)" if not args.json else f"rml-chat: {why}", file=sys.stderr)
        return code
    progress.clear()
    if args.json:
        shown = result_json(session, result, session.options.constraint)
        if files:
            shown["files"] = [{"path": a.path, "chars": len(a.text), "tokens": n} for a, n in zip(files, weights())]
        print(json_text(shown))
        return verdict(result.outcome, args.json)
    emit("")
    answer.end()
    cut = result.cut_note(session.engine.n_ctx)
    if cut and (result.outcome is None or not result.outcome.problem):  # (a problem is said by the verdict)
        sys.stdout.flush()
        notify(cut)
    return verdict(result.outcome, args.json)


def _with_seed(sampling: dict, seed: int) -> dict:
    """``--json``'s sampling settings with the seed the reply used where it was drawn (``--seed -1``): given
    back as ``--seed``, it makes the same reply."""
    if sampling.get("seed", {}).get("value") == -1 and seed >= 0:
        sampling = {**sampling, "seed": {"value": seed, "from": f"drawn at random ({sampling['seed']['from']}: -1)"}}
    return sampling


def verdict(outcome: Outcome | None, as_json: bool) -> int:
    """The exit code of a constrained reply: 3 when incomplete, 1 when it breaks the schema (one line on
    stderr; with --json the object printed already says it)."""
    if outcome is None or (outcome.complete and outcome.valid is not False):
        return 0
    kind, code = ("incomplete", EXIT_INCOMPLETE) if not outcome.complete else ("invalid", 1)
    return report(outcome.problem, kind, code, False)
