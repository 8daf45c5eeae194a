"""Fetching a model with ``-hf``, side by side with the Hugging Face client alone, in one run.

A local olah mirror (tests/hub_mirror.py) serves SmolLM2's GGUF (98 MB) from a git repository. Measured:

* **launch cost**: the time to import the client (``huggingface_hub``): what every run would pay if it were
  imported eagerly. rml-chat imports it only for ``-hf``, and ``-X importtime`` shows that a run without
  ``-hf`` imports none of it;
* **first fetch**: ``rml-chat -hf ORG/REPO:Q4_1 --show-prompt`` (the listing, the resumable fetch, the
  digest check, the cache's links) against ``hf_hub_download`` of the same file into another cache;
* **again**: the same two with the file in the cache (no byte fetched); and the same ``--show-prompt`` run
  on the local file, to tell the hub's share from the tokenizer's.

    python scripts/bench_hub.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

REPO, FILE = "test-org/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct-Q4_1.gguf"
CLIENT = ("import sys; from huggingface_hub import hf_hub_download; "
          "hf_hub_download(sys.argv[1], sys.argv[2])")


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from hub_mirror import Olah, git_repo

    from rml_chat.core.paths import default_model_path

    work = Path(tempfile.mkdtemp(prefix="rml-bench-hub-"))
    git_repo(work / "mirrors" / "models" / REPO, {FILE: default_model_path()})
    server = Olah(work / "mirrors", work)
    imports = [float(subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); "
                                     "from huggingface_hub import HfApi, hf_hub_download, get_hf_file_metadata; "
                                     "print(time.perf_counter() - t)"], capture_output=True, text=True,
                                    check=True).stdout) for _ in range(args.rounds)]
    without = subprocess.run([sys.executable, "-X", "importtime", "-m", "rml_chat", "--show-prompt", "-p", "hi"],
                             cwd=ROOT, capture_output=True, text=True)
    rows: dict[str, list[float]] = {"ours_first": [], "client_first": [], "ours_again": [], "client_again": [],
                                    "ours_local_file": []}
    try:
        for k in range(args.rounds):
            for who in ("ours", "client"):
                env = {**os.environ, "HF_ENDPOINT": server.url, "HF_HOME": str(work / f"{who}-{k}"),
                       "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
                command = ([sys.executable, "-m", "rml_chat", "-hf", f"{REPO}:Q4_1", "--show-prompt", "-p", "hi"]
                           if who == "ours" else [sys.executable, "-c", CLIENT, REPO, FILE])
                rows[f"{who}_first"].append(timed(command, env))
                rows[f"{who}_again"].append(timed(command, env))
            rows["ours_local_file"].append(timed([sys.executable, "-m", "rml_chat", str(default_model_path()),
                                                  "--show-prompt", "-p", "hi"], dict(os.environ)))
    finally:
        server.stop()
    medians = {name: round(statistics.median(values), 3) for name, values in rows.items()}
    print(json.dumps({
        "client_import_ms": round(1000 * statistics.median(imports), 1),
        "run_without_hf_imports_client": "huggingface_hub" in without.stderr,
        "seconds": medians,
        "first_fetch_ours_over_client": round(medians["ours_first"] / medians["client_first"], 2),
        "again_ours_over_client": round(medians["ours_again"] / medians["client_again"], 2),
        "hub_part_of_ours_again_s": round(medians["ours_again"] - medians["ours_local_file"], 3),
        "note": "ours includes loading the tokenizer and writing the prompt (--show-prompt, ours_local_file alone); "
                "the client only fetches",
    }, indent=1))


if __name__ == "__main__":
    main()
