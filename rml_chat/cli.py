"""``rml-chat [MODEL]``: the command line. Parses flags, loads the model, runs the REPL, a scripted
turn (-p / stdin / --json) or the smoke test (--check). Errors are one line and a non-zero exit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tokenizer.chat import FORMATS

from .engine import Engine, Sampling
from .model import ModelError, load_model
from .session import OVERFLOW_POLICIES, ChatError, ChatSession


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rml-chat", description="Chat with a local model in the terminal.")
    p.add_argument("model", nargs="?", help="a .gguf file or a model directory (default: SmolLM2-135M-Instruct)")
    p.add_argument("--weights", help="the GGUF with the weights, for a model directory")
    p.add_argument("--chat-format", help=f"override detection: {', '.join(FORMATS)}")
    p.add_argument("-p", "--prompt", help="one turn: print the reply and exit")
    p.add_argument("-sys", "--system", help="system message")
    p.add_argument("--json", action="store_true", help="print one JSON object (with -p, stdin or --check)")
    p.add_argument("--check", action="store_true", help="smoke-test the model: tokenizer vs llama.cpp, the prompt "
                   "vs the model's own template, a reply")
    p.add_argument("--show-prompt", action="store_true", help="print the prompt the model would see for -p/stdin "
                   "(special tokens marked) and exit")
    p.add_argument("--temp", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--min-p", type=float, default=0.05)
    p.add_argument("--repeat-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=-1)
    p.add_argument("-n", "--max-tokens", type=int, default=-1, help="reply length limit (-1: none)")
    p.add_argument("-c", "--ctx-size", type=int, default=4096)
    p.add_argument("-t", "--threads", type=int, default=None, help="default: all cores")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--overflow", choices=OVERFLOW_POLICIES, default="drop-oldest")
    p.add_argument("--think", choices=("on", "off"), help="reasoning models: thinking on or off")
    p.add_argument("--verbose", action="store_true", help="show the format, stop ids and llama.cpp's logs")
    return p


def sampling_from(args: argparse.Namespace) -> Sampling:
    return Sampling(temp=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                    repeat_penalty=args.repeat_penalty, seed=args.seed, max_tokens=args.max_tokens)


def _error(message: str) -> int:
    print(f"rml-chat: error: {message}", file=sys.stderr)
    return 1


def open_session(args: argparse.Namespace, say) -> ChatSession:
    """Load model and weights, with a progress line; raises ModelError."""
    say(f"loading {args.model or 'SmolLM2-135M-Instruct (default)'} …")
    model = load_model(args.model, weights=args.weights, chat_format=args.chat_format)
    if model.detection.warning:
        say(f"note: {model.detection.warning}")
    if args.verbose:
        for line in model.describe():
            say(line)
    engine = Engine(model.weights, n_ctx=args.ctx_size, n_threads=args.threads, verbose=args.verbose)
    thinking = {"on": True, "off": False, None: None}[args.think]
    session = ChatSession(model, engine, sampling_from(args), overflow=args.overflow,
                          stop_strings=tuple(args.stop), thinking=thinking)
    session.conversation.system = args.system
    return session


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("\nrml-chat: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    scripted = args.prompt is not None or not sys.stdin.isatty()
    quiet_progress = args.json or (scripted and not args.verbose)

    def say(line: str) -> None:
        if not quiet_progress or line.startswith("note:"):
            print(line, file=sys.stderr, flush=True)

    if args.chat_format and args.chat_format not in FORMATS:
        return _error(f"unknown chat format {args.chat_format!r}; known: {', '.join(FORMATS)}")
    try:
        if args.check:
            from .check import run_check

            return run_check(args, say)
        session = open_session(args, say)
    except ModelError as err:
        return _error(str(err))
    except KeyboardInterrupt:
        print("\ninterrupted while loading", file=sys.stderr)
        return 130
    try:
        if scripted:
            from .scripted import run_scripted

            return run_scripted(session, args)
        from .repl import Repl

        return Repl(session).run()
    except ChatError as err:
        return _error(str(err))
    finally:
        session.engine.close()
