"""Benchmark establishing chat formats from real templates (not a test).

    python scripts/bench_templates.py [TEMPLATE_DIR] [--rounds 3]

For every ``*.jinja`` in TEMPLATE_DIR (default: llama.cpp's models/templates from the test data cache):

* compile   jinja2 compiling the template (transformers pays this too, once per process);
* establish fingerprint check, fitting and verification (``detect_chat_format`` with the cache off), less
  the compile;
* cached    ``detect_chat_format`` again from the on-disk cache in a fresh memory (no jinja2 at all).

Medians over --rounds, in ms; then the median and maximum over all templates.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("templates", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.templates:
        folder = Path(args.templates)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import fetch_test_data

        folder = fetch_test_data.models_dir() / "templates"
    os.environ["RML_CHAT_FORMAT_CACHE"] = tempfile.mkdtemp(prefix="rml-chat-bench-formats-")
    from tokenizer.chat import ChatFormatError, detect_chat_format, format_cache
    from tokenizer.chat.template import ChatTemplate, TemplateBroken, compiled

    rows = []
    for path in sorted(folder.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        compile_ms, establish_ms, cached_ms = [], [], []
        result = ""
        for _ in range(args.rounds):
            compiled.cache_clear()
            format_cache._MEMORY.clear()
            for entry in Path(os.environ["RML_CHAT_FORMAT_CACHE"]).glob("*.json"):
                entry.unlink()
            start = time.perf_counter()
            try:
                ChatTemplate(source)
            except TemplateBroken:
                pass
            compile_ms.append((time.perf_counter() - start) * 1000)
            compiled.cache_clear()
            start = time.perf_counter()
            try:
                d = detect_chat_format(source, bos_token="<s>", eos_token="</s>")
                result = f"{d.source}: {d.format.name}"
            except ChatFormatError as err:
                result = f"refused: {err}"[:60]
            establish_ms.append((time.perf_counter() - start) * 1000 - compile_ms[-1])
            format_cache._MEMORY.clear()
            start = time.perf_counter()
            try:
                detect_chat_format(source, bos_token="<s>", eos_token="</s>")
            except ChatFormatError:
                pass
            cached_ms.append((time.perf_counter() - start) * 1000)
        row = (statistics.median(compile_ms), statistics.median(establish_ms), statistics.median(cached_ms))
        rows.append(row)
        print(f"{path.name[:44]:44} compile {row[0]:6.1f}  establish {row[1]:6.1f}  cached {row[2]:5.2f}  {result}")
    for i, what in enumerate(("compile", "establish", "cached")):
        values = [row[i] for row in rows]
        print(f"{what:9} median {statistics.median(values):6.2f} ms, max {max(values):6.2f} ms over {len(rows)} templates")


if __name__ == "__main__":
    main()
