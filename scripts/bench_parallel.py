"""The ``parallel`` section of scripts/bench_chat.py (not a test): 64 prompts at ``-n 32`` through
``--batch`` one line at a time, with ``-np 4``, and on llama-server ``-np 4`` with the same lines, whole
processes (the prompt cache off): tokens/s of each and their ratios, and how many greedy replies differ.
Then the ceiling: llama.cpp's own ``llama_decode`` over one sequence a step against four, no sampling and
no Python between (what batching alone can give on this machine).

The ``parallel-draft`` section: six prompts at ``-n 120`` through ``--batch -np 3``, greedy, without a draft
and with ``-md`` (the model drafting for itself unless another draft is given), against llama-server with
the same ``-np`` and ``-md`` (its slots through ``--server``), whole processes in alternating rounds:
median tokens/s and the drafts taken; with ``--tree DIR``, another checkout's ``-md`` run beside ours.
The ``parallel-ngram`` section: twelve rewrites of code through ``--batch -np 4`` with n-gram drafts, cut to
what pays beside the other lines and checked whole (``parallel_ngram``).
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
    from rml_chat.engines.bindings import llama_log
    from rml_chat.engines.runtime import LlamaModel
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
#: the parallel-ngram section's lines: the rewrite of scripts/bench_speculative.py, each with its own name
RENAMES = ("acc", "sum", "result", "running", "tally", "out", "value_sum", "s", "agg", "carry", "store", "memo")
HERE = Path(__file__).resolve().parent.parent


def parallel_draft(path: str, draft: str | None = None, rounds: int = 3, trees: Sequence[Path] = (),
                   slots: int = 3) -> None:
    """``--batch -np`` with a draft model beside llama-server's (module docstring)."""
    draft = draft or path
    lines = [{"id": i, "prompt": prompt} for i, prompt in enumerate(DRAFT_PROMPTS)]
    servers = {label: cluster.start(Path(path), workers=0, ctx=4096 * slots, threads=os.cpu_count() or 1, slots=slots,
                                    extra=["-fa", "off", *extra])
               for label, extra in (("llama-server", []), ("llama-server -md", ["-md", draft, "--spec-type", "draft-simple"]))}
    runs = [("rml-chat", HERE, []), ("rml-chat -md", HERE, ["-md", draft]),
            *((f"{tree} -md", tree, ["-md", draft]) for tree in trees),
            *((label, HERE, ["--server", server.url]) for label, server in servers.items())]
    try:
        figures = _rounds(path, lines, runs, rounds, ["-np", str(slots), "-n", "120", "-fa", "off"])
    finally:
        for server in servers.values():
            server.stop()
    print(f"--batch -np {slots}, {len(lines)} prompts, -n 120, draft model {Path(draft).name}, {rounds} rounds "
          "(median tokens/s, whole processes; llama-server's slots through --server):")
    _report(figures, "llama-server -md")


def parallel_ngram(path: str, rounds: int = 3, trees: Sequence[Path] = (), slots: int = 4) -> None:
    """``--batch -np`` with n-gram drafts: twelve rewrites of code (each renaming another name), off and
    with ngram-simple and ``--spec-default``, each with its drafts cut to what pays and checked whole
    (``--spec-draft-fit off``); with ``--tree DIR``, that checkout's cut runs too. Replies part at near ties
    from run to run (a batch's numerics), so the figures are tokens/s of whole processes."""
    import bench_speculative

    text = bench_speculative.TASKS["rewrite"][0]
    lines = [{"id": i, "prompt": text.replace("`acc`", f"`{name}`")} for i, name in enumerate(RENAMES)]
    types = {"ngram-simple": ["--spec-type", "ngram-simple"], "--spec-default": ["--spec-default"]}
    runs = [("off", HERE, []),
            *((f"{name}{label}", tree, [*flags, *fit]) for name, flags in types.items()
              for label, tree, fit in ((", cut", HERE, []), (", checked whole", HERE, ["--spec-draft-fit", "off"]),
                                       *((f", cut, {tree}", tree, []) for tree in trees)))]
    figures = _rounds(path, lines, runs, rounds, ["-np", str(slots), "-n", "400", "-c", "8192"])
    print(f"--batch -np {slots}, {len(lines)} rewrites of code, -n 400, {rounds} rounds (median tokens/s, whole "
          "processes):")
    _report(figures, "off")


def _rounds(path: str, lines: list[dict], runs: Sequence[tuple[str, Path, list[str]]], rounds: int,
            flags: list[str]) -> dict[str, tuple[list[float], int, int]]:
    """Each run (a label, the checkout, its flags) ``rounds`` times in turn, greedy, ``--batch`` of ``lines``
    with ``flags``: its tokens/s each time, and its drafted and accepted tokens the last time."""
    given = "".join(json.dumps(line) + "\n" for line in lines).encode()
    figures: dict[str, tuple[list[float], int, int]] = {}
    for _ in range(rounds):
        for label, tree, own in runs:
            env = {**os.environ, "RML_CHAT_PROMPT_CACHE": "off", "PYTHONPATH": str(tree)}
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "rml_chat", path, "--batch", "-", "--temp", "0", *flags, *own],
                                  input=given, capture_output=True, env=env, cwd=tree, check=True)
            wall = time.perf_counter() - start
            out = [json.loads(line) for line in done.stdout.decode().splitlines()]
            speculative = [o.get("speculative", {}) for o in out]
            rates = figures.get(label, ([], 0, 0))[0]
            figures[label] = ([*rates, sum(o["completion_tokens"] for o in out) / wall],
                              sum(s.get("drafted", 0) for s in speculative), sum(s.get("accepted", 0) for s in speculative))
    return figures


def _report(figures: dict[str, tuple[list[float], int, int]], against: str) -> None:
    base = statistics.median(figures[against][0])
    for label, (rates, drafted, accepted) in figures.items():
        told = f", {accepted}/{drafted} drafted tokens taken" if drafted else ""
        print(f"  {label:36s} {statistics.median(rates):6.1f} tok/s ({', '.join(f'{rate:.1f}' for rate in rates)}); "
              f"x {against} {statistics.median(rates) / base:.2f}{told}")
