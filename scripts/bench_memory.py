"""Peak memory of one turn, whole processes, side by side (not a test; issue 32's memory target).

    python scripts/bench_memory.py [MODEL.gguf ...] [--repeat 3] [--steps] [--cold]

For each model: the peak resident set (``ru_maxrss`` of the child, read with ``os.wait4``) of
``rml-chat MODEL -p "Hello" -n 8 --temp 0`` (the prompt cache off) against llama-cpp-python's own path for
the same turn, ``Llama(MODEL, n_ctx=4096)`` + ``create_chat_completion`` (both ``-c 4096``), the runs
alternating, the median of --repeat each. ``--steps`` also prints where ours goes: the resident set after
the imports, after the tokenizer and chat encoder are built, after llama.cpp's model and context, after the
turn. With no model named: SmolLM2 and Gemma 3 270M from the test data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LLAMA_CPP_PYTHON = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=4096, verbose=False)
llm.create_chat_completion([{"role": "user", "content": "Hello"}], max_tokens=8, temperature=0)
"""

STEPS = """
import sys, resource
def rss(): return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
from rml_chat.core.model import load_model
from rml_chat.core.session import ChatSession
from rml_chat.core.session import SessionOptions  # noqa: E402
from rml_chat.engines.base import Sampling
from rml_chat.engines.local import LocalEngine
print(f"  imports {rss():.0f} MB")
model = load_model(sys.argv[1])
model.encoder.encode(model.encoder.format([{"role": "user", "content": "Hello"}]))
print(f"  + tokenizer and chat encoder {rss():.0f} MB")
engine = LocalEngine(model.weights, n_ctx=4096)
print(f"  + llama.cpp's model and context {rss():.0f} MB")
ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, max_tokens=8))).turn("Hello", lambda _: None, lambda _: None)
print(f"  + the turn {rss():.0f} MB (peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
"""


def peak_mb(command: list[str], **extra_env: str) -> float:
    """The peak resident set of ``command``'s process, in MB (the child's own, not this script's)."""
    env = {**os.environ, "RML_CHAT_PROMPT_CACHE": "off", **extra_env}
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return usage.ru_maxrss / 1024


def default_models() -> list[Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import model_path

    return [model_path("smollm2"), model_path("gemma3")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", action="store_true")
    parser.add_argument("--cold", action="store_true", help="an empty tokenizer table cache for each of our runs")
    args = parser.parse_args()
    for model in args.models or default_models():
        ours, theirs = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as empty:
                cache = {"RML_CHAT_TOKENIZER_CACHE": empty} if args.cold else {}
                ours.append(peak_mb([sys.executable, "-m", "rml_chat", str(model), "-p", "Hello", "-n", "8", "--temp",
                                     "0", "-c", "4096"], **cache))
            theirs.append(peak_mb([sys.executable, "-c", LLAMA_CPP_PYTHON, str(model)]))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{model.name}: rml-chat {a:.0f} MB, llama-cpp-python {b:.0f} MB, ratio {a / b:.2f} "
              f"(medians of {args.repeat}: {[round(x) for x in ours]} against {[round(x) for x in theirs]})")
        if args.steps:
            subprocess.run([sys.executable, "-c", STEPS, str(model)], check=True, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
