"""A local llama.cpp cluster: ggml RPC workers and a llama-server that spreads a model's layers over them.

    python scripts/cluster.py build                         # llama-server, rpc-server and the lookup tools, once
    python scripts/cluster.py start MODEL.gguf [--workers 2] [--port 8080] [--ctx 4096]
                                                            # runs until Ctrl-C, then stops them all

The binaries are built from the llama.cpp sources vendored in the llama-cpp-python sdist of the installed
version (the same sdist the tests fetch; CMake, CPU, ``-DGGML_RPC=ON``, no curl or SSL; about 6 minutes on 2
cores) into ``<cache>/llama.cpp-<version>/build/bin``, and reused afterwards. Everything binds to 127.0.0.1.
``llama-lookup-create`` and ``llama-lookup`` (two small examples) make lookup cache files for the tests of
``-lcs``/``-lcd``.
On real machines see docs/beyond-one-machine.md (and llama.cpp's own warning: RPC is unauthenticated).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_build  # noqa: E402  (the vendored llama.cpp, unpacked and built into the cache)

from rml_chat.engines import cpu_quirks  # noqa: E402  (fetch_test_data puts the project on the path)

FLAGS = ["-DGGML_RPC=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
         "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DCMAKE_BUILD_TYPE=Release"]
TARGETS = ("llama-server", "ggml-rpc-server", "llama-lookup-create", "llama-lookup")


def root() -> Path:
    return llama_build.root()


def binary(name: str) -> Path:
    return llama_build.binary(name)


def built() -> bool:
    return llama_build.built("build", TARGETS)


def build(say=print) -> None:
    """Build the binaries unless they are there."""
    llama_build.build("build", FLAGS, TARGETS, say)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Cluster:
    """Running RPC workers and the server that uses them (all on 127.0.0.1)."""

    url: str
    workers: list[str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    log: Path | None = None

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def server(self) -> subprocess.Popen:
        return self.processes[-1]

    def greedy(self, ids: Sequence[int], n: int) -> dict:
        """llama-server's greedy completion of these prompt ids, ``n`` tokens at most, its prompt cache
        off: its JSON (``tokens``, ``timings`` with the drafts' counts)."""
        body = {"prompt": list(ids), "n_predict": n, "temperature": 0, "cache_prompt": False, "return_tokens": True}
        request = urllib.request.Request(f"{self.url}/completion", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as answer:
            return json.loads(answer.read())


def start(model: Path, workers: int = 2, port: int | None = None, ctx: int = 4096, threads: int = 1,
          log: Path | None = None, timeout: float = 120, slots: int = 1, extra: Sequence[str] = ()) -> Cluster:
    """Start ``workers`` rpc-servers and a llama-server over them (``slots``: its -np; ``extra``: more of
    its flags), and wait until it answers /health."""
    build()
    sink = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (kept open for the processes)
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(workers)]
    port = port or free_port()
    cluster = Cluster(f"http://127.0.0.1:{port}", addresses, log=log)
    try:
        for address in addresses:
            cluster.processes.append(subprocess.Popen(
                [str(binary("ggml-rpc-server")), "-H", "127.0.0.1", "-p", address.split(":")[1], "-t", str(threads)],
                stdout=sink, stderr=sink))
        for address in addresses:
            _wait_for_port(address, timeout)
        command = [str(binary("llama-server")), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                   "-c", str(ctx), "-t", str(threads), "--no-webui", "-np", str(slots), *extra]
        if cpu_quirks.no_extra_buffers():
            command += ["--no-repack"]  # (llama.cpp's AMX kernels crash: rml_chat/engines/cpu_quirks.py)
        if log:
            command += ["-lv", "4"]  # the log then says which device holds which layers
        if addresses:
            command += ["--rpc", ",".join(addresses), "-ngl", "99"]
        cluster.processes.append(subprocess.Popen(command, stdout=sink, stderr=sink))
        _wait_for_health(cluster, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_for_port(address: str, timeout: float) -> None:
    host, port = address.split(":")
    end = time.time() + timeout
    while time.time() < end:
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"cluster: no RPC worker answered on {address}")


def _wait_for_health(cluster: Cluster, timeout: float) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if cluster.server().poll() is not None:
            raise RuntimeError(f"cluster: llama-server exited ({cluster.server().returncode}); see {cluster.log}")
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(cluster.url + "/health", timeout=2) as answer:
                if json.loads(answer.read()).get("status") == "ok":
                    return
        time.sleep(0.2)
    raise RuntimeError(f"cluster: llama-server did not become ready in {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build")
    run = sub.add_parser("start")
    run.add_argument("model", type=Path)
    run.add_argument("--workers", type=int, default=2)
    run.add_argument("--port", type=int, default=8080)
    run.add_argument("--ctx", type=int, default=4096)
    run.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.command == "build":
        build()
        print(f"built: {binary('llama-server')} and {binary('ggml-rpc-server')}")
        return
    cluster = start(args.model, args.workers, args.port, args.ctx, args.threads, root() / "cluster.log")
    print(f"llama-server at {cluster.url} over RPC workers {', '.join(cluster.workers)}; Ctrl-C stops them "
          f"(log: {cluster.log})")
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
