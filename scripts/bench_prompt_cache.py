"""The ``prompt-cache`` section of scripts/bench_chat.py (not a test): a 2,000-token system prompt with a
different short question each run, in separate ``-p`` processes on SmolLM2, the prompt cache in a fresh
folder. Per run: launch to first token (process start to the first byte of its ``--json -n 1`` output,
which is written before the run keeps its state) and the prompt tokens evaluated; the figure is each later
run's time over the first run's. Then the same runs with ``--prompt-cache off``, for the control. And where
the line of "worth restoring" lies: restoring a kept state of N tokens against evaluating them, in one
process, for N from 16 to 2,048.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSTEM = " ".join(["The archive holds the records of ships, ports and cargo from many years, kept by the clerks."] * 110)
QUESTIONS = ["Name a ship.", "Name a port.", "Name a cargo.", "Name a clerk.", "Name a year.", "Name a sea."]


def _run(model: str, folder: Path, question: str, *flags: str) -> tuple[float, dict]:
    env = {**os.environ, "RML_CHAT_PROMPT_CACHE": str(folder)}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rml_chat", model, "-sys", SYSTEM, "-p", question, "-n", "1",
                             "--temp", "0", "--json", *flags], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env)
    first = proc.stdout.read(1)
    spent = time.perf_counter() - started
    report = json.loads(first + proc.stdout.read())
    proc.wait()
    return spent, report


def cross_runs(model: str) -> None:
    for flags in ((), ("--prompt-cache", "off")):
        with tempfile.TemporaryDirectory() as folder:
            runs = [_run(model, Path(folder), q, *flags) for q in QUESTIONS]
        first, later = runs[0][0], [t for t, _ in runs[1:]]
        label = "prompt cache on " if not flags else "prompt cache off"
        print(f"{label}: run 1 {first:.2f} s ({runs[0][1]['prompt_tokens_evaluated']} evaluated of "
              f"{runs[0][1]['prompt_tokens']}); runs 2-{len(runs)} median {statistics.median(later):.2f} s "
              f"(evaluated {[r['prompt_tokens_evaluated'] for _, r in runs[1:]]}); ratio "
              f"{statistics.median(later) / first:.3f}")


def restore_against_evaluate(model: str) -> None:
    """In one process: keep a state of N ids, then time restoring it against evaluating the N ids anew
    (the thresholds lifted, to see both sides of the line)."""
    from rml_chat.core.model import load_model
    from rml_chat.engines import kv_cache, prompt_cache
    from rml_chat.engines.base import Generation
    from rml_chat.engines.local import LocalEngine

    prompt_cache.WORTH_RESTORING = 1
    loaded = load_model(model)
    ids = loaded.tokenizer.encode(SYSTEM * 2)
    engine = LocalEngine(loaded.weights, n_ctx=4096, n_threads=os.cpu_count() or 2)
    try:
        for n in (16, 32, 64, 128, 256, 512, 1024, 2048):
            with tempfile.TemporaryDirectory() as folder:
                cache = prompt_cache.PromptCache(Path(folder))
                engine.reset()
                started = time.perf_counter()
                engine.evaluate(ids[:n], Generation())
                evaluate = time.perf_counter() - started
                started = time.perf_counter()
                cache.keep(kv_cache.stamp_of(loaded.weights, engine.n_ctx), engine.cached_ids(), engine._llama.state())
                keep = time.perf_counter() - started
                engine.use_prompt_cache(cache)
                engine.reset()
                started = time.perf_counter()
                engine.evaluate(ids[:n], Generation())
                restore = time.perf_counter() - started
                engine.use_prompt_cache(None)
                assert cache.restored_from is not None
            print(f"  {n:5} tokens: evaluate {evaluate * 1000:7.1f} ms, restore {restore * 1000:6.1f} ms, "
                  f"keep {keep * 1000:6.1f} ms")
    finally:
        engine.close()


def prompt_cache(model: str) -> None:
    cross_runs(model)
    print("restoring a kept state against evaluating its ids (one process):")
    restore_against_evaluate(model)
