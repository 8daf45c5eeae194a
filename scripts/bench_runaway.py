"""Runaway replies: how often the default model loops, and what each candidate setting costs normal replies.

    python scripts/bench_runaway.py [--n 512] [--seeds 1] [--first-seed 0] [--np 4] [--only NAME] [--guard N] [--keep DIR]
    python scripts/bench_runaway.py --judge DIR/SETTING.jsonl --guard N   # saved replies, another guard limit

The corpus is scripts/data/runaway_prompts.jsonl: 102 prompts a new user writes (stories, lists, code,
tables, poems with refrains, JSON arrays, explanations). Each setting runs all of them through
``rml-chat --batch`` on the default model (SmolLM2-135M-Instruct), same seeds for every setting, and each
reply is judged:

- **runaway**: the reply ran to ``-n`` and its tail is one span repeated, as the repeat guard sees a loop
  (rml_chat/core/loop_guard.py: a period of 1 to 200 characters over the last 300 or more); its *loop
  tokens* are the repeated tail's length in tokens;
- **harm** to normal replies: a JSON prompt's reply that holds no valid JSON value, a refrain prompt's reply
  in which no line comes back, and the replies that ended early (a stop within 20 tokens).

The table (Markdown) goes to stdout; docs/performance.md holds the last run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from rml_chat.core.loop_guard import CHECK_EVERY, LoopGuard

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "scripts" / "data" / "runaway_prompts.jsonl"
SETTINGS = {"llama.cpp's defaults (off)": [], "repeat penalty 1.1 (ollama's)": ["--repeat-penalty", "1.1"],
            "DRY 0.8": ["--dry-multiplier", "0.8"],
            "DRY 0.8 + repeat penalty 1.05": ["--dry-multiplier", "0.8", "--repeat-penalty", "1.05"]}
GUARD = 256  # the repeat guard's limit, simulated on each setting's replies (rml_chat/core/loop_guard.py)


def _json_value(text: str) -> bool:
    for match in re.finditer(r"[\[{]", text):
        try:
            json.JSONDecoder().raw_decode(text[match.start():])
            return True
        except ValueError:
            continue
    return False


def _refrain(text: str) -> bool:
    lines = [line.strip().strip(",.!").lower() for line in text.splitlines() if len(line.strip()) > 8]
    return len(lines) != len(set(lines))


def run_setting(flags: list[str], prompts: list[dict], n: int, seed: int, parallel: int) -> list[dict]:
    lines = "".join(json.dumps({"id": i, "prompt": p["prompt"]}) + "\n" for i, p in enumerate(prompts))
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--batch", "-", "-np", str(parallel), "-n", str(n),
                           "--seed", str(seed), "-c", str(max(4096, parallel * (n + 128))), "--repeat-guard", "0",
                           *flags],
                          input=lines, capture_output=True, text=True, timeout=7200)
    out = [json.loads(line) for line in done.stdout.splitlines()]
    if len(out) != len(prompts):
        raise SystemExit(f"bench_runaway: {len(out)} of {len(prompts)} lines answered: {done.stderr[-500:]}")
    return out


def guard_trip(text: str, count: int, limit: int) -> int:
    """Where the repeat guard would have ended this reply, in tokens (0: it would not have): the guard
    looks every CHECK_EVERY tokens at the text so far, as it does while the reply streams."""
    guard = LoopGuard(limit)
    for tokens in range(CHECK_EVERY, count + 1, CHECK_EVERY):
        if guard.tripped(text[:len(text) * tokens // count], tokens):
            return tokens
    return 0


def judge(prompts: list[dict], replies: list[dict], guard: int = GUARD) -> dict:
    runaways, loop_tokens, bad_json, lost_refrain, early, tokens = 0, [], 0, 0, 0, 0
    guarded_runaways, guarded_loop, false_stops = 0, [], 0
    for prompt, reply in zip(prompts, replies):
        text, count = reply.get("reply", ""), reply.get("completion_tokens", 0)
        tokens += count
        looped = LoopGuard(guard).loop_tokens(text, count) if reply.get("stop_reason") == "length" else 0
        trip = guard_trip(text, count, guard) if count else 0
        if looped:
            runaways += 1
            loop_tokens.append(looped)
            if trip:  # the guard ends it: what it cost is the loop up to the trip
                guarded_loop.append(loop_tokens[-1] - (count - trip))
            else:
                guarded_runaways += 1
                guarded_loop.append(loop_tokens[-1])
        elif trip:
            false_stops += 1
        if prompt["kind"] == "json" and not _json_value(text):
            bad_json += 1
        if prompt["kind"] == "refrain" and not _refrain(text):
            lost_refrain += 1
        if reply.get("stop_reason") == "stop" and count < 20:
            early += 1
    return {"runaways": runaways, "loop_tokens_max": max(loop_tokens, default=0),
            "loop_tokens_total": sum(loop_tokens), "bad_json": bad_json, "lost_refrain": lost_refrain,
            "early": early, "tokens": tokens, "guarded_runaways": guarded_runaways,
            "guarded_loop_max": max(guarded_loop, default=0), "false_stops": false_stops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first-seed", type=int, default=0, help="the seeds run are FIRST … FIRST + SEEDS - 1")
    parser.add_argument("--np", type=int, default=4)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--out")
    parser.add_argument("--guard", type=int, default=GUARD)
    parser.add_argument("--keep", help="a folder for each setting's replies (JSONL), to judge again with --judge")
    parser.add_argument("--judge", help="judge the replies saved in this file, without generating")
    args = parser.parse_args()
    prompts = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
    if args.judge:
        replies = [json.loads(line) for line in Path(args.judge).read_text().splitlines()]
        print(json.dumps({"replies": args.judge, "guard": args.guard, **judge(prompts, replies, args.guard)}))
        return
    kinds = {k: sum(p["kind"] == k for p in prompts) for k in dict.fromkeys(p["kind"] for p in prompts)}
    print(f"{len(prompts)} prompts ({', '.join(f'{n} {k}' for k, n in kinds.items())}), -n {args.n}, "
          f"{args.seeds} seed(s), --batch -np {args.np}, SmolLM2-135M-Instruct\n")
    print(f"| setting | runaways | loop tokens (worst / all) | with the repeat guard at {args.guard}: runaways left, worst "
          "loop, false stops | JSON not valid | refrain lost | ended within 20 tokens | tokens | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    results = {}
    for name, flags in SETTINGS.items():
        if args.only and name not in args.only:
            continue
        started, total = time.perf_counter(), {}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            replies = run_setting(flags, prompts, args.n, seed, args.np)
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
                (Path(args.keep) / f"{slug}-seed{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replies))
            verdict = judge(prompts, replies, args.guard)
            total = {k: (max if k.endswith("_max") else sum)((total.get(k, 0), v)) for k, v in verdict.items()}
        seconds = time.perf_counter() - started
        results[name] = {**total, "seconds": round(seconds, 1)}
        print(f"| {name} | {total['runaways']} | {total['loop_tokens_max']} / {total['loop_tokens_total']} | "
              f"{total['guarded_runaways']}, {total['guarded_loop_max']}, {total['false_stops']} | {total['bad_json']} | "
              f"{total['lost_refrain']} | {total['early']} | {total['tokens']} | {seconds:.0f} |",
              flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
