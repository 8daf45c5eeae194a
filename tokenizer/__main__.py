"""Command line: encode, decode, inspect.

    python -m tokenizer encode MODEL [--add-special] [--parse-special]   < text   -> ids
    python -m tokenizer decode MODEL [--skip-special]                    < ids    -> text
    python -m tokenizer inspect MODEL TEXT [--parse-special]                      -> one line per token
"""

from __future__ import annotations

import argparse
import sys

from . import TokenizerError, TokenType, load

_COLOURS = {TokenType.NORMAL: "32", TokenType.CONTROL: "1;35", TokenType.USER_DEFINED: "1;36",
            TokenType.BYTE: "33", TokenType.UNKNOWN: "1;31", TokenType.UNUSED: "2", TokenType.UNDEFINED: "2"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tokenizer", description="rml-chat's tokenizer")
    sub = parser.add_subparsers(dest="command", required=True)
    enc = sub.add_parser("encode", help="read text on stdin, print ids separated by spaces")
    enc.add_argument("model")
    enc.add_argument("--add-special", action="store_true", help="add BOS/EOS as the model's metadata says")
    enc.add_argument("--parse-special", action="store_true", help="turn control-token text into control tokens")
    dec = sub.add_parser("decode", help="read ids on stdin, print the text")
    dec.add_argument("model")
    dec.add_argument("--skip-special", action="store_true", help="leave control tokens out")
    ins = sub.add_parser("inspect", help="show each token of TEXT: piece, id, type")
    ins.add_argument("model")
    ins.add_argument("text")
    ins.add_argument("--parse-special", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        tok = load(args.model)
        if args.command == "encode":
            text = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
            ids = tok.encode(text, add_special=args.add_special, parse_special=args.parse_special)
            print(" ".join(map(str, ids)))
        elif args.command == "decode":
            words = sys.stdin.read().split()
            try:
                ids = [int(w) for w in words]
            except ValueError:
                bad = next(w for w in words if not w.lstrip("-").isdigit())
                raise TokenizerError(f"stdin: {bad!r} is not a token id") from None
            sys.stdout.buffer.write(tok.decode_bytes(ids, skip_special=args.skip_special))
            sys.stdout.flush()
        else:
            colour = sys.stdout.isatty()
            for token_id in tok.encode(args.text, parse_special=args.parse_special):
                kind = tok.token_type(token_id)
                piece = repr(tok.token_bytes(token_id).decode("utf-8", "backslashreplace"))
                line = f"{token_id:>8}  {kind.name.lower():<12}  {piece}"
                print(f"\033[{_COLOURS[kind]}m{line}\033[0m" if colour else line)
    except TokenizerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
