"""Benchmark the chat loop side by side with llama.cpp and llama-cpp-python (not a test).

    python scripts/bench_chat.py [MODEL.gguf] [--only NAME ...] [--repeat 3] [--tree OLD_CHECKOUT]

Sections (``--only`` picks some):

* ``generation``  tokens/s of our loop (our ids, our streaming) against a bare llama.cpp decode loop on the
  same context (the C API: ``llama_decode`` one token at a time, llama.cpp's greedy sampler), and against
  ``create_completion(stream=True)``; best of --repeat, as ratios.
* ``overflow``    50 greedy turns in a 1,024-token context: median time to first token of the last 10
  turns over the first 10 (a chat that keeps overflowing must not stall), and the tokens evaluated.
* ``launch``      launch to first token, whole processes, in pairs: ``rml-chat MODEL -p … -n 1`` against
  llama-cpp-python's own path (``Llama(...)`` + ``create_chat_completion``); the median of --repeat
  pairs' ratios. With ``--tree DIR``: this checkout's ``rml-chat`` against that checkout's, in pairs.
* ``batch``       N short prompts through ``--batch`` (one model load) against N separate ``-p`` runs, whole
  processes, for N = 12 and 100: the ratio of wall times.
* ``remote``      the same greedy reply through a llama-server over two RPC workers on 127.0.0.1
  (scripts/cluster.py) against the local engine: tokens/s and TTFT as ratios, and the time our client adds
  per token on top of the server's own timings.
* ``reasoning``   a reasoning model's 20-turn chat (SmolLM2 under Qwen3's template, thinking by grammar):
  what each turn evaluates, TTFT last 5 over first 5, tokens/s with the split against without
  (scripts/bench_reasoning.py).
* ``prompt-cache`` a 2,000-token system prompt and a new question each run, separate ``-p`` processes:
  launch to first token of runs 2-6 over run 1, and restoring a kept state against evaluating its ids
  (scripts/bench_prompt_cache.py).
* ``parallel``    64 prompts at ``-n 32`` through ``--batch`` sequentially against ``--batch -np 4``,
  whole processes (the prompt cache off): tokens/s of each and their ratio, and how many greedy replies
  differ (llama.cpp's arithmetic over a batch of several sequences is not bit for bit a single one's); and
  llama.cpp's own decode step over one sequence against four (scripts/bench_parallel.py).
* ``parallel-draft`` ``--batch -np 3`` with a draft model (``--model-draft``, else the model itself) and
  without, against llama-server's slots with the same draft model; with ``--tree DIR``, that checkout's
  ``-md`` run too (scripts/bench_parallel.py).
* ``parallel-ngram`` twelve rewrites of code through ``--batch -np 4``, drafts off, and ngram-simple and
  ``--spec-default`` with their drafts cut to what pays and checked whole; with ``--tree DIR``, that
  checkout's cut runs too (scripts/bench_parallel.py).
* ``format``      formatting + encoding one turn of a 50-exchange conversation (what a turn costs before
  llama.cpp sees it), µs; with ``--tree DIR`` the same for another checkout, in alternating processes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rml_chat.core.model import load_model  # noqa: E402
from rml_chat.core.session import ChatSession, SessionOptions  # noqa: E402
from rml_chat.engines.base import Generation, Sampling  # noqa: E402
from rml_chat.engines.local import LocalEngine  # noqa: E402
from tokenizer.chat import segments_text  # noqa: E402

STORY = "Write a long story about a dragon who learns to cook, with many details."
SECTIONS = ("generation", "overflow", "launch", "format", "batch", "remote", "reasoning", "prompt-cache", "parallel",
            "parallel-draft", "parallel-ngram")


# ----- generation ------------------------------------------------------------------------------------

def ours_tokens_per_s(session: ChatSession, n: int) -> float:
    session.engine.reset()
    session.conversation.clear()
    session.options.sampling = Sampling(temp=0.0, seed=0, max_tokens=n)
    session.reply_format = replace(session.reply_format, stop_strings=())
    result = session.turn(STORY, lambda _: None, lambda _: None)
    return result.generation.tokens_per_s


def bare_tokens_per_s(session: ChatSession, n: int) -> float:
    """llama.cpp's own decode loop through its C API: one token per llama_decode, its greedy sampler."""
    import llama_cpp

    session.engine.reset()
    ids = session.model.encoder.encode(session.model.encoder.format([{"role": "user", "content": STORY}]))
    ctx = session.engine._llama.ctx  # the bare baseline drives the same context directly
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    prompt = (llama_cpp.llama_token * len(ids))(*ids)
    llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(prompt, len(ids)))
    sampler = llama_cpp.llama_sampler_init_greedy()
    token = llama_cpp.llama_token()
    first = last = 0.0
    for _ in range(n):
        token.value = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
        llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(token, 1))
        last = time.perf_counter()
        first = first or last
    llama_cpp.llama_sampler_free(sampler)
    session.engine.reset()
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    return (n - 1) / (last - first)


