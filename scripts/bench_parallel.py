"""The ``parallel`` section of scripts/bench_chat.py (not a test): 64 prompts at ``-n 32`` through
``--batch`` one line at a time, with ``-np 4``, and on llama-server ``-np 4`` with the same lines, whole
processes (the prompt cache off): tokens/s of each and their ratios, and how many greedy replies differ.
Then the ceiling: llama.cpp's own ``llama_decode`` over one sequence a step against four, no sampling and
no Python between (what batching alone can give on this machine).

The ``parallel-draft`` section: six prompts at ``-n 120`` through ``--batch -np 3``, greedy, without a draft
and with ``-md`` (the model drafting for itself unless another draft is given), against llama-server with
the same ``-np`` and ``-md`` (its slots through ``--server``), whole processes in alternating rounds:
median tokens/s and the drafts taken; with ``--tree DIR``, another checkout's ``-md`` run beside ours.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
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


DRAFT_PROMPTS = ("List the days of the week, then list them again in the same order.",
                 "Write a short story about a cat who counts stars.",
                 "What is the capital of France? Explain in detail.", "List the months of the year.",
                 "Count from one to twenty in words.", "Describe a rainy day in a city.")


def parallel_draft(path: str, draft: str | None = None, rounds: int = 3, trees: Sequence[Path] = (),
                   slots: int = 3) -> None:
    """``--batch -np`` with a draft model beside llama-server's (module docstring)."""
    draft = draft or path
    lines = "\n".join(json.dumps({"id": i, "prompt": prompt}) for i, prompt in enumerate(DRAFT_PROMPTS)) + "\n"
    here = Path(__file__).resolve().parent.parent
    servers = {label: cluster.start(Path(path), workers=0, ctx=4096 * slots, threads=os.cpu_count() or 1, slots=slots,
                                    extra=["-fa", "off", *extra])
               for label, extra in (("llama-server", []), ("llama-server -md", ["-md", draft, "--spec-type", "draft-simple"]))}
    runs = [("rml-chat", here, []), ("rml-chat -md", here, ["-md", draft]),
            *((f"{tree} -md", tree, ["-md", draft]) for tree in trees),
            *((label, here, ["--server", server.url]) for label, server in servers.items())]
    figures: dict[str, list[float]] = {}
    taken: dict[str, tuple[int, int]] = {}
    try:
        for _ in range(rounds):
            for label, tree, flags in runs:
                env = {**os.environ, "RML_CHAT_PROMPT_CACHE": "off", "PYTHONPATH": str(tree)}
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "rml_chat", path, "--batch", "-", "--temp", "0", "-n", "120",
                                       "-np", str(slots), "-fa", "off", *flags], input=lines.encode(), capture_output=True,
                                      env=env, cwd=tree, check=True)
                wall = time.perf_counter() - start
                out = [json.loads(line) for line in done.stdout.decode().splitlines()]
                figures.setdefault(label, []).append(sum(o["completion_tokens"] for o in out) / wall)
                speculative = [o.get("speculative", {}) for o in out]
                taken[label] = (sum(s.get("drafted", 0) for s in speculative), sum(s.get("accepted", 0) for s in speculative))
    finally:
        for server in servers.values():
            server.stop()
    served = statistics.median(figures["llama-server -md"])
    print(f"--batch -np {slots}, {len(DRAFT_PROMPTS)} prompts, -n 120, draft model {Path(draft).name}, {rounds} rounds "
          "(median tokens/s, whole processes; llama-server's slots through --server):")
    for label, values in figures.items():
        drafted, accepted = taken[label]
        told = f", {accepted}/{drafted} drafts taken" if drafted else ""
        print(f"  {label:24s} {statistics.median(values):6.1f} tok/s ({', '.join(f'{v:.1f}' for v in values)}); "
              f"x llama-server -md {statistics.median(values) / served:.2f}{told}")
