"""Benchmark: ours vs llama.cpp vs HF tokenizers vs tiktoken, same vocabulary, one process.

    python scripts/bench_tokenizer.py CORPUS.txt [--hf-root DIR] [--names gpt-2,llama-bpe,...]

CORPUS is split into documents at blank lines; each tokenizer encodes every document (no special
parsing). Reported: load time, MB/s first pass (fresh tokenizer, empty word cache) and steady state
(warm cache), and ratios to the others — our first pass against llama.cpp (no cache), HF's own first
pass ("HF first": a fresh HF tokenizer, its word cache empty too; "first-json": ours loaded from the same
tokenizer.json) and HF's best rate. Every figure is
the best of 3 runs; steady-state rates the best of 5 passes, the tokenizers taking turns. Loads are
reported cold (table cache off: a model's first run) and warm (from the table cache, in a fresh temp
folder: every later run of the same file).
--hf-root DIR holds NAME/tokenizer.json for the HF column.
tiktoken gets an Encoding built from the vocabulary (ranks = token ids) and the family's regex.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("fetch_test_data", ROOT / "scripts" / "fetch_test_data.py")
fetch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fetch)  # type: ignore[union-attr]

import tokenizer  # noqa: E402
from tokenizer.accel import native  # noqa: E402
from tokenizer.stages.byte_alphabet import unspell  # noqa: E402

HF_PATTERNS = {  # the families' original regexes (HF / tiktoken syntax)
    "gpt-2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama-bpe": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
             r"""|\s*[\r\n]+|\s+(?!\S)|\s+""",
}


def path_of(name: str) -> Path:
    return {"smollm2": fetch.smollm_path(), "gemma3": fetch.gemma_path()}.get(
        name, fetch.models_dir() / f"ggml-vocab-{name}.gguf")


WARM_DIR = tempfile.mkdtemp(prefix="bench-tables-")  # a fresh table cache: the first load is a real miss
os.environ["RML_CHAT_TOKENIZER_CACHE"] = WARM_DIR
REPEATS = 3  # every figure is the best of this many runs: the machine is shared and noisy
STEADY_REPEATS = 5  # steady-state passes are short (~0.1 s): more of them, interleaved


def steady_rates(encoders: dict[str, Callable[[str], object]], docs: list[str], size: float) -> dict[str, float]:
    """MB/s of each warmed-up encoder, best of STEADY_REPEATS passes taken in turn (ours, llama.cpp, HF,
    tiktoken, ours, ...), so that a slow spell of this shared machine hits every side alike."""
    best = dict.fromkeys(encoders, float("inf"))
    for _ in range(STEADY_REPEATS):
        for name, encode in encoders.items():
            start = time.perf_counter()
            for doc in docs:
                encode(doc)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: size / seconds for name, seconds in best.items()}


def timed(make):
    """(best seconds, object) over REPEATS calls of make()."""
    best, obj = float("inf"), None
    for _ in range(REPEATS):
        obj = None  # drop the previous round's object before the clock starts (no effect measured: a
        # tokenizer holds reference cycles, so the cyclic collector frees it later in any case)
        start = time.perf_counter()
        obj = make()
        best = min(best, time.perf_counter() - start)
    return best, obj


def load_cold(path: Path) -> tokenizer.Tokenizer:
    """A load that neither reads nor writes the table cache (what a first run of a model costs)."""
    os.environ["RML_CHAT_TOKENIZER_CACHE"] = "off"
    try:
        return tokenizer.load(path)
    finally:
        os.environ["RML_CHAT_TOKENIZER_CACHE"] = WARM_DIR


def load_warm(path: Path) -> tokenizer.Tokenizer:
    """A load from the table cache (every later run of the same model file)."""
    return tokenizer.load(path)


def first_pass(make_encoder, docs: list[str], size: float) -> float:
    """Best first pass of a freshly made encoder (empty word caches; loading is not timed)."""
    best = float("inf")
    for _ in range(REPEATS):
        encode = make_encoder()
        start = time.perf_counter()
        for doc in docs:
            encode(doc)
        best = min(best, time.perf_counter() - start)
    return size / best


def hf_encoder(hf_file: Path):
    from tokenizers import Tokenizer as HfTokenizer

    hf = HfTokenizer.from_file(str(hf_file))
    return lambda doc: hf.encode(doc, add_special_tokens=False).ids


def tiktoken_encoding(tok: tokenizer.Tokenizer, name: str):
    import tiktoken

    ranks = {}
    for i in range(tok.vocab_size):
        raw = unspell(tok.id_to_token(i)) if tok.token_type(i) == tokenizer.TokenType.NORMAL else None
        if raw is not None and raw not in ranks:
            ranks[raw] = i
    return tiktoken.Encoding(name, pat_str=HF_PATTERNS[name], mergeable_ranks=ranks, special_tokens={})


def bench(name: str, docs: list[str], size: float, hf_root: Path | None) -> dict[str, float]:
    import llama_cpp

    out: dict[str, float] = {}
    path = path_of(name)
    out["load ours"], tok = timed(lambda: load_cold(path))
    load_warm(path)  # writes the entry
    out["load ours warm"], _ = timed(lambda: load_warm(path))
    out["ours first"] = first_pass(lambda: load_cold(path).encode, docs, size)
    for doc in docs:  # warm our word cache
        tok.encode(doc)
    steady: dict[str, Callable[[str], object]] = {"ours steady": tok.encode}
    out["load llama.cpp"], llm = timed(lambda: llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False))
    steady["llama.cpp"] = lambda d: llm.tokenize(d.encode(), add_bos=False, special=False)
    hf_file = hf_root / name / "tokenizer.json" if hf_root else None
    if hf_file and hf_file.exists():
        from tokenizers import Tokenizer as HfTokenizer

        out["load HF"], hf = timed(lambda: HfTokenizer.from_file(str(hf_file)))
        out["load ours json"], _ = timed(lambda: load_cold(hf_file))
        load_warm(hf_file)
        out["load ours json warm"], _ = timed(lambda: load_warm(hf_file))
        out["ours json first"] = first_pass(lambda: load_cold(hf_file).encode, docs, size)
        out["HF first"] = first_pass(lambda: hf_encoder(hf_file), docs, size)
        steady["HF tokenizers"] = lambda d: hf.encode(d, add_special_tokens=False).ids
    if name in HF_PATTERNS:
        enc = tiktoken_encoding(tok, name)
        steady["tiktoken"] = enc.encode_ordinary
    for encode in steady.values():  # every cache warm before the timed passes
        encode(docs[0])
    out |= steady_rates(steady, docs, size)
    llm.close()
    return out


def ratios(r: dict[str, float]) -> dict[str, float]:
    """Ours over theirs, from one round (so both sides ran under the same machine load)."""
    out = {f"steady/{k}": r["ours steady"] / r[k] for k in ("llama.cpp", "HF tokenizers", "tiktoken") if k in r}
    out |= {f"first/{k}": r["ours first"] / r[k] for k in ("llama.cpp", "HF first", "HF tokenizers") if k in r}
    if "ours json first" in r:
        out["first-json/HF first"] = r["ours json first"] / r["HF first"]
    out["load ours/llama.cpp cold"] = r["load ours"] / r["load llama.cpp"]
    out["load ours/llama.cpp warm"] = r["load ours warm"] / r["load llama.cpp"]
    if "load HF" in r:
        out["load ours-json/HF cold"] = r["load ours json"] / r["load HF"]
        out["load ours-json/HF warm"] = r["load ours json warm"] / r["load HF"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--hf-root", type=Path)
    parser.add_argument("--names", default="gpt-2,llama-bpe,qwen2,smollm2,llama-spm,gemma3")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat each vocabulary; print medians (ratios: median of the rounds' ratios, and range)")
    args = parser.parse_args()
    text = args.corpus.read_text(encoding="utf-8")
    docs = [d for d in text.split("\n\n") if d]
    size = len(text.encode()) / 1e6
    print(f"{len(docs)} documents, {size:.2f} MB; rates in MB/s, loads in s; median of {args.rounds} round(s)")
    loops = "C (tokenizer/accel/_cmerge*.c)" if native.wanted() else "Python (C module not built, or RML_CHAT_NATIVE=off)"
    print(f"short-word merge loops: {loops}")
    for name in args.names.split(","):
        rounds = [bench(name, docs, size, args.hf_root) for _ in range(args.rounds)]
        per_round = [ratios(r) for r in rounds]
        parts = [f"{k} {statistics.median(r[k] for r in rounds):.2f}" for k in rounds[0]]
        shown = []
        for k in per_round[0]:
            values = [r[k] for r in per_round]
            spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
            shown.append(f"{k} {statistics.median(values):.2f}x{spread}")
        print(f"{name:10} | " + " | ".join(parts) + "\n           | " + " | ".join(shown), flush=True)
    shutil.rmtree(WARM_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
