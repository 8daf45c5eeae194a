"""Scripted runs: one turn from ``-p TEXT`` or stdin, the reply on stdout (or one JSON object)."""

from __future__ import annotations

import argparse
import json
import sys

from . import text_input
from .errors import EXIT_INTERRUPTED, AppError
from .progress import EvalProgress
from .prompt_view import marked_prompt
from .session import ChatSession, TurnResult


def result_json(session: ChatSession, result: TurnResult) -> dict:
    g = result.generation
    return {
        "ok": True,
        "reply": result.reply,
        "model": session.model.name,
        "chat_format": session.model.detection.format.name,
        "prompt_tokens": g.prompt_tokens,
        "prompt_tokens_evaluated": g.evaluated,
        "completion_tokens": len(g.tokens),
        "stop_reason": g.stop_reason,
        "context_used": result.context_used,
        "context_size": session.engine.n_ctx,
        "timings": {"ttft_ms": round(g.ttft_s * 1000, 2), "tokens_per_s": round(g.tokens_per_s, 2),
                    "total_ms": round((g.finished - g.started) * 1000, 2)},
    }


def run_scripted(session: ChatSession, args: argparse.Namespace) -> int:
    """One turn: the reply streamed to stdout (or one JSON object); the exit code."""
    text = args.prompt if args.prompt is not None else text_input.read_stdin()
    if not text.strip():
        raise AppError("empty prompt (give -p TEXT or text on stdin)", "input")
    if getattr(args, "show_prompt", False):
        session.conversation.messages.append({"role": "user", "content": text})
        ids = session.prompt_ids()
        print(marked_prompt(session.model.tokenizer, ids, sys.stdout.isatty()))
        print(f"({len(ids)} tokens; chat format {session.model.detection.format.name}, established by "
              f"{session.model.detection.source})", file=sys.stderr)
        return 0

    progress = EvalProgress()

    def emit(chunk: str) -> None:
        if not args.json and chunk:
            progress.clear()
            sys.stdout.write(chunk)
            sys.stdout.flush()

    def notify(line: str) -> None:
        print(f"note: {line}", file=sys.stderr)

    try:
        result = session.turn(text, emit, notify, progress)
    except KeyboardInterrupt:
        progress.clear()
        if not args.json:
            sys.stdout.write("\n")
        print("rml-chat: interrupted (the reply so far is above)" if not args.json else "rml-chat: interrupted",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    progress.clear()
    if args.json:
        print(json.dumps(result_json(session, result), ensure_ascii=False))
    elif not result.reply.endswith("\n"):
        print()
    return 0
