"""A real Hugging Face hub for the tests: olah (PyPI), a self-hosted mirror, serving git repositories built
here from SmolLM2 and Gemma 3; and a relay in front of it that can slow a download, cut it, or note the
headers it was sent, as a distant or dying server would. olah sends a mirrored file whole whatever the
``Range`` asked; huggingface.co answers a range with ``206 Partial Content``, and so does the relay.

The repositories (``MIRRORS/models/test-org/…``, each a git repository on branch ``main``):

| repository                         | files                                                                  |
|------------------------------------|------------------------------------------------------------------------|
| ``SmolLM2-135M-Instruct-GGUF``     | ``…-Q4_1.gguf`` (SmolLM2), ``…-Q8_0.gguf`` (its copy, named Q8_0), an ``mmproj`` |
| ``SmolLM2-135M-Instruct-split``    | ``…-Q4_1-0000K-of-00003.gguf``: SmolLM2 split by the gguf package's writer |
| ``gemma-3-270m-GGUF``              | ``gemma-3-270m-Q4_K_M.gguf``, ``gemma-3-270m-Q8_0.gguf`` (Gemma 3's copy) |
| ``SmolLM2-135M-Instruct``          | a model directory: tokenizer.json, its configs and a GGUF               |
| ``no-gguf``                        | a README and a config.json                                             |
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ORG = "test-org"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def renamed_copy(source: Path, target: Path, name_from: bytes, name_to: bytes, file_type: int | None = None) -> None:
    """A byte-for-byte copy with ``general.name``'s value changed in place (same length) and, when given,
    ``general.file_type``: another file, as loadable as the first."""
    data = bytearray(source.read_bytes())
    at = data.index(name_from)
    data[at:at + len(name_from)] = name_to
    if file_type is not None:
        key = data.index(b"general.file_type") + len(b"general.file_type")
        data[key + 4:key + 8] = file_type.to_bytes(4, "little")  # (after the u32 value type)
    target.write_bytes(bytes(data))


def split_gguf(source: Path, first: Path, parts: int) -> list[Path]:
    """``source`` split in ``parts`` files by the gguf package's writer (``split_max_tensors``), as
    ``gguf-split`` splits; the paths, first part first."""
    import gguf

    reader = gguf.GGUFReader(source)
    arch = reader.get_field("general.architecture").contents()
    per_part = -(-len(reader.tensors) // parts)
    stem = str(first).removesuffix(f"-00001-of-{parts:05d}.gguf")
    writer = gguf.GGUFWriter(stem + ".gguf", arch, split_max_tensors=per_part)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        kind = field.types[0]
        writer.add_key_value(field.name, field.contents(), kind,
                             sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return [Path(f"{stem}-{k:05d}-of-{parts:05d}.gguf") for k in range(1, parts + 1)]


def git_repo(folder: Path, files: dict[str, Path | bytes]) -> str:
    """A git repository on branch main holding ``files``; its commit."""
    folder.mkdir(parents=True)
    for name, content in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            shutil.copyfile(content, target)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "core.compression=0",
           "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "files"], cwd=folder, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, check=True, capture_output=True,
                          text=True).stdout.strip()


def build_mirror(root: Path, smollm: Path, gemma: Path, tokenizer_json: Path, template: str) -> dict[str, dict[str, Path]]:
    """The repositories above under ``root/models/test-org``; repository -> file -> the source it was made from."""
    made = root / "made"
    made.mkdir(parents=True)
    q8 = made / "SmolLM2-135M-Instruct-Q8_0.gguf"
    renamed_copy(smollm, q8, b"Mix1 Ep2", b"Mix1 Q80", file_type=7)
    gemma_q8 = made / "gemma-3-270m-Q8_0.gguf"
    name = _general_name(gemma)
    renamed_copy(gemma, gemma_q8, name, name[:-3] + b"Q80", file_type=7)
    split = split_gguf(smollm, made / "SmolLM2-135M-Instruct-Q4_1-00001-of-00003.gguf", 3)
    repos: dict[str, dict[str, Path | bytes]] = {
        "SmolLM2-135M-Instruct-GGUF": {"README.md": b"# SmolLM2 135M Instruct, GGUF\n",
                                       "SmolLM2-135M-Instruct-Q4_1.gguf": smollm,
                                       "SmolLM2-135M-Instruct-Q8_0.gguf": q8,
                                       "mmproj-SmolLM2-135M-F16.gguf": b"GGUF not a model"},
        "SmolLM2-135M-Instruct-split": {p.name: p for p in split},
        "gemma-3-270m-GGUF": {"gemma-3-270m-Q8_0.gguf": gemma_q8, "gemma-3-270m-Q4_K_M.gguf": gemma},
        "SmolLM2-135M-Instruct": {"tokenizer.json": tokenizer_json,
                                  "tokenizer_config.json": json.dumps({"chat_template": template,
                                                                       "eos_token": "<|im_end|>"}).encode(),
                                  "generation_config.json": json.dumps({"temperature": 0.3}).encode(),
                                  "config.json": b"{}", "model.safetensors.index.json": b"{}",
                                  "SmolLM2-135M-Instruct-Q4_1.gguf": smollm},
        "no-gguf": {"README.md": b"# weights elsewhere\n", "config.json": b"{}"},
    }
    for repo, files in repos.items():
        git_repo(root / "models" / ORG / repo, files)
    return {repo: {name: src for name, src in files.items() if isinstance(src, Path)} for repo, files in repos.items()}


def _general_name(path: Path) -> bytes:
    from tokenizer.loaders.gguf_reader import read_metadata

    return read_metadata(path, ("general.name",))["general.name"][1].encode()


class Olah:
    """``python -m olah.server`` in offline mode over ``mirrors``; ``url``, ``log`` (its access log), ``stop()``."""

    def __init__(self, mirrors: Path, work: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = work / "olah.toml"
        config.write_text(f'[basic]\nhost = "127.0.0.1"\nport = {self.port}\nmirrors-path = ["{mirrors}"]\n'
                          f'repos-path = "{work / "olah-repos"}"\nmirror-netloc = "127.0.0.1:{self.port}"\n'
                          f'mirror-lfs-netloc = "127.0.0.1:{self.port}"\n[accessibility]\noffline = true\n')
        self.log = work / "olah.log"
        self._log_handle = open(self.log, "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "olah.server", "-c", str(config), "--log-path",
                                         str(work / "olah-logs")], cwd=work, stdout=self._log_handle,
                                        stderr=subprocess.STDOUT)
        end = time.time() + 60
        while time.time() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.2)
        raise RuntimeError("olah did not start: " + self.log.read_text(errors="replace")[-2000:])

    def gets(self, file: str) -> int:
        """How many GET requests for ``file`` the access log holds."""
        return sum(1 for line in self.log.read_text(errors="replace").splitlines()
                   if '"GET ' in line and "/resolve/" in line and file in line)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        self._log_handle.close()


class Relay:
    """An HTTP relay to ``upstream`` that can behave as a distant, dying or hostile hub:

    * ``rate``: slow downloads (bytes/s); ``cut_after``: close every body after that many bytes (a server
      that dies; a file's body only); ``stall_after`` with ``stalls``: the next ``stalls`` bodies stop after that many bytes and
      hold the connection open, sending nothing (a stalled CDN);
    * ``grow_by``: a body that many bytes longer than the size the hub named for the file;
    * ``redirect_to``: answer a file's address as huggingface.co answers a large file's, a redirect to a CDN
      on another host (another relay), with the file's size and digest in ``X-Linked-*`` headers;
    * ``refuse_api``: answer the API as the hub answers a gated repository; ``api_rewrite``: change the
      listing's body (HTML, a hostile file name); ``api_stall``: answer the listing only after that many
      seconds (a hub that never answers);

    and keeps each request's headers (``requests``)."""

    def __init__(self, upstream: str):
        self.upstream = upstream.split("://")[1]
        self.rate: float | None = None
        self.cut_after: int | None = None
        self.stall_after: int | None = None
        self.stalls = 0
        self.grow_by = 0
        self.redirect_to: str | None = None
        self.refuse_api: tuple[int, dict[str, str]] | None = None  # (status, headers) for every /api/ request
        self.api_rewrite: Callable[[bytes], bytes] | None = None
        self.api_stall = 0.0
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path, headers in lower case)
        self.body_bytes = 0
        self.stopped = threading.Event()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._relay(body=False)

            def do_GET(self) -> None:
                self._relay(body=True)

            def _relay(self, body: bool) -> None:
                headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                relay.requests.append((self.command, self.path, dict(headers)))
                if self.path.startswith("/api/") and relay.api_stall:
                    relay.stopped.wait(relay.api_stall)
                if self.path.startswith("/api/") and relay.api_rewrite is not None and not relay.refuse_api:
                    self._rewritten_api(headers)
                    return
                if relay.redirect_to and "/resolve/" in self.path:
                    self._redirect(headers)
                    return
                if relay.refuse_api and self.path.startswith("/api/"):
                    status, extra = relay.refuse_api
                    body = json.dumps({"error": extra.get("X-Error-Message", "refused")}).encode()
                    self.send_response(status)
                    for key, value in {**extra, "Content-Type": "application/json",
                                       "Content-Length": str(len(body)), "Connection": "close"}.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body if body else b"")
                    self.close_connection = True
                    return
                start = int(m[1]) if (m := re.fullmatch(r"bytes=(\d+)-", headers.pop("range", ""))) else 0
                total = None
                if start:  # (olah sends it all: ask its size, then skip to the range's start)
                    probe = http.client.HTTPConnection(relay.upstream, timeout=60)
                    probe.request("HEAD", self.path, headers=headers)
                    total = int(probe.getresponse().getheader("Content-Length") or 0)
                    probe.close()
                upstream = http.client.HTTPConnection(relay.upstream, timeout=60)
                upstream.request(self.command, self.path, headers=headers)
                answer = upstream.getresponse()
                partial = bool(start and total and answer.status == 200)
                grow = relay.grow_by if body and "/resolve/" in self.path else 0
                self.send_response(206 if partial else answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("connection", "transfer-encoding", "server", "date", "content-length"):
                        self.send_header(key, value.replace(relay.upstream, f"127.0.0.1:{relay.port}"))
                if partial:
                    self.send_header("Content-Range", f"bytes {start}-{total - 1 + grow}/{total + grow}")
                    self.send_header("Content-Length", str(total - start + grow))
                elif answer.getheader("Content-Length"):
                    self.send_header("Content-Length", str(int(answer.getheader("Content-Length")) + grow))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Connection", "close")
                self.end_headers()
                skip = start if partial else 0
                while body and skip and (chunk := answer.read(min(skip, 1 << 16))):
                    skip -= len(chunk)
                sent = 0
                stall = relay.stall_after if body and relay.stalls > 0 and "/resolve/" in self.path else None
                if stall is not None:
                    relay.stalls -= 1
                cut = relay.cut_after if "/resolve/" in self.path else None
                while body and (chunk := answer.read(1 << 16)):
                    if cut is not None and sent + len(chunk) > cut:
                        self.wfile.write(chunk[:cut - sent])
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        break
                    if stall is not None and sent + len(chunk) > stall:
                        self.wfile.write(chunk[:stall - sent])
                        self.wfile.flush()
                        relay.body_bytes += stall - sent
                        relay.stopped.wait(120)  # (the connection held open, silent)
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    relay.body_bytes += len(chunk)
                    if relay.rate:
                        time.sleep(len(chunk) / relay.rate)
                if body and grow and sent:
                    self.wfile.write(b"\0" * grow)
                upstream.close()
                self.close_connection = True

            def _rewritten_api(self, headers: dict[str, str]) -> None:
                upstream = http.client.HTTPConnection(relay.upstream, timeout=60)
                upstream.request("GET", self.path, headers=headers)
                answer = upstream.getresponse()
                content = relay.api_rewrite(answer.read())
                upstream.close()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(content)
                self.close_connection = True

            def _redirect(self, headers: dict[str, str]) -> None:
                """A file's address answered as the hub answers a large file's: 302 to the CDN, with the
                file's digest, size and commit named here."""
                probe = http.client.HTTPConnection(relay.upstream, timeout=60)
                probe.request("HEAD", self.path, headers=headers)
                known = probe.getresponse()
                etag = known.getheader("X-Linked-Etag") or known.getheader("ETag") or ""
                size = known.getheader("X-Linked-Size") or known.getheader("Content-Length") or "0"
                commit = known.getheader("X-Repo-Commit") or ""
                probe.close()
                self.send_response(302)
                self.send_header("Location", f"{relay.redirect_to}{self.path}?signature=cdn")
                self.send_header("X-Linked-Etag", etag)
                self.send_header("X-Linked-Size", size)
                self.send_header("X-Repo-Commit", commit)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()
