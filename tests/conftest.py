"""Shared fixtures: the cached test data (fetched on first use) and llama.cpp oracles."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fetch_test_data", ROOT / "scripts" / "fetch_test_data.py")
fetch = importlib.util.module_from_spec(_spec)
sys.modules["fetch_test_data"] = fetch
_spec.loader.exec_module(fetch)  # type: ignore[union-attr]
sys.path.insert(0, str(ROOT / "scripts"))
import make_hf_test_files as hf_files  # noqa: E402

#: every llama.cpp test vocabulary with .inp/.out that is BPE or SentencePiece.
VOCABS = ["command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2", "llama-bpe", "llama-spm",
          "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"]
BYTE_LEVEL_VOCABS = ["gpt-2", "llama-bpe", "qwen2", "command-r", "starcoder"]
_TABLES_DIR = tempfile.mkdtemp(prefix="rml-chat-tables-")
#: runs of the suite don't restore each other's prompts (test_prompt_cache.py gives each test its own folder)
os.environ["RML_CHAT_PROMPT_CACHE"] = "off"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Tokenizer tables, chat formats and autosaves go to a folder of this session (the user's entries are
    never read)."""
    os.environ["RML_CHAT_TOKENIZER_CACHE"] = _TABLES_DIR
    os.environ["RML_CHAT_FORMAT_CACHE"] = os.path.join(_TABLES_DIR, "chat-formats")
    os.environ["RML_CHAT_SESSIONS"] = os.path.join(_TABLES_DIR, "sessions")  # the REPL's autosaves
    # the commands tests start read stdin only where a test hands them some: -p with a pipe on stdin takes
    # the piped text too, and the runner's own stdin (a CI pipe that never closes) is none of theirs
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # a suite started in the background by a shell without job control (``nohup … &``, some CI runners)
    # inherits SIGINT ignored, and so would every rml-chat it starts: the Ctrl-C tests need it delivered
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fetch the sdist vocabularies and the two models into the cache if they are not there yet — only when
    a selected test needs them: a run of offline tests alone (``-m offline``, ``-m "offline and not
    accel"``, one offline file …) downloads nothing, whatever selected it."""
    if all(item.get_closest_marker("offline") is not None for item in session.items):
        return
    fetch.fetch_llama_cpp_models(lambda m: print(m, file=sys.stderr))
    fetch.fetch_smollm(lambda m: print(m, file=sys.stderr))
    fetch.fetch_gemma(lambda m: print(m, file=sys.stderr))
    hf_files.build()


def model_path(name: str) -> Path:
    if name == "smollm2":
        return fetch.smollm_path()
    if name == "gemma3":
        return fetch.gemma_path()
    return fetch.models_dir() / f"ggml-vocab-{name}.gguf"


def smollm_with_template(target: Path, template: str) -> str:
    """A copy of SmolLM2's GGUF under another chat template of llama.cpp's set (``template``: the file's stem),
    written by the gguf package's own script; its path."""
    import subprocess

    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(target),
                    "--chat-template-file", str(fetch.models_dir() / "templates" / f"{template}.jinja"), "--force"],
                   check=True, capture_output=True)
    return str(target)


@functools.lru_cache(maxsize=4)
def ours(name: str):
    import tokenizer

    return tokenizer.load(model_path(name))


_ORACLES: dict[str, object] = {}


def oracle(name: str):
    """llama.cpp's own tokenizer for the same file (vocab only); one kept open at a time."""
    import llama_cpp

    if name not in _ORACLES:
        close_oracles()
        _ORACLES[name] = llama_cpp.Llama(model_path=str(model_path(name)), vocab_only=True, verbose=False)
    return _ORACLES[name]


def close_oracles() -> None:
    for llm in _ORACLES.values():
        llm.close()  # type: ignore[attr-defined]
    _ORACLES.clear()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    close_oracles()  # before interpreter shutdown, where llama-cpp-python's __del__ would complain
    shutil.rmtree(_TABLES_DIR, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def corpus() -> list[str]:
    lines = (ROOT / "fixtures" / "corpus.jsonl").read_text(encoding="utf-8").split("\n")
    return [json.loads(line)["text"] for line in lines if line]


def read_in_bulk(monkeypatch: pytest.MonkeyPatch, from_count: int) -> None:
    """Make ``tokenizer.accel.bulk`` read string arrays of ``from_count`` strings or more (1: every array; 10**9:
    none, the plain reader), numpy imported or not."""
    from tokenizer.accel import bulk

    monkeypatch.setattr(bulk, "BULK_MIN", from_count)
    monkeypatch.setattr(bulk, "BULK_MIN_IMPORTED", from_count)


@contextmanager
def busy_machine(processes: int):
    """``processes`` cores taken by processes started here, ended after: a loaded machine, made, not hoped
    for (a context manager)."""
    import subprocess

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


@contextmanager
def smollm_session(n_ctx: int, max_tokens: int, **sampling):
    """A chat session on SmolLM2 with greedy sampling, its engine closed afterwards."""
    from rml_chat.core.model import load_model
    from rml_chat.core.session import ChatSession, SessionOptions
    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine

    model = load_model(str(model_path("smollm2")))
    engine = LocalEngine(model.weights, n_ctx=n_ctx, n_threads=2)
    try:
        yield ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, max_tokens=max_tokens, **sampling)))
    finally:
        engine.close()


@pytest.fixture(scope="module")
def smollm():
    """SmolLM2 loaded and one engine on it (2,048 tokens, flash attention off), for a test module's turns."""
    from rml_chat.core.model import load_model
    from rml_chat.engines.local import LocalEngine

    model = load_model(str(model_path("smollm2")))
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2, flash_attn="off")
    yield model, engine
    engine.close()