def create_completion_tokens_per_s(session: ChatSession, llm, n: int) -> float:  # type: ignore[no-untyped-def]
    """llama-cpp-python's own streaming loop (its ``Llama``, over the same weights)."""
    llm.reset()
    prompt = segments_text(session.model.encoder.format([{"role": "user", "content": STORY}]))
    stamps = [time.perf_counter() for _chunk in llm.create_completion(prompt, max_tokens=n, temperature=0.0,
                                                                      stream=True)]
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


def generation(model_path: str | None, repeat: int) -> None:
    model = load_model(model_path)
    engine = LocalEngine(model.weights, n_ctx=4096)
    session = ChatSession(model, engine, SessionOptions(Sampling()))
    from llama_cpp import Llama

    theirs = Llama(model_path=str(model.weights), n_ctx=4096, verbose=False)
    n = 128
    for _ in range(2):  # warm up: first decodes allocate
        ours_tokens_per_s(session, 16)
    rows = {"ours": [], "bare llama.cpp loop": [], "create_completion": []}
    for _ in range(repeat):  # interleaved, so that the machine's drift hits all three alike
        rows["ours"].append(ours_tokens_per_s(session, n))
        rows["bare llama.cpp loop"].append(bare_tokens_per_s(session, n))
        rows["create_completion"].append(create_completion_tokens_per_s(session, theirs, n))
    best = {name: max(values) for name, values in rows.items()}
    print(f"generation ({model.name}, {n} tokens greedy, best of {repeat}): " + ", ".join(
        f"{name} {value:.1f} tok/s" for name, value in best.items()))
    print(f"  ours / bare llama.cpp loop {best['ours'] / best['bare llama.cpp loop']:.3f}   "
          f"ours / create_completion {best['ours'] / best['create_completion']:.3f}")
    engine.close()
    theirs.close()


# ----- a chat that keeps overflowing -------------------------------------------------------------------

def overflow(model_path: str | None, turns: int = 50, n_ctx: int = 1024) -> None:
    """Also: the replies of the last 10 turns (after shifts) against a second engine that evaluates each
    of those prompts from scratch — a shifted cache is not bit-identical, so greedy replies may differ."""
    model = load_model(model_path)
    engine = LocalEngine(model.weights, n_ctx=n_ctx)
    session = ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, seed=0, max_tokens=48)))
    ttft, evaluated, drops, last_turns = [], [], 0, []
    for i in range(turns):
        start = time.perf_counter()
        first: list[float] = []

        def emit(chunk: str, first=first) -> None:
            if chunk and not first:
                first.append(time.perf_counter())

        result = session.turn(f"Question {i + 1}: tell me one fact about the number {i + 7}, in two sentences.",
                              emit, lambda _: None)
        ttft.append((first[0] if first else time.perf_counter()) - start)
        evaluated.append(result.generation.evaluated)
        drops += result.dropped
        if i >= turns - 10:
            last_turns.append((result.prompt_ids, result.generation.tokens))
    engine.close()
    reference = LocalEngine(model.weights, n_ctx=n_ctx)  # after the timed turns, so as not to disturb them
    agree = compared = same_replies = 0
    for prompt, ours in last_turns:
        reference.reset()
        fresh = list(reference.generate(prompt, session.options.sampling, model.stop_ids, Generation()))
        compared += max(len(ours), len(fresh))
        agree += sum(a == b for a, b in zip(ours, fresh))
        same_replies += ours == fresh
    head, tail = statistics.median(ttft[:10]), statistics.median(ttft[-10:])
    print(f"overflow ({model.name}, {turns} greedy turns, {n_ctx}-token context, {drops} exchanges dropped): "
          f"median TTFT first 10 {head * 1000:.0f} ms, last 10 {tail * 1000:.0f} ms, ratio {tail / head:.2f}")
    print(f"  tokens evaluated per turn, last 10: {evaluated[-10:]}")
    print(f"  last 10 replies vs a full re-evaluation of the same prompts: {same_replies}/10 identical, "
          f"{agree}/{compared} tokens agree position by position")
    reference.close()


