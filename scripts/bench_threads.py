"""Generation on a busy machine (not a test): tokens/s with 0, 1 and 2 ``yes > /dev/null`` running, for
rml-chat's default thread count (engines/thread_choice.py), ``-t 1`` and ``-t N`` (every core), against
llama.cpp's own ``llama-bench`` at its default count (llama-cli's: the physical cores) and at ``-t 1``,
all in one run, on SmolLM2 and Gemma 3:

    python scripts/bench_threads.py [--tokens 96] [--runs 2] [--loads 0,1,2]

rml-chat runs are whole processes (``-p`` with ``--json``; its ``tokens_per_s`` is the decode after the
first token, sampling included); llama-bench's ``tg`` figure is decode alone. The ratios that carry over
are the default's against the best fixed count under the same load, and against the idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_test_data as fetch  # noqa: E402
import llama_build  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def busy(processes: int):
    """``processes`` copies of ``yes > /dev/null``, ended after."""
    running = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(processes)]
    try:
        yield
    finally:
        for process in running:
            process.kill()
            process.wait()


def ours(weights: Path, tokens: int, *flags: str) -> tuple[float, dict]:
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(weights), "-p", "Write a long story about a cat.",
                           "-n", str(tokens), "--temp", "0", "--json", "--ignore-eos", "on", "--repeat-guard", "0",
                           "--prompt-cache", "off", *flags], capture_output=True, text=True, cwd=ROOT, check=True)
    report = json.loads(done.stdout)
    return report["timings"]["tokens_per_s"], report["threads"]


def llama_bench(weights: Path, tokens: int, *flags: str) -> float:
    done = subprocess.run([str(llama_build.binary("llama-bench", "build-bench")), "-m", str(weights), "-p", "0",
                           "-n", str(tokens), "-r", "1", "-o", "json", *flags], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)[0]["avg_ts"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--loads", default="0,1,2")
    args = parser.parse_args()
    llama_build.bench_tools(lambda line: print(line, file=sys.stderr))
    cores = len(os.sched_getaffinity(0))
    loads = [int(n) for n in args.loads.split(",")]
    print(f"{cores} cores; tokens/s, median of {args.runs} runs of {args.tokens} tokens, alternating")
    for name in ("smollm2", "gemma3"):
        weights = fetch.smollm_path() if name == "smollm2" else fetch.gemma_path()
        print(f"\n{name} ({weights.name})")
        print(f"| yes running | rml-chat default | threads chosen | -t 1 | -t {cores} | llama-bench default "
              "| llama-bench -t 1 | default / best fixed | default / llama-bench default | default / idle default |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        idle = None
        for load in loads:
            runs: dict[str, list[float]] = {"default": [], "t1": [], "tN": [], "lb": [], "lb1": []}
            chosen = []
            with busy(load):
                for _ in range(args.runs):
                    speed, threads = ours(weights, args.tokens)
                    runs["default"].append(speed)
                    chosen.append(threads["generation"])
                    runs["t1"].append(ours(weights, args.tokens, "-t", "1")[0])
                    runs["tN"].append(ours(weights, args.tokens, "-t", str(cores))[0])
                    runs["lb"].append(llama_bench(weights, args.tokens))
                    runs["lb1"].append(llama_bench(weights, args.tokens, "-t", "1"))
            m = {key: statistics.median(values) for key, values in runs.items()}
            idle = idle or m["default"]
            print(f"| {load} | {m['default']:.1f} | {'/'.join(map(str, chosen))} | {m['t1']:.1f} | {m['tN']:.1f} "
                  f"| {m['lb']:.1f} | {m['lb1']:.1f} | {m['default'] / max(m['t1'], m['tN']):.2f} "
                  f"| {m['default'] / m['lb']:.2f} | {m['default'] / idle:.2f} |", flush=True)


if __name__ == "__main__":
    main()
