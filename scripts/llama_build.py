"""llama.cpp's own programs, built from the sources vendored in the installed llama-cpp-python's sdist.

    python scripts/llama_build.py bench       # llama-bench, llama-simple, llama-batched-bench (the oracles)

The sdist (the same one the tests fetch) is unpacked once into ``<cache>/llama.cpp-<version>/source``; each
set of programs has its build folder beside it (``build``: llama-server and ggml-rpc-server for
cluster.py; ``build-bench``: the benchmark tools), configured with CMake for this machine's CPU and built
once (a lock keeps two builds from racing; a ``done`` file holds the flags it was built with).
``$RML_LLAMA_BIN`` names a folder of programs built otherwise instead (a GPU build: device_bench.sh).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_test_data as fetch  # noqa: E402  (the sdist, the cache folder, the installed version)

COMMON = ["-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_UI=OFF",
          "-DLLAMA_USE_PREBUILT_UI=OFF", "-DCMAKE_BUILD_TYPE=Release"]
BENCH_FLAGS = [*COMMON, "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_SERVER=OFF"]
BENCH_TARGETS = ("llama-bench", "llama-simple", "llama-batched-bench")


def root() -> Path:
    return fetch.cache_dir() / f"llama.cpp-{fetch.llama_cpp_version()}"


def binary(name: str, folder: str = "build") -> Path:
    """Where a program is: built here, or in ``$RML_LLAMA_BIN`` where that names a folder built elsewhere
    (scripts/device_bench.sh builds every program once, with CUDA)."""
    elsewhere = os.environ.get("RML_LLAMA_BIN")
    return Path(elsewhere) / name if elsewhere else root() / folder / "bin" / name


def built(folder: str, targets: Sequence[str]) -> bool:
    done = os.environ.get("RML_LLAMA_BIN") or (root() / folder / "done").is_file()
    return bool(done) and all(binary(t, folder).is_file() for t in targets)


def build(folder: str, flags: Sequence[str], targets: Sequence[str], say=print) -> None:
    """Build ``targets`` into ``folder`` unless they are there (about 6 minutes on 2 cores the first time)."""
    if built(folder, targets):
        return
    root().mkdir(parents=True, exist_ok=True)
    with open(root() / f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built(folder, targets):
            return
        source_dir = source(say)
        say(f"building {', '.join(targets)} from {source_dir} (about 6 minutes on 2 cores) …")
        out = root() / folder
        log = root() / f"{folder}.log"
        with open(log, "wb") as sink:
            steps = [["cmake", "-S", str(source_dir), "-B", str(out), *flags],
                     ["cmake", "--build", str(out), "--target", *targets, "-j", str(os.cpu_count() or 2)]]
            for step in steps:
                if subprocess.run(step, stdout=sink, stderr=subprocess.STDOUT).returncode != 0:
                    raise SystemExit(f"llama_build: the build failed; see {log}")
        (out / "done").write_text(" ".join(flags))


def bench_tools(say=print) -> None:
    build("build-bench", BENCH_FLAGS, BENCH_TARGETS, say)


def source(say=print) -> Path:
    """The sdist's vendor/llama.cpp, unpacked once beside the cache's models/."""
    target = root() / "source"
    if (target / "CMakeLists.txt").is_file():
        return target
    version = fetch.llama_cpp_version()
    say(f"unpacking llama.cpp from the llama-cpp-python {version} sdist …")
    sdist = fetch._pip_download(f"llama-cpp-python=={version}", fetch.cache_dir() / "dl", sdist=True)
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    partial = target.with_name("source.part")
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            if member.name.startswith(prefix) and (member.isfile() or member.isdir()):
                member.name = member.name[len(prefix):]
                if member.name:
                    tar.extract(member, partial, filter="data")
    partial.replace(target)
    return target


if __name__ == "__main__":
    if sys.argv[1:] != ["bench"]:
        raise SystemExit(__doc__.strip().splitlines()[2])
    bench_tools()
    print("\n".join(str(binary(t, "build-bench")) for t in BENCH_TARGETS))
