"""Benchmark the chat loop against llama-cpp-python's own create_completion (not a test).

    python scripts/bench_chat.py [MODEL.gguf] [--tokens 128] [--turns 10] [--repeat 3]

1. Generation speed: the same prompt, greedy, the same number of tokens; our loop (our ids into
   ``Llama.generate``, our streaming) vs ``create_completion(stream=True)`` on the same Llama object.
   Reported as tokens/s and the ratio ours/theirs (best of --repeat).
2. Turn latency: a conversation grown turn by turn; time to first token of each turn, measured from the
   user's message to the first streamed token (formatting + our encoding + evaluation of new ids).
   Reported as turn 10 / turn 1.
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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