# ----- launch to first token ---------------------------------------------------------------------------

_THEIRS = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=4096, verbose=False)
out = llm.create_chat_completion(messages=[{"role": "user", "content": "Say hi."}], max_tokens=1, temperature=0)
"""


def _wall(cmd: list[str], cwd: Path = ROOT) -> float:
    """A whole process's wall time, with byte-code caching on (as for a user: PYTHONDONTWRITEBYTECODE is
    dropped, and the warm-up run writes the caches)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
    return time.perf_counter() - start


def launch(model_path: str | None, repeat: int, trees: list[Path] = ()) -> None:
    """Each round runs both, in a shuffled order; the figure is the median of the rounds' ratios (the
    machine's speed drifts by 20% within seconds: a pair shares the drift, two medians need not). With
    ``trees``: this checkout against the first of them (``python -m rml_chat`` run in each: its own code)."""
    path = str(load_model(model_path).weights)
    ours = [sys.executable, "-m", "rml_chat", path, "-p", "Say hi.", "-n", "1", "--temp", "0"]
    commands = {"ours": (ours, ROOT)}
    if trees:
        commands["theirs"], against = (ours, trees[0]), f"the checkout at {trees[0]}"
    else:
        commands["theirs"], against = ([sys.executable, "-c", _THEIRS, path], ROOT), "llama-cpp-python"
    for command, cwd in commands.values():  # warm the page cache and our caches
        _wall(command, cwd)
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    ratios = []
    for _ in range(repeat):
        order = list(commands)
        random.shuffle(order)
        walls = {name: _wall(*commands[name]) for name in order}
        for name, value in walls.items():
            times[name].append(value)
        ratios.append(walls["ours"] / walls["theirs"])
    low, mid, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    print(f"launch to first token ({Path(path).name}, {repeat} rounds): ours {statistics.median(times['ours']):.3f} s, "
          f"{against} {statistics.median(times['theirs']):.3f} s (medians); ratio {statistics.median(ratios):.3f} "
          f"(quartiles {low:.3f}-{high:.3f}; ours faster in {sum(r < 1 for r in ratios)} of {repeat})")


# ----- batches ---------------------------------------------------------------------------------------

def batch(model_path: str | None, counts: tuple[int, ...] = (12, 100)) -> None:
    path = str(load_model(model_path).weights)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    common = ["--temp", "0", "-n", "8", "-sys", "Answer in a few words."]
    _wall([sys.executable, "-m", "rml_chat", path, "-p", "warm up", *common])
    for n in counts:
        prompts = [f"Name a colour, number {i}." for i in range(n)]
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rml_chat", path, "--batch", "-", *common], check=False,
                       input="\n".join(json.dumps(p) for p in prompts).encode(), capture_output=True, env=env)
        batched = time.perf_counter() - start
        separate = sum(_wall([sys.executable, "-m", "rml_chat", path, "-p", p, *common]) for p in prompts)
        print(f"batch of {n} ({Path(path).name}): --batch {batched:.2f} s, {n} separate -p runs {separate:.2f} s, "
              f"ratio {batched / separate:.3f}")


# ----- on a server ------------------------------------------------------------------------------------

