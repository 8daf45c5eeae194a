"""Scaling of encode on hostile inputs (not a test): time per MB at growing sizes, and peak memory.

    python scripts/limits.py [--max-mb 10]

Inputs: plain text (the committed corpus repeated), one "word" with no split point (random letters),
repeated emoji, and a run of special-token texts (cut with parse_special). Linear scaling shows as a flat
seconds-per-MB column.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fetch_test_data as fetch  # noqa: E402

import tokenizer  # noqa: E402


def inputs(size: int) -> dict[str, str]:
    rng = random.Random(0)
    lines = (ROOT / "fixtures" / "corpus.jsonl").read_text(encoding="utf-8").split("\n")
    text = "\n".join(json.loads(line)["text"] for line in lines if line)
    return {
        "corpus text": (text * (size // len(text) + 1))[:size],
        "one word": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(size)),
        "emoji": "👋🏽" * (size // 8),
        "specials": "<|im_end|>x" * (size // 11),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-mb", type=float, default=10)
    args = parser.parse_args()
    models = {"llama-bpe (byte-level)": fetch.models_dir() / "ggml-vocab-llama-bpe.gguf",
              "gemma3 (SentencePiece)": fetch.gemma_path()}
    sizes = [s for s in (100_000, 1_000_000, 10_000_000) if s <= args.max_mb * 1_000_000]
    for label, path in models.items():
        tok = tokenizer.load(path)
        for size in sizes:
            for kind, text in inputs(size).items():
                start = time.perf_counter()
                ids = tok.encode(text, parse_special=True)
                took = time.perf_counter() - start
                mb = len(text.encode()) / 1e6
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"{label:24} {kind:12} {mb:6.2f} MB {took:7.2f} s {took / mb:6.2f} s/MB "
                      f"{len(ids):9d} ids  peak RSS {rss:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
