"""What drawing a reply as Markdown costs, side by side with drawing it as written, in one run.

1. **Through a real pty.** The REPL (SmolLM2-135M, the default model, ``--temp 0``: the same reply each
   time) answers one prompt that asks for Markdown, with ``--markdown on`` and ``off`` in turn, ``--rounds``
   times each. Figures: tokens/s (the REPL's own stats line: rendering runs in the generation's loop, so
   whatever it costs shows there) and the time from Enter to the reply's first word on screen.
2. **The view alone** on a 2,000-line reply (prose with marks and links, then a 1,000-line Python block),
   written 4 characters at a time: microseconds per piece, and the bytes written per byte of reply — against
   re-rendering the reply so far with rich's ``Markdown`` (what a streaming ``rich.Live`` does), where rich
   is installed.

    python scripts/bench_render.py [--rounds 3] [--tokens 600]
"""

from __future__ import annotations

import argparse
import fcntl
import io
import json
import os
import pty
import re
import select
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rml_chat.frontends.markdown_view import MarkdownView  # noqa: E402

PROMPT = (b"Write a Markdown guide to brewing tea: a heading, a short paragraph, a numbered list of steps, "
          b"a table of teas and temperatures, and a Python function that times the steeping.")


def one_reply(markdown: str, tokens: int, folder: Path) -> tuple[float, float, int]:
    """(tokens/s, seconds from Enter to the reply's first word on screen, tokens) of one REPL turn."""
    env = {**os.environ, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1",
           "RML_CHAT_HISTORY": str(folder / "history"), "RML_CHAT_SESSIONS": str(folder / "sessions")}
    env.pop("NO_COLOR", None)
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
        os.execve(sys.executable, [sys.executable, "-m", "rml_chat", "--temp", "0", "-n", str(tokens),
                                   "--markdown", markdown], env)
    output, stamps = b"", []  # (time, length of output after the read)

    def read_until(done, timeout: float = 600) -> None:
        nonlocal output
        end = time.time() + timeout
        while not done() and time.time() < end:
            if select.select([fd], [], [], 0.05)[0]:
                output += os.read(fd, 65536)
                stamps.append((time.perf_counter(), len(output)))

    def at_prompt(since: int = 0) -> bool:  # (prompt_toolkit drew ">" and showed the cursor)
        return output.endswith(b"\x1b[?25h") and b"\x1b[0m>" in output[max(since, len(output) - 120):]

    read_until(at_prompt)
    time.sleep(0.5)
    start_at, sent = len(output), time.perf_counter()
    os.write(fd, PROMPT + b"\r")
    read_until(lambda: b"tok/s" in output[start_at:] and at_prompt(output.rfind(b"tok/s")))
    time.sleep(0.3)
    os.write(fd, b"\x04")
    try:
        while select.select([fd], [], [], 1)[0]:
            if not os.read(fd, 65536):
                break
    except OSError:
        pass
    os.waitpid(pid, 0)
    os.close(fd)
    found = re.search(rb"(\d+) tokens? at ([\d.]+) tok/s", output[start_at:])
    saved = max((folder / "sessions").glob("*.json"), key=lambda p: p.stat().st_mtime)  # (the autosave)
    reply = json.loads(saved.read_text())["messages"][-1]["content"]
    first_word = re.search(r"[A-Za-z]{4,}", reply).group().encode()
    shown = output.find(first_word, start_at + len(PROMPT))
    first_at = next(t for t, length in stamps if length >= shown + len(first_word))
    return float(found.group(2)), first_at - sent, int(found.group(1))


def long_reply() -> str:
    prose = [f"Line {n} of a **long** reply, with `code`, *emphasis* and a [link](https://x.org/{n})."
             for n in range(1000)]
    code = ["```python"] + [f"value_{n} = compute({n}, 'text')  # a comment" for n in range(998)] + ["```"]
    return "\n".join(prose + code) + "\n"


def view_alone(text: str) -> tuple[float, float]:
    """(µs per 4-character piece, bytes written per byte of reply) of the view on ``text``."""
    out = io.StringIO()
    view = MarkdownView(out, color=True, columns=lambda: 100)
    pieces = [text[at:at + 4] for at in range(0, len(text), 4)]
    start = time.perf_counter()
    for piece in pieces:
        view.write(piece)
    view.end()
    spent = time.perf_counter() - start
    return spent / len(pieces) * 1e6, len(out.getvalue()) / len(text)


def rich_per_piece(text: str) -> float | None:
    """ms to render the whole reply once with rich's Markdown: what each piece costs a re-rendering view
    at the reply's end."""
    try:
        from rich.console import Console
        from rich.markdown import Markdown
    except ImportError:
        return None
    console = Console(file=io.StringIO(), width=100, force_terminal=True)
    start = time.perf_counter()
    console.print(Markdown(text))
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=600)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, int]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for mode in (("off", "on") if round_ % 2 == 0 else ("on", "off")):  # (alternated: drift shared)
                results[mode].append(one_reply(mode, args.tokens, Path(folder)))
                print(f"round {round_ + 1} markdown {mode}: {results[mode][-1][0]:.1f} tok/s, first word "
                      f"{results[mode][-1][1] * 1000:.0f} ms, {results[mode][-1][2]} tokens", flush=True)
    speed = {mode: statistics.median(r[0] for r in rows) for mode, rows in results.items()}
    first = {mode: statistics.median(r[1] for r in rows) * 1000 for mode, rows in results.items()}
    print(f"\nthrough a pty ({args.rounds} rounds, medians): markdown off {speed['off']:.1f} tok/s, "
          f"on {speed['on']:.1f} tok/s: on/off = {speed['on'] / speed['off']:.3f}")
    print(f"first word on screen: off {first['off']:.0f} ms, on {first['on']:.0f} ms")
    text = long_reply()
    per_piece, written = view_alone(text)
    print(f"\nthe view alone, a 2,000-line reply ({len(text):,} characters) in 4-character pieces: "
          f"{per_piece:.1f} µs a piece, {written:.2f} bytes written per byte of reply")
    token_us = 1e6 / speed["off"]
    print(f"the view's cost per piece is {per_piece / token_us * 100:.2f} % of a token's generation time at the "
          f"speed above ({token_us / 1000:.1f} ms): the ratio it sets is {token_us / (token_us + per_piece):.4f}")
    rich_ms = rich_per_piece(text)
    if rich_ms is None:
        print("rich is not installed: no figure for re-rendering with rich's Markdown")
    else:
        print(f"rich's Markdown, the same reply rendered once: {rich_ms:.0f} ms — a view that renders the reply "
              f"so far on every piece spends that much per token by the reply's end "
              f"({rich_ms * 1000 / per_piece:.0f}x this view's cost per piece)")


if __name__ == "__main__":
    main()
