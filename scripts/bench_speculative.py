"""Speculative decoding, side by side (not a test): three tasks (a rewrite of a 60-line code block with one
change, a quote of a paragraph, an ordinary chat question), each greedy, with speculation off and with
each n-gram type, in this process and on llama-server with the same ``--spec-type`` on the same model and
the same prompt ids. Prints generation tokens/s (after the first token), the ratio to speculation off,
the acceptance rate, and whether the reply is the one written without drafts.

    python scripts/bench_speculative.py [MODEL.gguf] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

import cluster  # (scripts/ is on the path when this script runs)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from rml_chat.core.model import load_model  # noqa: E402
from rml_chat.engines.base import Generation, Sampling  # noqa: E402
from rml_chat.engines.local import LocalEngine  # noqa: E402
from rml_chat.engines.speculative import SPEC_DEFAULT, Speculation  # noqa: E402

CODE = "\n".join(
    line for i in range(15) for line in (
        f"def step_{i}(values, total):", "    for value in values:", f"        total += value * {i + 1}",
        "    return total"))
PARAGRAPH = ("The lighthouse stood at the end of the long stone pier, and every evening the keeper climbed its "
             "ninety-one steps to light the lamp. Ships that passed in the night saw the beam sweep across the water "
             "once every twelve seconds, and sailors said that as long as the light turned, the harbour was safe. ")
TASKS = {
    "rewrite": (f"Here is some code:\n```python\n{CODE}\n```\nRepeat the whole code exactly, but rename the "
                "parameter `total` to `acc` everywhere.", 700),
    "quote": (f"{PARAGRAPH * 3}\nQuote the text above exactly, word for word.", 400),
    "chat": ("Give me three tips for learning to cook, with a sentence on each.", 300),
}
TYPES = {"ngram-simple": (Speculation("ngram-simple"), ["--spec-type", "ngram-simple"]),
         "ngram-mod (--spec-default)": (SPEC_DEFAULT, ["--spec-default"])}


def ours(engine: LocalEngine, ids: list[int], n: int, stops: list[int], speculation: Speculation):
    engine.speculation = speculation
    engine.reset()
    gen = Generation()
    tokens = list(engine.generate(ids, Sampling(temp=0.0, max_tokens=n), stops, gen))
    rate = (len(tokens) - 1) / (gen.finished - gen.first_token_at) if len(tokens) > 1 else 0.0
    return tokens, rate, gen.accepted / gen.drafted if gen.drafted else 0.0


def server(url: str, ids: list[int], n: int) -> tuple[list[int], float, float]:
    body = {"prompt": ids, "n_predict": n, "temperature": 0, "cache_prompt": False, "return_tokens": True}
    request = urllib.request.Request(f"{url}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        data = json.loads(answer.read())
    timings = data.get("timings", {})
    drafted, accepted = timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)
    return data.get("tokens", []), timings.get("predicted_per_second", 0.0), accepted / drafted if drafted else 0.0


def ceiling(engine: LocalEngine, ids: list[int]) -> str:
    """What a draft the model accepts whole can give here: tokens/s of one batch of ``k + 1`` positions
    (logits for each, sampled greedily) against one token a step, no Python between but the calls."""
    from rml_chat.engines.sampler_chain import stages

    llama = engine._llama
    chain = llama.sampler(stages(Sampling(temp=0.0)))
    rates = {}
    try:
        for k in (0, 4, 8, 16, 48):
            engine.reset()
            llama.eval(ids[:-49])
            started = time.perf_counter()
            for _ in range(5):
                llama.keep(len(ids) - 49)
                llama.eval(ids[-49:][:k + 1], every=True)
                for i in range(k + 1):
                    llama.sample(chain, i)
            rates[k] = 5 * (k + 1) / (time.perf_counter() - started)
    finally:
        chain.close()
    return ", ".join(f"a draft of {k} accepted whole {rates[k] / rates[0]:.2f}x" for k in rates if k)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?", default=None)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from conftest import model_path

    path = Path(args.model) if args.model else model_path("smollm2")
    model = load_model(str(path))
    stops = list(model.stop_ids)
    prompts = {task: model.encoder.encode(model.encoder.format([{"role": "user", "content": text}]))
               for task, (text, _) in TASKS.items()}
    engine = LocalEngine(path, n_ctx=4096, n_threads=args.threads)
    print(f"model {path.name}, {args.threads} threads, greedy; generation tok/s (after the first token)")
    rows: dict[tuple[str, str], tuple[list[int], float, float]] = {}
    for task, ids in prompts.items():
        n = TASKS[task][1]
        rows[task, "off"] = ours(engine, ids, n, stops, Speculation())
        for name, (speculation, _) in TYPES.items():
            rows[task, name] = ours(engine, ids, n, stops, speculation)
    print("the ceiling on this machine: " + ceiling(engine, prompts["rewrite"]))
    engine.close()
    for name, (_, flags) in [("off", ([], [])), *TYPES.items()]:
        served = cluster.start(path, workers=0, ctx=4096, threads=args.threads, extra=flags)
        try:
            for task, ids in prompts.items():
                rows[task, f"llama-server {name}"] = server(served.url, ids, TASKS[task][1])
        finally:
            served.stop()
    print("| task | speculation | rml-chat tok/s | x off | accepted | same reply | llama-server tok/s | x its off "
          "| accepted | ours ÷ llama-server |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for task in TASKS:
        off, server_off = rows[task, "off"][1], rows[task, "llama-server off"][1]
        for name in ("off", *TYPES):
            tokens, rate, accepted = rows[task, name]
            s_tokens, s_rate, s_accepted = rows[task, f"llama-server {name}"]
            print(f"| {task} | {name} | {rate:.1f} | {rate / off:.2f} | {accepted:.0%} | "
                  f"{'yes' if tokens == rows[task, 'off'][0] else 'no'} | {s_rate:.1f} | {s_rate / server_off:.2f} | "
                  f"{s_accepted:.0%} | {rate / s_rate:.2f} |" if s_rate else f"| {task} | {name} | {rate:.1f} | - |")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
