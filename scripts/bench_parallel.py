"""The ``parallel`` section of scripts/bench_chat.py (not a test): 64 prompts at ``-n 32`` through
``--batch`` one line at a time, with ``-np 4``, and on llama-server ``-np 4`` with the same lines, whole
processes (the prompt cache off): tokens/s of each and their ratios, and how many greedy replies differ.
Then the ceiling: llama.cpp's own ``llama_decode`` over one sequence a step against four, no sampling and
no Python between (what batching alone can give on this machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cluster  # (scripts/ is on the path: bench_chat.py's folder, or this script's when run alone)


def parallel(path: str, n: int = 64, slots: int = 4) -> None:
    env = {**os.environ, "RML_CHAT_PROMPT_CACHE": "off"}
    lines = "\n".join(json.dumps({"id": i, "prompt": f"Write a sentence about the colour number {i}."})
                      for i in range(n)) + "\n"
    runs = {}
    server = cluster.start(Path(path), workers=0, ctx=2048 * slots, threads=os.cpu_count() or 1, slots=slots)
    try:
        for label, flags in (("sequential", []), (f"-np {slots}", ["-np", str(slots)]),
                             (f"llama-server -np {slots}", ["--server", server.url, "-np", str(slots)])):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "rml_chat", path, "--batch", "-", "--temp", "0", "-n", "32",
                                   "-sys", "Answer in one sentence.", *flags], input=lines.encode(),
                                  capture_output=True, env=env, check=True)
            wall = time.perf_counter() - start
            out = [json.loads(line) for line in done.stdout.decode().splitlines()]
            runs[label] = (wall, out, sum(o["completion_tokens"] for o in out))
    finally:
        server.stop()
    (w1, seq, t1), (w2, par, t2), (w3, _, t3) = runs.values()
    differ = sum(a["reply"] != b["reply"] for a, b in zip(seq, par))
    print(f"parallel batch ({n} prompts, -n 32, whole processes): sequential {t1 / w1:.1f} tok/s ({w1:.1f} s), "
          f"-np {slots} {t2 / w2:.1f} tok/s ({w2:.1f} s), the same lines on llama-server -np {slots} "
          f"{t3 / w3:.1f} tok/s ({w3:.1f} s); -np over sequential {(t2 / w2) / (t1 / w1):.2f}, over llama-server "
          f"{(t2 / w2) / (t3 / w3):.2f}; greedy replies that differ: {differ} of {n}")
    one, several = (decode_step_tokens_per_s(Path(path), k) for k in (1, slots))
    print(f"llama.cpp's own decode step (no sampling, no Python between): 1 sequence {one:.1f} tok/s, {slots} "
          f"sequences {several:.1f} tok/s, ratio {several / one:.2f}: what batching alone can give here")


def decode_step_tokens_per_s(weights: Path, sequences: int, steps: int = 32, prompt: int = 60) -> float:
    """Tokens/s of ``llama_decode`` over ``sequences`` sequences a step (one token each, after a
    ``prompt``-token prompt each), the ceiling of what ``-np`` can win over one line at a time."""
    from rml_chat.engines.runtime import LlamaModel, llama_log
    from rml_chat.engines.thread_choice import ThreadChoice

    llama_log()  # llama.cpp's chatter caught
    llama = LlamaModel(weights, n_ctx=4096, n_batch=512, threads=ThreadChoice(os.cpu_count() or 1), threads_batch=None,
                       gpu=(0, "layer"), n_seq=sequences + 1)
    try:
        for seq in range(1, sequences + 1):
            llama.decode_seqs(range(100, 100 + prompt), range(prompt), [seq] * prompt, [False] * prompt)
        start = time.perf_counter()
        for step in range(steps):
            llama.decode_seqs([200 + step] * sequences, [prompt + step] * sequences, range(1, sequences + 1),
                              [True] * sequences)
        return sequences * steps / (time.perf_counter() - start)
    finally:
        llama.close()
