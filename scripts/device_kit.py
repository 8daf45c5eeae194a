"""What a GPU machine without a network needs to run the speed benches, packed into ``.device/`` (git
ignores it; it is what travels beside the checkout): then ``scripts/device_bench.sh`` there builds and runs.

    python scripts/device_kit.py [--python 3.12]      # here, with the network: writes .device/ (~15 MB)

``.device/`` holds:

- ``llama.cpp.tar.xz``: the llama.cpp that llama-cpp-python vendors (the source ``llama_build.py`` unpacks),
  without its models, docs, tests and benches, to be built there with CUDA;
- ``llama_cpp/``: llama-cpp-python's Python package, whose ``lib/`` gets the libraries built there;
- ``wheels/``: the pure-Python packages rml-chat and llama_cpp import that such a machine may lack, for
  ``--python`` (the GPU machine's);
- ``vocab.gguf``: SmolLM2's tokenizer and template without weights (``random_model.py --vocab-only``), to
  make a random-weight model of any size there.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_test_data as fetch  # noqa: E402
import llama_build  # noqa: E402
import random_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / ".device"
#: the parts of llama.cpp's tree a build of the library, its tools and llama-server doesn't read
LEFT_OUT = {"models", "docs", "tests", "benches", "conversion", "media", "gguf-py", ".github", ".devops"}
#: imported by rml-chat or llama_cpp and not part of a bare Python with numpy, jinja2 and pygments
WHEELS = ["prompt_toolkit", "wcwidth", "diskcache", "gguf", "pyyaml", "tqdm", "requests", "urllib3", "idna", "certifi",
          "charset_normalizer", "typing_extensions"]


def pack_source(target: Path) -> None:
    source = llama_build.source()
    with tarfile.open(target, "w:xz") as tar:
        for entry in sorted(source.iterdir()):
            if entry.name not in LEFT_OUT:
                tar.add(entry, arcname=entry.name)


def copy_package(target: Path) -> None:
    import llama_cpp

    package = Path(llama_cpp.__file__).parent
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("*.so", "*.so.*", "__pycache__", "*.dylib"))


def download_wheels(target: Path, python: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
                    "--python-version", python, "--platform", "manylinux2014_x86_64", "--platform", "any",
                    "--dest", str(target), *WHEELS], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python version (for its wheels)")
    args = parser.parse_args()
    KIT.mkdir(exist_ok=True)
    print(f"packing llama.cpp {fetch.llama_cpp_version()} …")
    pack_source(KIT / "llama.cpp.tar.xz")
    copy_package(KIT / "llama_cpp")
    download_wheels(KIT / "wheels", args.python)
    random_model.write_vocabulary(str(fetch.smollm_path()), str(KIT / "vocab.gguf"))
    size = sum(path.stat().st_size for path in KIT.rglob("*") if path.is_file())
    print(f"wrote {KIT} ({size / 2**20:.1f} MiB); there: bash scripts/device_bench.sh")


if __name__ == "__main__":
    main()
