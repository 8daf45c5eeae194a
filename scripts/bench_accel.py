"""What each accelerator piece buys on a user-visible path: on against off, whole processes, alternating.

    python scripts/bench_accel.py [CORPUS.txt] [--rounds N]

Paths (each a fresh process, as a user runs it):

* first reply: ``rml-chat MODEL -p Hi -n 1 --temp 0`` with the tokenizer table cache off (a model's first
  load and first turn), for SmolLM2 (GGUF), Gemma 3 (GGUF) and Gemma 3 as a model directory
  (tokenizer.json, built by scripts/make_hf_test_files.py);
* later reply: the same with the table cache warm (every later run of the same model);
* library load: ``python -m tokenizer inspect MODEL x`` (a process that loads a tokenizer and encodes a
  word), table cache off, for the big test vocabularies (Llama 3 and Qwen2 GGUFs, Llama 3 and Gemma 3
  tokenizer.json), and warm against off for the table cache;
* 1 MB prompt: ``python -m tokenizer encode MODEL < CORPUS`` (a scripted prompt's tokenization, cold).

Each piece is turned off alone (the rest on), then all at once (``RML_CHAT_ACCEL=off``). Reported: the
median seconds and on ÷ off (below 1: the piece pays). Figures go to docs/performance.md. (A piece that
paid under ~10 % on every path was removed: pausing the garbage collector during a load, 0.96-1.03.)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fetch_test_data", ROOT / "scripts" / "fetch_test_data.py")
fetch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fetch)  # type: ignore[union-attr]

#: piece -> Python run in the child before the command (turning that piece off), or environment
PIECES: dict[str, tuple[str, dict[str, str]]] = {
    "native (C loops, C string reader)": ("", {"RML_CHAT_NATIVE": "off"}),
    "bulk (numpy tables; json_merges with it)": ("from tokenizer.accel import bulk; bulk.wanted = lambda count: False", {}),
    "json_merges": ("from tokenizer.accel import json_merges; json_merges.split_off = lambda raw: None", {}),
    "all (RML_CHAT_ACCEL=off)": ("", {"RML_CHAT_ACCEL": "off"}),
}

_CHILD = r'''
import runpy, sys
exec(sys.argv[1])
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
'''


def _run(prelude: str, module: str, args: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _CHILD, prelude, module, *args], env=env, input=stdin,
                   capture_output=True, check=True)
    return time.perf_counter() - start


def _compare(label: str, module: str, args: list[str], env: dict[str, str], rounds: int, stdin: bytes | None = None,
             pieces: tuple[str, ...] = tuple(PIECES)) -> None:
    for piece in pieces:
        prelude, extra = PIECES[piece]
        on, off = [], []
        for _ in range(rounds):
            on.append(_run("", module, args, env, stdin))
            off.append(_run(prelude, module, args, {**env, **extra}, stdin))
        m_on, m_off = statistics.median(on), statistics.median(off)
        print(f"  {label:34} {piece:42} on {m_on:6.3f} s  off {m_off:6.3f} s  on/off {m_on / m_off:5.2f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, nargs="?")
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's run keeps its bytecode cache
    gemma_dir = fetch.cache_dir() / "hf-test-v3" / "gemma3"
    models = [("SmolLM2 GGUF", [str(fetch.smollm_path())]), ("Gemma 3 GGUF", [str(fetch.gemma_path())])]
    if gemma_dir.is_dir():
        models.append(("Gemma 3 model directory", [str(gemma_dir), "--weights", str(fetch.gemma_path())]))
    reply = ["-p", "Hi", "-n", "1", "--temp", "0", "--chat-format", "raw"]
    cold = {**env, "RML_CHAT_TOKENIZER_CACHE": "off"}
    print("first reply (a model's first load and first turn: table cache off)")
    for name, model in models:
        _compare(name, "rml_chat", [*model, *reply], cold, opts.rounds)
    with tempfile.TemporaryDirectory() as tables:
        warm = {**env, "RML_CHAT_TOKENIZER_CACHE": tables}
        print("later reply (table cache warm) against no table cache at all")
        for name, model in models:
            _run("", "rml_chat", [*model, *reply], warm)  # fills the entry
            on = statistics.median(_run("", "rml_chat", [*model, *reply], warm) for _ in range(opts.rounds))
            off = statistics.median(_run("", "rml_chat", [*model, *reply], cold) for _ in range(opts.rounds))
            print(f"  {name:34} {'table_cache':42} on {on:6.3f} s  off {off:6.3f} s  on/off {on / off:5.2f}")
    vocabs = [("Llama 3 GGUF (vocab)", fetch.models_dir() / "ggml-vocab-llama-bpe.gguf"),
              ("Qwen2 GGUF (vocab)", fetch.models_dir() / "ggml-vocab-qwen2.gguf"),
              ("Llama 3 tokenizer.json", fetch.cache_dir() / "hf-test-v3" / "llama-bpe"),
              ("Gemma 3 tokenizer.json", gemma_dir)]
    vocabs = [(name, path) for name, path in vocabs if path.exists()]
    print("library load (python -m tokenizer inspect MODEL x: table cache off)")
    for name, path in vocabs:
        _compare(name, "tokenizer", ["inspect", str(path), "x"], cold, opts.rounds,
                 pieces=tuple(p for p in PIECES if p != "json_merges" or "tokenizer.json" in name))
    with tempfile.TemporaryDirectory() as tables:
        warm = {**env, "RML_CHAT_TOKENIZER_CACHE": tables}
        print("library load, table cache warm against off")
        for name, path in vocabs:
            args = ["inspect", str(path), "x"]
            _run("", "tokenizer", args, warm)
            on = statistics.median(_run("", "tokenizer", args, warm) for _ in range(opts.rounds))
            off = statistics.median(_run("", "tokenizer", args, cold) for _ in range(opts.rounds))
            print(f"  {name:34} {'table_cache':42} on {on:6.3f} s  off {off:6.3f} s  on/off {on / off:5.2f}")
    if opts.corpus:
        text = opts.corpus.read_bytes()[:1 << 20]
        print(f"1 MB prompt: python -m tokenizer encode ({len(text)} bytes, table cache off)")
        for name, model in models[:2]:
            _compare(name, "tokenizer", ["encode", model[0]], cold, opts.rounds, stdin=text,
                     pieces=("native (C loops, C string reader)", "all (RML_CHAT_ACCEL=off)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
