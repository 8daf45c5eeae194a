"""``rml-chat --check [MODEL ...]``: the model doctor (``rml_chat/doctor``) on each model named, in one run.

One model: its facts and findings, then PASS or FAIL. Several: each, then a table. ``--json``: one object,
the schema ``rml-chat.check/1`` (docs/model-doctor.md). ``--junit FILE``: JUnit XML for CI. ``--no-reply``:
the tokenizer and the template only, the weights never loaded. Exit code: 1 with any error finding (any
warning too under ``--strict``), else 0.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

from ..doctor.examine import examine
from ..doctor.findings import as_json, exit_code
from ..doctor.report import table, text_report, write_junit
from ..engines.base import Engine
from ..errors import AppError
from ..terminal import for_stream, json_text
from .launch import open_engine, prompt_cache_for


def _engine(args: argparse.Namespace, say, model) -> Engine:  # type: ignore[no-untyped-def]
    engine = open_engine(model, args, say, n_ctx=min(args.ctx_size or 2048, 2048))
    prompt_cache_for(args, engine)
    return engine


def run_check(args: argparse.Namespace, say) -> int:
    reports = []
    for path in args.models or [None]:
        say(f"checking {path or 'SmolLM2-135M-Instruct (default)'} …")
        engine_for = None if args.no_reply else partial(_engine, args, say)
        reports.append(examine(path, weights=args.weights, chat_format=args.chat_format, engine_for=engine_for))
    if args.junit:
        try:
            write_junit(reports, args.strict, args.junit)
        except OSError as err:
            raise AppError(f"--junit {args.junit}: {err.strerror or err}", "output") from None
    if args.json:
        print(json_text(as_json(reports, args.strict)))
    else:
        print(for_stream("\n\n".join(text_report(r, args.strict) for r in reports), sys.stdout))
        if len(reports) > 1:
            print(for_stream("\n" + table(reports, args.strict), sys.stdout))
    sys.stdout.flush()
    return exit_code(reports, args.strict)
