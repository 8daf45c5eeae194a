"""Speculative decoding, side by side (not a test): three tasks (a rewrite of a 60-line code block with one
change, also measured up to the code's closing fence alone, a quote of a paragraph, an ordinary chat
question), each greedy, with speculation off and with
each of llama.cpp's n-gram types, in this process and on llama-server with the same ``--spec-type`` on the
same model and the same prompt ids, in turn, each row the median of ``--rounds`` runs. Prints generation
tokens/s (after the first token), the ratio to speculation off (over as many tokens, where a reply with
drafts parts from the one without and is shorter), the acceptance rate, and whether the reply is the one
written without drafts and the one llama-server wrote. Each n-gram type runs twice here: its drafts cut to
what pays on this machine (``--spec-draft-fit``, the default), and checked whole as llama-server checks them.
Then the drafters' own cost: each type replayed over the chat's reply, after its prompt and after 8,000
tokens of earlier chat, in microseconds a token and as a share of a token's time without drafts (what a
reply that drafts nothing can lose at most).

    python scripts/bench_speculative.py [MODEL.gguf] [--threads N] [--rounds N] [--ngl N] [--model-draft FILE]
                                        [--tasks rewrite,quote,chat] [--types ngram-mod,...]

On a GPU (``--ngl 99``, scripts/device_bench.sh): ``--model-draft`` adds llama.cpp's ``draft-simple`` with that
model (the model itself: every draft accepted, so what is left is the check's own cost), and a random-weight
model (random_model.py) repeats one token, which every n-gram type then drafts; the rewrite's "code alone" row
needs a model that writes the code, so it is left out where no closing fence comes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import cluster  # (scripts/ is on the path when this script runs)

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(ROOT / "tests"))

from rml_chat.core.model import load_model  # noqa: E402
from rml_chat.engines.base import Generation, Sampling  # noqa: E402
from rml_chat.engines.local import LocalEngine  # noqa: E402
from rml_chat.engines.runtime import LlamaModel  # noqa: E402
from rml_chat.engines.speculative import SPEC_DEFAULT, Speculation  # noqa: E402
from rml_chat.engines.thread_choice import ThreadChoice  # noqa: E402

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
#: a row of ours with --spec-draft-fit off, beside the row with the drafts cut to what pays here
WHOLE = ", checked whole"
TYPES: dict[str, tuple[Speculation, list[str]]] = {
         "ngram-simple": (Speculation("ngram-simple"), ["--spec-type", "ngram-simple"]),
         "ngram-map-k": (Speculation("ngram-map-k"), ["--spec-type", "ngram-map-k"]),
         "ngram-map-k4v": (Speculation("ngram-map-k4v"), ["--spec-type", "ngram-map-k4v"]),
         "ngram-mod (--spec-default)": (SPEC_DEFAULT, ["--spec-default"]),
         "ngram-cache": (Speculation("ngram-cache"), ["--spec-type", "ngram-cache"])}


def ours(engine: LocalEngine, ids: list[int], n: int, stops: list[int], speculation: Speculation):
    engine.speculation = speculation
    engine.reset()
    gen = Generation()
    tokens = list(engine.generate(ids, Sampling(temp=0.0, max_tokens=n), stops, gen))
    rate = (len(tokens) - 1) / (gen.finished - gen.first_token_at) if len(tokens) > 1 else 0.0
    return tokens, rate, gen.accepted / gen.drafted if gen.drafted else 0.0


def server(served: cluster.Cluster, ids: list[int], n: int) -> tuple[list[int], float, float]:
    data = served.greedy(ids, n)
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


def drafting_cost(speculation: Speculation, prompt: list[int], reply: list[int]) -> float:
    """Seconds a token that the drafter of ``speculation`` spends drafting, replayed over ``reply`` after
    ``prompt`` as a reply's loop calls it (its drafts checked against ``reply``, as the model would)."""
    drafter = speculation.drafter()
    assert drafter is not None
    history = list(prompt)
    started = time.perf_counter()
    at = 0
    while at < len(reply):
        draft = drafter.draft(history, reply[at])
        history.append(reply[at])
        accepted = 0
        while accepted < len(draft) and at + 1 + accepted < len(reply) and draft[accepted] == reply[at + 1 + accepted]:
            accepted += 1
        drafter.accepted(len(draft), accepted)
        history.extend(reply[at + 1:at + 1 + accepted])
        at += 1 + accepted
    return (time.perf_counter() - started) / len(reply)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each row, ours and llama-server's in turn")
    parser.add_argument("--ngl", type=int, default=0, help="layers on the GPU, in both programs")
    parser.add_argument("--model-draft", type=Path, default=None, help="a draft model for draft-simple (-md)")
    parser.add_argument("--tasks", default=",".join(TASKS), help="which of the tasks, by name")
    parser.add_argument("--types", default=",".join(name.split()[0] for name in TYPES), help="which n-gram types")
    args = parser.parse_args()
    if args.model:
        path = args.model
    else:
        from conftest import model_path

        path = model_path("smollm2")
    model = load_model(str(path))
    on_gpu = ["-ngl", str(args.ngl)]
    types = {name: found for name, found in TYPES.items() if name.split()[0] in args.types.split(",")}
    engine = LocalEngine(path, n_ctx=4096, n_threads=args.threads, gpu=(args.ngl, "layer"))
    if args.model_draft:
        draft = LlamaModel(args.model_draft, n_ctx=4096, n_batch=512, threads=ThreadChoice(args.threads),
                           threads_batch=None, gpu=(args.ngl, "layer"))
        types["draft-simple (-md)"] = (Speculation("draft-simple", draft_model=draft),
                                       ["--spec-type", "draft-simple", "-md", str(args.model_draft), "-ngld", str(args.ngl)])
    stops = list(model.stop_ids)
    prompts = {task: model.encoder.encode(model.encoder.format([{"role": "user", "content": text}]))
               for task, (text, _) in TASKS.items()}
    budgets = {task: n for task, (_, n) in TASKS.items()}
    # the rewrite again, up to the code's closing fence as the model writes it without drafts: a small model
    # goes on after the code (SmolLM2 for 270 tokens), and whether a reply with drafts does too turns on a
    # near tie (docs/performance.md), so this row holds every type to the same text, the code itself
    rewritten = ours(engine, prompts["rewrite"], budgets["rewrite"], stops, Speculation())[0]
    closed = next((k for k in range(1, len(rewritten) + 1) if model.tokenizer.decode(rewritten[:k]).count("```") >= 2), 0)
    budgets["rewrite, the code alone"] = closed
    chosen, rewrite = args.tasks.split(","), prompts["rewrite"]
    prompts = {task: prompts[task.split(",")[0]] for task in ("rewrite", "rewrite, the code alone", "quote", "chat")
               if task.split(",")[0] in chosen and budgets[task]}
    print(f"model {path.name}, {args.threads} threads, greedy; generation tok/s (after the first token), the median "
          f"of {args.rounds} runs, ours and llama-server's in turn")
    print("the ceiling on this machine: " + ceiling(engine, rewrite))
    runs: dict[tuple[str, str], list[tuple[list[int], float, float]]] = {}
    # speculation off, tok/s over the first n tokens, by (program, task, n): a reply with drafts that parts
    # from the one without (a near tie taken the other way) and is shorter is compared with as many tokens
    # written without drafts (a longer context makes each token slower)
    offs: dict[tuple[str, str, int], list[float]] = {}
    plain = cluster.start(path, workers=0, ctx=4096, threads=args.threads, extra=on_gpu)

    def written(tokens: list[int]) -> int:  # (llama-server's tokens end with the stop token)
        return len([t for t in tokens if t not in stops])

    def undrafted(program: str, ids: list[int], n: int) -> float:
        return ours(engine, ids, n, stops, Speculation())[1] if program == "ours" else server(plain, ids, n)[1]

    def compared(program: str, task: str, ids: list[int], tokens: list[int], drafted: bool) -> None:
        """Speculation off's rate over as many tokens as ``tokens`` (the run of this round, where as long)."""
        off = runs[task, "off" if program == "ours" else "llama-server off"][-1]
        length = written(tokens)
        rate = off[1] if not drafted or length >= written(off[0]) else undrafted(program, ids, length)
        offs.setdefault((program, task, length), []).append(rate)

    try:
        for _ in range(args.rounds):
            for name, (speculation, flags) in [("off", (Speculation(), [])), *types.items()]:
                for task, ids in prompts.items():
                    n = budgets[task]
                    mine = ours(engine, ids, n, stops, speculation)
                    if flags:  # (a fresh server for each request: its drafters keep their state between them)
                        served = cluster.start(path, workers=0, ctx=4096, threads=args.threads, extra=[*on_gpu, *flags])
                        try:
                            theirs = server(served, ids, n)
                        finally:
                            served.stop()
                    else:
                        theirs = server(plain, ids, n)
                    runs.setdefault((task, name), []).append(mine)
                    runs.setdefault((task, f"llama-server {name}"), []).append(theirs)
                    compared("ours", task, ids, mine[0], bool(flags))
                    compared("llama-server", task, ids, theirs[0], bool(flags))
                    if flags and speculation.draft_model is None:  # (ours again, each draft checked whole)
                        whole = ours(engine, ids, n, stops, replace(speculation, draft_fit=False))
                        runs.setdefault((task, f"{name}{WHOLE}"), []).append(whole)
                        compared("ours", task, ids, whole[0], True)
    finally:
        plain.stop()
    engine.close()

    def median_off(program: str, task: str, tokens: list[int]) -> float:
        length = written(tokens)
        found = offs.get((program, task, length)) or offs[program, task, max(n for p, t, n in offs if (p, t) == (program, task))]
        return statistics.median(found)

    rows = {key: (found[0][0], statistics.median(run[1] for run in found), found[0][2]) for key, found in runs.items()}
    print("| task | speculation | rml-chat tok/s | x off | accepted | same reply as off | llama-server tok/s | x its off "
          "| accepted | same reply as llama-server's | ours ÷ llama-server |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for task in prompts:
        for name in ("off", *(row for kind in types for row in (kind, f"{kind}{WHOLE}") if (task, row) in rows)):
            tokens, rate, accepted = rows[task, name]
            s_tokens, s_rate, s_accepted = rows[task, f"llama-server {name.removesuffix(WHOLE)}"]
            off, server_off = median_off("ours", task, tokens), median_off("llama-server", task, s_tokens)
            same = "yes" if tokens == [t for t in s_tokens if t not in stops] else "no"
            print(f"| {task} | {name} | {rate:.1f} | {rate / off:.2f} | {accepted:.0%} | "
                  f"{'yes' if tokens == rows[task, 'off'][0] else 'no'} | {s_rate:.1f} | {s_rate / server_off:.2f} | "
                  f"{s_accepted:.0%} | {same} | {rate / s_rate:.2f} |" if s_rate else f"| {task} | {name} | {rate:.1f} | - |")
    print(f"(x off: against speculation off over as many tokens, where the reply with drafts is shorter; "
          f"'{WHOLE.strip(', ')}': --spec-draft-fit off, each draft checked whole as llama-server checks it)")
    # the cut against the whole drafts, each round's two runs (one after the other) as a pair: this machine's
    # speed drifts between rounds more than between two runs in a row
    print("\n| task | type | drafts cut ÷ checked whole, by round | median | accepted, cut / whole |")
    print("|---|---|---|---|---|")
    for task in prompts:
        for kind in types:
            if (task, f"{kind}{WHOLE}") not in runs:
                continue
            cut, whole = runs[task, kind], runs[task, f"{kind}{WHOLE}"]
            ratios = [a[1] / b[1] for a, b in zip(cut, whole) if b[1]]
            print(f"| {task} | {kind} | {', '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f} | "
                  f"{cut[0][2]:.0%} / {whole[0][2]:.0%} |")
    if "chat" not in prompts:
        return
    reply, off = rows["chat", "off"][0], rows["chat", "off"][1]
    earlier = model.tokenizer.encode((ROOT / "README.md").read_text() * 8)[:8000]
    print(f"\nthe drafters' own cost, replayed over the chat's reply ({len(reply)} tokens): microseconds a token, "
          f"and the share of a token without drafts ({1e6 / off:.0f} µs here)")
    print("| type | after the chat's prompt | after 8,000 tokens of chat |")
    print("|---|---|---|")
    for name, (speculation, _) in types.items():
        if speculation.draft_model is not None:
            continue
        costs = [min(drafting_cost(speculation, ids, reply) for _ in range(3))
                 for ids in (prompts["chat"], earlier + prompts["chat"])]
        print(f"| {name} | " + " | ".join(f"{cost * 1e6:.1f} ({cost * off:.2%})" for cost in costs) + " |")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