def remote(model_path: str | None, repeat: int, n: int = 128) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import cluster

    from rml_chat.engines.server import ServerEngine

    model = load_model(model_path)
    running = cluster.start(model.weights, workers=2, ctx=4096, threads=1)
    try:
        engines = {"remote": ServerEngine(running.url), "local": LocalEngine(model.weights, n_ctx=4096, n_threads=1)}
        ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": STORY}]))
        sampling = Sampling(temp=0.0, seed=0, max_tokens=n)
        best: dict[str, tuple[float, float]] = {}
        overhead = []
        for _ in range(repeat):
            for name, engine in engines.items():
                engine.reset()
                gen = Generation()
                stamps = [time.perf_counter() for _token in engine.generate(ids, sampling, (), gen)]
                rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
                if name not in best or rate > best[name][0]:
                    best[name] = (rate, gen.ttft_s)
                if name == "remote" and engine.timings.get("predicted_ms"):
                    ours_ms = (gen.finished - gen.first_token_at) * 1000
                    server_ms = engine.timings["predicted_ms"] * (len(stamps) - 1) / max(engine.timings["predicted_n"], 1)
                    overhead.append((ours_ms - server_ms) / ours_ms)
        (r_rate, r_ttft), (l_rate, l_ttft) = best["remote"], best["local"]
        print(f"remote ({model.name}, llama-server over 2 RPC workers on 127.0.0.1, 1 thread each; {n} tokens, "
              f"best of {repeat}): {r_rate:.1f} tok/s against local {l_rate:.1f} (ratio {r_rate / l_rate:.3f}); "
              f"TTFT {r_ttft * 1000:.0f} ms against {l_ttft * 1000:.0f} ms")
        if overhead:
            print(f"  our client's share of the streaming time beyond the server's own timings: "
                  f"{statistics.median(overhead) * 100:.1f} %")
        engines["local"].close()
    finally:
        running.stop()


# ----- formatting + encoding a turn --------------------------------------------------------------------

_FORMAT_ENCODE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in getattr(f, '__name__', type(f).__name__)]
try:
    from rml_chat.core.model import load_model
except ImportError:  # a checkout from before rml_chat's rooms
    from rml_chat.model import load_model
model = load_model(sys.argv[2] or None)
encoder = model.encoder
messages = []
per_turn = []
for turn in range(50):
    messages.append({"role": "user", "content": f"Question {turn}: what is {turn} times {turn + 3}? Explain briefly."})
    start = time.perf_counter()
    encoder.encode(encoder.format(messages))
    per_turn.append(time.perf_counter() - start)
    messages.append({"role": "assistant", "content": f"{turn} times {turn + 3} is {turn * (turn + 3)}. " * 3})
print(json.dumps(per_turn))
"""


def format_encode_us(tree: Path, model: str | None) -> float:
    """µs per turn over turns 41-50, one fresh process, for the checkout at ``tree``."""
    out = subprocess.run([sys.executable, "-c", _FORMAT_ENCODE, str(tree), model or ""], capture_output=True,
                         text=True, check=True).stdout
    return sum(json.loads(out)[-10:]) / 10 * 1e6


def format_section(model: str | None, repeat: int, trees: list[Path]) -> None:
    trees = [ROOT, *trees]
    times: dict[Path, list[float]] = {tree: [] for tree in trees}
    for _ in range(repeat):  # alternating, so that the machine's drift hits every tree alike
        for tree in trees:
            times[tree].append(format_encode_us(tree, model))
    for tree in trees:
        print(f"format+encode per turn (turns 41-50, best of {repeat}): {min(times[tree]):8.1f} µs  {tree}")
    if len(trees) > 1:
        print(f"  ratio this checkout / {trees[1]}: {min(times[trees[0]]) / min(times[trees[1]]):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], type=Path,
                        help="another checkout (format, launch, parallel-draft, parallel-ngram)")
    parser.add_argument("--model-draft", help="parallel-draft: the draft model (default: the model itself)")
    args = parser.parse_args()
    for section in args.only:
        if section == "generation":
            generation(args.model, args.repeat)
        elif section == "overflow":
            overflow(args.model)
        elif section == "launch":
            launch(args.model, args.repeat, args.tree)
        elif section == "batch":
            batch(args.model)
        elif section == "remote":
            remote(args.model, args.repeat)
        elif section == "parallel":
            from bench_parallel import parallel

            parallel(str(load_model(args.model).weights))
        elif section == "parallel-draft":
            from bench_parallel import parallel_draft

            parallel_draft(str(load_model(args.model).weights), args.model_draft, args.repeat, args.tree)
        elif section == "parallel-ngram":
            from bench_parallel import parallel_ngram

            parallel_ngram(str(load_model(args.model).weights), args.repeat, args.tree)
        elif section == "prompt-cache":
            from bench_prompt_cache import prompt_cache

            prompt_cache(str(load_model(args.model).weights))
        elif section == "reasoning":
            import fetch_test_data
            from bench_reasoning import reasoning

            reasoning(Path(args.model) if args.model else fetch_test_data.smollm_path(),
                      fetch_test_data.models_dir() / "templates", args.repeat)
        else:
            format_section(args.model, args.repeat, args.tree)


if __name__ == "__main__":
    main()
