"""Scripted runs: one turn from ``-p TEXT`` or stdin, the reply on stdout (or one JSON object)."""

from __future__ import annotations

import argparse
import json
import sys

from .prompt_view import marked_prompt
from .session import ChatError, ChatSession, TurnResult


def result_json(session: ChatSession, result: TurnResult) -> dict:
    g = result.generation
    return {
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
    if args.prompt is not None:
        text = args.prompt
    else:
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError as err:
            raise ChatError(f"stdin is not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not text.strip():
        raise ChatError("empty prompt (give -p TEXT or text on stdin)")
    if getattr(args, "show_prompt", False):
        session.conversation.messages.append({"role": "user", "content": text})
        ids = session.prompt_ids()
        print(marked_prompt(session.model.tokenizer, ids, sys.stdout.isatty()))
        print(f"({len(ids)} tokens; chat format {session.model.detection.format.name}, established by "
              f"{session.model.detection.source})", file=sys.stderr)
        return 0

    def emit(chunk: str) -> None:
        if not args.json and chunk:
            sys.stdout.write(chunk)
            sys.stdout.flush()

    def notify(line: str) -> None:
        print(f"note: {line}", file=sys.stderr)

    try:
        result = session.turn(text, emit, notify)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result_json(session, result), ensure_ascii=False))
    elif not result.reply.endswith("\n"):
        print()
    return 0
