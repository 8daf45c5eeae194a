"""Benchmark the chat loop against llama-cpp-python's own create_completion (not a test).

    python scripts/bench_chat.py [MODEL.gguf] [--tokens 128] [--turns 10] [--repeat 3]

1. Generation speed: the same prompt, greedy, the same number of tokens; our loop (our ids into
   ``Llama.generate``, our streaming) vs ``create_completion(stream=True)`` on the same Llama object.
   Reported as tokens/s and the ratio ours/theirs (best of --repeat).
2. Turn latency: a conversation grown turn by turn; time to first token of each turn, measured from the
   user's message to the first streamed token (formatting + our encoding + evaluation of new ids).
   Reported as turn 10 / turn 1.
3. Formatting + encoding alone: the prompt of a 50-exchange conversation written and encoded turn by turn
   (what a turn costs before llama.cpp sees it), µs per turn over the last 10 turns. With ``--tree DIR``
   (repeatable) the same runs for other checkouts too, in alternating subprocesses: before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rml_chat.engine import Engine, Sampling  # noqa: E402
from rml_chat.model import load_model  # noqa: E402
from rml_chat.session import ChatSession  # noqa: E402
from tokenizer.chat import segments_text  # noqa: E402

STORY = "Write a long story about a dragon who learns to cook, with many details."


def ours_tokens_per_s(session: ChatSession, n: int) -> tuple[float, int]:
    session.engine._llm.reset()
    session.conversation.messages.clear()
    session.sampling = Sampling(temp=0.0, seed=0, max_tokens=n)
    session.stop_strings = ()
    result = session.turn(STORY, lambda _: None, lambda _: None)
    return result.generation.tokens_per_s, len(result.generation.tokens)


def theirs_tokens_per_s(session: ChatSession, n: int) -> tuple[float, int]:
    llm = session.engine._llm
    llm.reset()
    prompt = segments_text(session.model.encoder.format([{"role": "user", "content": STORY}]))
    first = last = 0.0
    count = 0
    for _chunk in llm.create_completion(prompt, max_tokens=n, temperature=0.0, stream=True):
        now = time.perf_counter()
        first = first or now
        last = now
        count += 1
    return ((count - 1) / (last - first) if count > 1 else 0.0), count


def turn_latencies(session: ChatSession, turns: int) -> list[float]:
    session.engine._llm.reset()
    session.conversation.messages.clear()
    session.sampling = Sampling(temp=0.0, seed=0, max_tokens=24)
    out = []
    for i in range(turns):
        start = time.perf_counter()
        first: list[float] = []

        def emit(chunk: str, first=first) -> None:
            if chunk and not first:
                first.append(time.perf_counter())

        session.turn(f"Question {i + 1}: tell me one short fact about the number {i + 7}.", emit, lambda _: None)
        out.append((first[0] if first else time.perf_counter()) - start)
    return out


_FORMAT_ENCODE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from rml_chat.model import load_model
model = load_model(sys.argv[2] or None)
encoder = model.encoder
messages = []
per_turn = []
for turn in range(50):
    messages.append({"role": "user", "content": f"Question {turn}: what is {turn} times {turn + 3}? Explain briefly."})
    start = time.perf_counter()
    encoder.encode(encoder.format(messages))
    per_turn.append(time.perf_counter() - start)
    messages.append({"role": "assistant", "content": f"{turn} times {turn + 3} is {turn * (turn + 3)}. " * 3})
print(json.dumps(per_turn))
"""


def format_encode_us(tree: Path, model: str | None, rounds: int) -> float:
    """µs per turn over turns 41-50 (best of ``rounds`` fresh processes) for the checkout at ``tree``."""
    best = float("inf")
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", _FORMAT_ENCODE, str(tree), model or ""], capture_output=True,
                             text=True, check=True).stdout
        per_turn = json.loads(out)
        best = min(best, sum(per_turn[-10:]) / 10 * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], help="another checkout to time formatting in")
    parser.add_argument("--format-only", action="store_true", help="only part 3")
    args = parser.parse_args()
    trees = [Path(__file__).resolve().parent.parent, *map(Path, args.tree)]
    times: dict[Path, list[float]] = {tree: [] for tree in trees}
    for _ in range(args.repeat):  # alternating, so that the machine's drift hits every tree alike
        for tree in trees:
            times[tree].append(format_encode_us(tree, args.model, 1))
    for tree in trees:
        print(f"format+encode per turn (turns 41-50, best of {args.repeat}): {min(times[tree]):8.1f} µs  {tree}")
    if len(trees) > 1:
        print(f"ratio this checkout / {trees[1]}: {min(times[trees[0]]) / min(times[trees[1]]):.3f}")
    if args.format_only:
        return
    model = load_model(args.model)
    engine = Engine(model.weights, n_ctx=4096, n_threads=os.cpu_count())
    session = ChatSession(model, engine, Sampling())
    print(f"model {model.name}, {os.cpu_count()} threads, {args.tokens} tokens, best of {args.repeat}")
    ours = max(ours_tokens_per_s(session, args.tokens) for _ in range(args.repeat))
    theirs = max(theirs_tokens_per_s(session, args.tokens) for _ in range(args.repeat))
    print(f"generation   ours {ours[0]:7.1f} tok/s ({ours[1]} tokens)   create_completion {theirs[0]:7.1f} tok/s "
          f"({theirs[1]} tokens)   ratio {ours[0] / theirs[0]:.3f}")
    runs = [turn_latencies(session, args.turns) for _ in range(args.repeat)]
    best = [min(r[i] for r in runs) for i in range(args.turns)]
    print("TTFT per turn (ms): " + " ".join(f"{t * 1000:.0f}" for t in best))
    print(f"TTFT turn {args.turns} / turn 1: {best[-1] / best[0]:.2f}  "
          f"(turn 1 {best[0] * 1000:.0f} ms, turn {args.turns} {best[-1] * 1000:.0f} ms, "
          f"final prompt {session.last.generation.prompt_tokens} tokens)")
    engine.close()


if __name__ == "__main__":
    main()
