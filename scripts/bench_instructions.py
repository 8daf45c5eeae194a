"""Instructions (valgrind's callgrind) our tokenizer spends loading a vocabulary, on a first pass and in
the steady state — for A/B comparisons of our own changes.

    python scripts/bench_instructions.py NAME [NAME ...] [--tree DIR ...] [--docs N] [--corpus FILE]

NAME: a llama.cpp test vocabulary (gpt-2, llama-bpe, qwen2, llama-spm, ...), smollm2 or gemma3, or a
tokenizer.json path. Each --tree is a checkout whose ``tokenizer`` package is measured (default: this
one), so ``--tree /tmp/old --tree .`` compares two versions side by side.

Why: on this shared machine the seconds of one run vary by +-30 % from run to run, more than most
single changes gain, while instruction counts repeat exactly. Instructions are not seconds (memory
stalls do not show), so a change is kept on its instruction count and then confirmed in seconds by
``bench_tokenizer.py``. They do not compare us with llama.cpp or HF either: theirs are C++ and Rust.
Each figure is a difference of two runs (e.g. load + first pass minus load), imports excluded; what
loading left is collected and frozen before the passes, so that the cyclic collector's visits to it
(placed by allocation counts, which any change moves) do not land in one pass or the other.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("none", "load", "first", "steady")  # each run does everything up to its stage


def _path_of(name: str) -> Path:
    spec = importlib.util.spec_from_file_location("fetch_test_data", ROOT / "scripts" / "fetch_test_data.py")
    fetch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetch)  # type: ignore[union-attr]
    if name.endswith(".json") or os.sep in name:
        return Path(name)
    return {"smollm2": fetch.smollm_path, "gemma3": fetch.gemma_path}.get(
        name, lambda: fetch.models_dir() / f"ggml-vocab-{name}.gguf")()


def _child(path: str, stage: str, corpus: str, docs: int) -> None:
    """The measured run: import, then as many stages as asked (table cache off: a cold load)."""
    os.environ["RML_CHAT_TOKENIZER_CACHE"] = "off"
    import tokenizer

    texts = [d for d in Path(corpus).read_text(encoding="utf-8").split("\n\n") if d][:docs]
    if stage == "none":
        return
    tok = tokenizer.load(path)
    gc.collect()  # settle what loading left, so that no collection of it lands in the passes
    gc.freeze()
    for _ in range(STAGES.index(stage) - 1):  # first: one pass; steady: a second one
        for text in texts:
            tok.encode(text)


def _instructions(tree: Path, path: Path, stage: str, corpus: Path, docs: int) -> int:
    # one hash seed for every run: string hashes place the word cache's entries, and so move a steady
    # pass by up to ~8% from seed to seed (docs/performance.md); set PYTHONHASHSEED to try another
    env = {"PYTHONHASHSEED": "0", **os.environ, "PYTHONPATH": str(tree)}
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                          __file__, "--child", str(path), stage, str(corpus), str(docs)],
                         env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="+")
    parser.add_argument("--tree", type=Path, action="append", help="checkout to measure (repeatable)")
    parser.add_argument("--docs", type=int, default=1000, help="documents of the corpus to encode")
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "bench.txt")
    args = parser.parse_args()
    print(f"millions of instructions; {args.docs} documents of {args.corpus.name}; cold load (no table cache)")
    for name in args.names:
        path = _path_of(name)
        for tree in args.tree or [ROOT]:
            counts = [_instructions(tree.resolve(), path, stage, args.corpus, args.docs) for stage in STAGES]
            load, first, steady = (b - a for a, b in zip(counts, counts[1:]))
            print(f"{name:12} {str(tree):24} load {load / 1e6:8.0f}  first pass {first / 1e6:8.0f}  "
                  f"steady pass {steady / 1e6:8.0f}", flush=True)


if __name__ == "__main__":
    main()
