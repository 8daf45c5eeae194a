"""How long ``rml-chat --check`` takes on the real models (not a test): the whole check, and
``--no-reply`` (tokenizer and template only), each run as its own process, as a user runs it; the median
and the spread of ``--repeat`` runs. Targets (issue 31): SmolLM2 under 5 s, Gemma 3 under 10 s.

    python scripts/bench_check.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import fetch_test_data  # noqa: E402


def seconds(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--check", *args], capture_output=True, text=True)
    spent = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"--check {' '.join(args)} failed: {done.stdout[-500:]}")
    return spent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    models = {"SmolLM2-135M Q4_1": fetch_test_data.smollm_path(), "Gemma 3 270M Q4_K_M": fetch_test_data.gemma_path()}
    for name, path in models.items():
        for flags in ((), ("--no-reply",)):
            times = [seconds(str(path), *flags) for _ in range(repeat)]
            print(f"{name:22} --check {' '.join(flags):11} median {statistics.median(times):5.2f} s  "
                  f"(min {min(times):.2f}, max {max(times):.2f}, {repeat} runs)")


if __name__ == "__main__":
    main()
