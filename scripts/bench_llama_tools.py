"""rml-chat beside llama.cpp's own tools on one model (not a test): decode, prompt evaluation and parallel
sequences, as ratios, in one run.

    python scripts/bench_llama_tools.py [MODEL.gguf] [--ngl 99] [--tools DIR] [--tokens 128] [--prompt 2048]

The oracles are built from the llama.cpp that llama-cpp-python vendors (scripts/llama_build.py; ``--tools``
names a folder that already holds ``llama-bench``, ``llama-simple`` and ``llama-batched-bench``, as on a GPU
machine). What is compared, like with like (the same flash-attention setting, threads left to each):

- decode: rml-chat's tokens/s after the first token (``-p``, ``--ignore-eos``, fixed ``-n``), greedy and
  with the default sampler chain, on the CPU and in the graph (``-bs``), against llama-bench's ``tg`` and
  llama-simple's C loop;
- prompt evaluation: a warm second turn with a new prompt of about ``--prompt`` tokens (``--batch`` of two
  lines in one process), tokens over time to first token, against llama-bench's ``pp`` of as many tokens;
  and the first turn's time to first token against llama-cpp-python's first ``eval`` of the same ids in a
  fresh process;
- parallel sequences: ``--batch`` of 16 prompts with ``-np 1, 4, 8``: the decode phase (the lines' own
  tokens/s added up while they run together) and the whole process, against llama-batched-bench's
  ``S_TG`` for as many sequences, with the chain on the CPU and with ``-bs``; and where a step's time goes
  (the decode, then the sampling of each sequence, in turn and in a pool of threads; and the decode with
  each sequence's chain in the graph, then its id read).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_test_data as fetch  # noqa: E402
import llama_build  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STORY = "Write a long story about a lighthouse keeper and a storm."
#: the --batch runs: lines decoded together, and the sampler chain's place (on the CPU, or "-bs": in the graph)
NP_RUNS = ((1, ""), (4, ""), (8, ""), (4, " -bs"), (8, " -bs"))


def tool(folder: Path | None, name: str) -> str:
    return str((folder / name) if folder else llama_build.binary(name, "build-bench"))


def run(command: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, **kw)


def ours(model: Path, ngl: int, *flags: str, stdin: str | None = None) -> list[dict]:
    done = run([sys.executable, "-m", "rml_chat", str(model), "-ngl", str(ngl), "--prompt-cache", "off", *flags],
               input=stdin)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def long_text(tokens: int, salt: str) -> str:
    """About ``tokens`` tokens of varied English, starting with ``salt`` (so no two prompts share a prefix)."""
    words = (Path(ROOT / "README.md").read_text() * 20).split()
    return salt + " " + " ".join(words[: int(tokens * 0.75)])


def decode(model: Path, ngl: int, fa: str, n: int, tools: Path | None) -> dict[str, float]:
    common = ("-p", STORY, "-n", str(n), "--ignore-eos", "on", "--repeat-guard", "0", "--json", "-fa", fa)
    greedy = max(ours(model, ngl, *common, "--temp", "0")[0]["timings"]["tokens_per_s"] for _ in range(2))
    default = max(ours(model, ngl, *common, "--seed", "7")[0]["timings"]["tokens_per_s"] for _ in range(2))
    on_device = max(ours(model, ngl, *common, "--seed", "7", "-bs")[0]["timings"]["tokens_per_s"] for _ in range(2))
    bench = json.loads(run([tool(tools, "llama-bench"), "-m", str(model), "-ngl", str(ngl), "-fa", "1" if fa == "on" else "0",
                            "-p", "0", "-n", str(n), "-r", "3", "-o", "json"]).stdout)[0]["avg_ts"]
    simple = run([tool(tools, "llama-simple"), "-m", str(model), "-n", str(n), "-ngl", str(ngl), "Hello"]).stderr
    found = re.search(r"decoded \d+ tokens in [\d.]+ s, speed: ([\d.]+) t/s", simple)
    return {"greedy": greedy, "default chain": default, "default chain -bs": on_device, "llama-bench tg": bench,
            "llama-simple": float(found.group(1)) if found else float("nan")}


def prompt(model: Path, ngl: int, fa: str, size: int, tools: Path | None) -> dict[str, float]:
    lines = "".join(json.dumps({"prompt": long_text(size, salt), "max_tokens": 1}) + "\n" for salt in ("Alpha.", "Beta."))
    turns = [ours(model, ngl, "--batch", "-", "--temp", "0", "-fa", fa, "-c", str(size * 2 + 256), stdin=lines)
             for _ in range(2)]  # (the better of two processes, as for llama-cpp-python's below)
    first = min((first for first, _ in turns), key=lambda turn: turn["timings"]["ttft_ms"])
    second = min((second for _, second in turns), key=lambda turn: turn["timings"]["ttft_ms"])
    evaluated = second["prompt_tokens_evaluated"]  # (llama-bench at as many tokens: a longer prompt is slower a token)
    bench = json.loads(run([tool(tools, "llama-bench"), "-m", str(model), "-ngl", str(ngl), "-fa", "1" if fa == "on" else "0",
                            "-p", str(evaluated), "-n", "0", "-r", "3", "-o", "json"]).stdout)[0]["avg_ts"]
    ids = json.loads(run([sys.executable, "-m", "rml_chat", str(model), "--show-prompt", "--json", "-p",
                          long_text(size, "Alpha.")]).stdout)["ids"]
    script = ("import json,sys,time; from llama_cpp import Llama; ids=json.load(sys.stdin); "
              f"llm=Llama(model_path={str(model)!r}, n_ctx={size * 2 + 256}, n_gpu_layers={ngl}, flash_attn={fa == 'on'}, "
              "verbose=False); t=time.perf_counter(); llm.eval(ids); print(time.perf_counter()-t)")
    theirs_first = min(float(run([sys.executable, "-c", script], input=json.dumps(ids)).stdout) for _ in range(2))
    return {"warm turn t/s": evaluated / (second["timings"]["ttft_ms"] / 1000), "evaluated": evaluated,
            "llama-bench pp t/s": bench, "first TTFT s": first["timings"]["ttft_ms"] / 1000,
            "llama-cpp-python first eval s": theirs_first}


def parallel(model: Path, ngl: int, fa: str, tools: Path | None, n: int = 128) -> dict[str, float]:
    lines = "".join(json.dumps({"prompt": f"Tell story number {i} about the sea.", "max_tokens": n}) + "\n"
                    for i in range(16))
    figures: dict[str, float] = {}
    for slots, where in NP_RUNS:
        start = time.perf_counter()
        out = ours(model, ngl, "--batch", "-", "--temp", "0", "--ignore-eos", "on", "--repeat-guard", "0", "-fa", fa,
                   "-np", str(slots), "-c", str(slots * (n + 64) + 512), *where.split(), stdin=lines)
        wall = time.perf_counter() - start
        figures[f"-np {slots}{where} whole process"] = sum(o["completion_tokens"] for o in out) / wall
        figures[f"-np {slots}{where} decode"] = statistics.mean(o["timings"]["tokens_per_s"] for o in out) * slots
    table = run([tool(tools, "llama-batched-bench"), "-m", str(model), "-c", "8192", "-b", "2048", "-ub", "512",
                 "-ngl", str(ngl), "-fa", fa, "-npp", "32", "-ntg", str(n), "-npl", "1,4,8", "--output-format", "jsonl"])
    for line in (table.stdout + table.stderr).splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            figures[f"batched-bench B{row['pl']}"] = row["speed_tg"]
    return figures


def step_parts(model: Path, ngl: int, fa: str, steps: int = 128) -> dict[int, dict[str, float]]:
    """Where a step of ``-np N`` goes, in one process with nothing else running: ``llama_decode`` of N
    tokens, then llama.cpp's sampler chain (greedy) once for each sequence, in turn and in a pool of N
    threads (ctypes lets go of the GIL: on a machine with cores to spare they may sample at once).
    Then, with each sequence's chain attached to the context (``-bs``), the decode that also draws and the
    ids read after it. Milliseconds a step, each the median over ``steps`` steps."""
    from concurrent.futures import ThreadPoolExecutor

    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine
    from rml_chat.engines.sampler_chain import stages

    parts: dict[int, dict[str, float]] = {}
    for lines in (1, 4, 8):
        engine = LocalEngine(model, n_ctx=lines * (2 * steps + 64) + 256, gpu=(ngl, "layer"), flash_attn=fa, parallel=lines)
        llama = engine._llama
        chains = [llama.sampler(stages(Sampling(temp=0.0))) for _ in range(lines)]
        seqs = [0] if lines == 1 else list(range(1, lines + 1))  # (as -np uses them: parallel.py)
        for seq in seqs:
            llama.decode_seqs([1] * 32, range(32), [seq] * 32, [False] * 31 + [True])
        timings: dict[str, list[float]] = {"decode": [], "sampling in turn": [], "sampling in a pool": []}
        with ThreadPoolExecutor(lines) as pool:
            for step in range(steps):
                started = time.perf_counter()
                llama.decode_seqs([5] * lines, [32 + step] * lines, seqs, [True] * lines)
                llama._lib.llama_synchronize(llama.ctx)  # (a GPU's decode returns before it is done)
                decoded = time.perf_counter()
                if step % 2:
                    list(pool.map(llama.sample, chains, range(lines)))
                else:
                    [llama.sample(chain, i) for i, chain in enumerate(chains)]
                timings["decode"].append(decoded - started)
                timings["sampling in a pool" if step % 2 else "sampling in turn"].append(time.perf_counter() - decoded)
        for chain in chains:
            chain.close()
        chains = [llama.sampler(stages(Sampling(temp=0.0)), seq=seq, on_device=True) for seq in seqs]
        timings |= {"decode with the chain on the device": [], "its ids read": []}
        for step in range(steps):
            started = time.perf_counter()
            llama.decode_seqs([5] * lines, [32 + steps + step] * lines, seqs, [True] * lines)
            llama._lib.llama_synchronize(llama.ctx)
            decoded = time.perf_counter()
            [llama.sample(chain, i) for i, chain in enumerate(chains)]
            timings["decode with the chain on the device"].append(decoded - started)
            timings["its ids read"].append(time.perf_counter() - decoded)
        for chain in chains:
            chain.close()
        engine.close()
        parts[lines] = {name: statistics.median(found) * 1000 for name, found in timings.items()}
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=None)
    parser.add_argument("--ngl", type=int, default=99)
    parser.add_argument("--tools", type=Path, default=None)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--prompt", type=int, default=2048)
    parser.add_argument("--fa", default="on,off")
    args = parser.parse_args()
    if args.tools is None:
        llama_build.bench_tools(lambda line: print(line, file=sys.stderr))
    model = Path(args.model) if args.model else fetch.smollm_path()
    print(f"{model.name}, -ngl {args.ngl}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    for fa in args.fa.split(","):
        d = decode(model, args.ngl, fa, args.tokens, args.tools)
        print(f"\nflash attention {fa}")
        print(f"  decode tok/s: rml-chat greedy {d['greedy']:.1f}, default chain {d['default chain']:.1f}, with -bs "
              f"{d['default chain -bs']:.1f}; llama-bench tg{args.tokens} {d['llama-bench tg']:.1f}; llama-simple "
              f"{d['llama-simple']:.1f}")
        print(f"    greedy / llama-simple {d['greedy'] / d['llama-simple']:.2f}, default chain / llama-simple "
              f"{d['default chain'] / d['llama-simple']:.2f} (-bs {d['default chain -bs'] / d['llama-simple']:.2f}), "
              f"greedy / llama-bench {d['greedy'] / d['llama-bench tg']:.2f}")
        p = prompt(model, args.ngl, fa, args.prompt, args.tools)
        first, theirs = p["first TTFT s"], p["llama-cpp-python first eval s"]
        print(f"  prompt of {p['evaluated']} tokens: warm turn {p['warm turn t/s']:.0f} t/s against llama-bench pp "
              f"{p['llama-bench pp t/s']:.0f} ({p['warm turn t/s'] / p['llama-bench pp t/s']:.2f}); first turn TTFT "
              f"{first * 1000:.0f} ms against llama-cpp-python's first eval {theirs * 1000:.0f} ms ({first / theirs:.2f})")
        q = parallel(model, args.ngl, fa, args.tools)
        for slots, where in NP_RUNS:
            oracle, label = q.get(f"batched-bench B{slots}", float("nan")), f"-np {slots}{where}"
            print(f"  {label}: decode {q[f'{label} decode']:.1f} tok/s against batched-bench {oracle:.1f} "
                  f"({q[f'{label} decode'] / oracle:.2f}); whole process {q[f'{label} whole process']:.1f} tok/s")
        for lines, found in step_parts(model, args.ngl, fa).items():
            print(f"  a step of {lines} in one process, ms: " + ", ".join(f"{name} {ms:.3f}" for name, ms in found.items()))


if __name__ == "__main__":
    main()
