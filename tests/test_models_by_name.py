"""Models by name: ``-hf ORG/REPO[:QUANT]`` fetched through a real hub (olah serving git repositories built
from SmolLM2 and Gemma 3, ``hub_mirror.py``), and ``--models`` / ``rml-chat NAME`` over the four on-disk
layouts (the Hugging Face cache, llama.cpp's cache, LM Studio's folder, ollama's store) built here."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import hf_files, model_path, smollm_with_template
from hub_mirror import ORG, Olah, Relay, build_mirror, git_repo, sha256

from rml_chat.frontends.tools_setup import SMALL_TOOL_MODEL
from tokenizer.loaders.gguf_reader import read_metadata

ROOT = Path(__file__).resolve().parent.parent
SMOL = f"{ORG}/SmolLM2-135M-Instruct-GGUF"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    work = tmp_path_factory.mktemp("hub")
    smollm = model_path("smollm2")
    template = read_metadata(smollm, ("tokenizer.chat_template",))["tokenizer.chat_template"][1]
    sources = build_mirror(work / "mirrors", smollm, model_path("gemma3"),
                           hf_files.out_dir() / "smollm2" / "tokenizer.json", template)
    # the small tool-calling model rml-chat names where a model can't call tools: SmolLM2's weights under
    # Qwen 2.5's template, which calls them
    git_repo(work / "mirrors" / "models" / SMALL_TOOL_MODEL, {
        "qwen2.5-0.5b-instruct-q4_k_m.gguf": Path(smollm_with_template(work / "qwen.gguf", "Qwen-Qwen2.5-7B-Instruct"))})
    server = Olah(work / "mirrors", work)
    server.sources = sources
    yield server
    server.stop()


def _env(cache: Path, endpoint: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    return {**env, "HF_HOME": str(cache), "HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1", **extra}


def _cli(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rml_chat", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _one_line_error(done: subprocess.CompletedProcess[str], code: int = 1) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code and len(lines) == 1 and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    return lines[0]


def _snapshot_files(cache: Path, repo: str) -> dict[str, Path]:
    snapshots = cache / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots"
    return {str(p.relative_to(s)): p for s in snapshots.iterdir() for p in s.rglob("*") if p.is_file()} \
        if snapshots.is_dir() else {}


# ----- -hf through a real hub -------------------------------------------------------------------------------

def test_hf_with_a_quant_fetches_that_file_chats_and_a_rerun_fetches_nothing(hub, tmp_path) -> None:
    env = _env(tmp_path, hub.url)
    ask = ("-p", "Name a colour.", "--temp", "0", "-n", "8", "--json")
    done = _cli("-hf", f"{SMOL}:q4_1", *ask, env=env)
    assert done.returncode == 0, done.stderr
    files = _snapshot_files(tmp_path, SMOL)
    assert list(files) == ["SmolLM2-135M-Instruct-Q4_1.gguf"]  # the one named: not the Q8_0, never the mmproj
    assert sha256(files["SmolLM2-135M-Instruct-Q4_1.gguf"]) == sha256(model_path("smollm2"))
    local = _cli(str(model_path("smollm2")), *ask, env=env)
    assert json.loads(done.stdout)["reply"] == json.loads(local.stdout)["reply"]  # the same model, the same ids
    assert hub.gets("SmolLM2-135M-Instruct-Q4_1.gguf") == 1
    again = _cli("-hf", f"{SMOL}:Q4_1", *ask, env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["reply"] == json.loads(done.stdout)["reply"]
    assert hub.gets("SmolLM2-135M-Instruct-Q4_1.gguf") == 1  # the rerun asked the hub, and fetched nothing


def test_hf_without_a_quant_takes_llama_cpps_default_and_check_passes(hub, tmp_path) -> None:
    env = _env(tmp_path, hub.url)
    done = _cli("--check", "-hf", SMOL, env=env)  # no Q4_K_M here: Q8_0 is llama.cpp's next choice
    assert done.returncode == 0, done.stdout + done.stderr
    files = _snapshot_files(tmp_path, SMOL)
    assert list(files) == ["SmolLM2-135M-Instruct-Q8_0.gguf"]
    assert sha256(files["SmolLM2-135M-Instruct-Q8_0.gguf"]) == sha256(hub.sources[SMOL.split("/")[1]][
        "SmolLM2-135M-Instruct-Q8_0.gguf"])
    gemma = _cli("-hf", f"{ORG}/gemma-3-270m-GGUF", "-p", "The capital of France is", "--temp", "0", "-n", "4",
                 "--chat-format", "raw", env=env)  # (a base model) Q4_K_M, first by llama.cpp's rule
    assert gemma.returncode == 0 and gemma.stdout.strip(), gemma.stderr
    assert list(_snapshot_files(tmp_path, f"{ORG}/gemma-3-270m-GGUF")) == ["gemma-3-270m-Q4_K_M.gguf"]


def test_a_split_gguf_comes_whole_and_chats(hub, tmp_path) -> None:
    env = _env(tmp_path, hub.url)
    done = _cli("-hf", f"{ORG}/SmolLM2-135M-Instruct-split:Q4_1", "-p", "Name a colour.", "--temp", "0", "-n", "8",
                "--json", env=env)
    assert done.returncode == 0, done.stderr
    files = _snapshot_files(tmp_path, f"{ORG}/SmolLM2-135M-Instruct-split")
    assert sorted(files) == [f"SmolLM2-135M-Instruct-Q4_1-0000{k}-of-00003.gguf" for k in (1, 2, 3)]
    local = _cli(str(model_path("smollm2")), "-p", "Name a colour.", "--temp", "0", "-n", "8", "--json", env=env)
    assert json.loads(done.stdout)["reply"] == json.loads(local.stdout)["reply"]


def test_a_model_directory_repo_brings_what_the_loader_reads(hub, tmp_path) -> None:
    env = _env(tmp_path, hub.url)
    done = _cli("-hf", f"{ORG}/SmolLM2-135M-Instruct", "-p", "Name a colour.", "-n", "8", "--json", env=env)
    assert done.returncode == 0, done.stderr
    files = _snapshot_files(tmp_path, f"{ORG}/SmolLM2-135M-Instruct")
    assert sorted(files) == ["SmolLM2-135M-Instruct-Q4_1.gguf", "config.json", "generation_config.json",
                             "tokenizer.json", "tokenizer_config.json"]  # (not the safetensors index)
    assert json.loads(done.stdout)["sampling"]["temp"] == {"value": 0.3, "from": "model: generation_config.json temperature"}


def test_hf_works_in_the_repl_with_a_progress_bar_and_in_a_batch(hub, tmp_path) -> None:
    env = _env(tmp_path, hub.url)
    from test_repl import Terminal

    term = Terminal(tmp_path, "-hf", f"{SMOL}:Q4_1", "--temp", "0", "-n", "6", model=False, env=env)
    term.prompt_ready()
    term.ask(b"Name a colour.", b" evaluated")
    assert term.finish() == 0
    shown = term.output.decode("utf-8", "replace")
    bar = r"SmolLM2-135M-Instruct-Q4_1\.gguf  98\.4/98\.4 MB  [0-9.]+ MB/s\x1b\[K\r?\n"  # the size, the speed
    assert re.search(bar, shown), shown[:800]
    assert "rml-chat · SmolLM2-135M-Instruct-Q4_1" in shown
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"prompt": "Name a colour."}) + "\n")
    done = _cli("-hf", f"{SMOL}:Q4_1", "--batch", str(batch), "--temp", "0", "-n", "6", env=env)
    assert done.returncode == 0 and json.loads(done.stdout.splitlines()[0])["reply"], done.stderr
    assert "B/s" not in done.stderr  # (no bar where stderr is not a terminal)


def test_a_model_that_cant_call_tools_names_one_that_can_and_it_calls_them(hub, tmp_path) -> None:
    """Tools on the default model: one line that names a small model that calls tools; that command, as
    it is, fetches it through the hub and the call runs."""
    from test_tools import CITY_WEATHER

    env = _env(tmp_path, hub.url)
    (tmp_path / "fns.py").write_text(CITY_WEATHER)
    tools = ("--functions", str(tmp_path / "fns.py"), "-p", "What is the weather in Paris?")
    line = _one_line_error(_cli(str(model_path("smollm2")), *tools, env=env))
    named = re.search(r"rml-chat (-hf \S+)", line)
    assert named and "can't call tools" in line, line
    done = _cli(*named.group(1).split(), *tools, "--tools-approve", "--tool-choice", "required", "--temp", "0",
                "-n", "60", "--json", env=env)
    assert done.returncode == 0, done.stderr
    (call,) = json.loads(done.stdout)["tool_calls"]
    assert call["name"] == "get_weather" and call["result"] == f"Sunny, 21 C in {call['arguments']['city']}"


def test_bad_names_and_repositories_are_one_line_each(hub, tmp_path) -> None:
    env = _env(tmp_path, hub.url)
    line = _one_line_error(_cli("-hf", f"{SMOL}:IQ2_XS", "-p", "hi", env=env))
    assert "has no IQ2_XS file; it has Q4_1, Q8_0" in line
    assert "holds no GGUF model file" in _one_line_error(_cli("-hf", f"{ORG}/no-gguf", "-p", "hi", env=env))
    assert "no such repository" in _one_line_error(_cli("-hf", f"{ORG}/missing", "-p", "hi", env=env))
    assert "expected ORG/REPO[:QUANT]" in _one_line_error(_cli("-hf", "../../x", "-p", "hi", env=env))
    assert "has no file" in _one_line_error(_cli("-hf", SMOL, "--hf-file", "nope.gguf", "-p", "hi", env=env))
    assert not (tmp_path / "hub").exists() or not any((tmp_path / "hub").rglob("*.gguf"))


def test_offline_uses_the_cache_and_says_what_is_missing(hub, tmp_path) -> None:
    env = _env(tmp_path, hub.url)
    assert _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=env).returncode == 0
    dead = _env(tmp_path, "http://127.0.0.1:9", HF_HUB_OFFLINE="1")
    assert _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=dead).returncode == 0
    unreachable = _env(tmp_path, "http://127.0.0.1:9")  # (no server: the cache answers, as llama.cpp's does)
    assert _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=unreachable).returncode == 0
    line = _one_line_error(_cli("-hf", f"{SMOL}:Q8_0", "-p", "hi", env=dead))
    assert "Q8_0" in line or "not in the cache" in line


def test_ctrl_c_mid_download_then_a_rerun_resumes_and_the_file_is_whole(hub, tmp_path) -> None:
    relay = Relay(hub.url)
    try:
        relay.rate = 20e6  # 20 MB/s: the 98 MB file takes about 5 s
        env = _env(tmp_path, relay.url, HF_TOKEN="hf_" + "a" * 34)
        run = subprocess.Popen([sys.executable, "-m", "rml_chat", "-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2"],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while relay.body_bytes < 20e6 and run.poll() is None:
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 130 and "Traceback" not in err, err
        assert "the same command resumes it" in err
        assert not _snapshot_files(tmp_path, SMOL)  # the part is never taken for a model
        first = relay.body_bytes
        relay.rate = None
        done = _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=env)
        assert done.returncode == 0, done.stderr
        size = model_path("smollm2").stat().st_size
        assert relay.body_bytes - first < size - 10e6  # only the rest was fetched
        assert any(h.get("range", "").startswith("bytes=") for _, _, h in relay.requests)
        assert sha256(_snapshot_files(tmp_path, SMOL)["SmolLM2-135M-Instruct-Q4_1.gguf"]) == sha256(model_path("smollm2"))
        assert all(h.get("authorization") == "Bearer hf_" + "a" * 34 for _, _, h in relay.requests)  # HF_TOKEN
    finally:
        relay.stop()


def test_a_gated_repository_is_one_line_that_says_what_to_do(hub, tmp_path) -> None:
    relay = Relay(hub.url)
    try:  # (how huggingface.co answers a gated repository without an accepted token)
        relay.refuse_api = (401, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model is restricted."})
        line = _one_line_error(_cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", env=_env(tmp_path, relay.url)))
        assert "is gated" in line and "HF_TOKEN" in line
    finally:
        relay.stop()


def test_a_server_that_dies_mid_file_is_tried_again_within_the_run_and_no_part_is_a_model(hub, tmp_path) -> None:
    relay = Relay(hub.url)
    try:
        relay.cut_after = 30_000_000  # (every connection dies after 30 MB: the run goes on from there, by ranges)
        env = _env(tmp_path / "a", relay.url)
        done = _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=env)
        assert done.returncode == 0, done.stderr
        starts = [int(h["range"][6:-1]) for method, _, h in relay.requests if method == "GET" and "range" in h]
        assert len(starts) >= 3 and starts == sorted(starts) and 20e6 < starts[0] <= 30e6, starts  # (from the part's end)
        assert sha256(_snapshot_files(tmp_path / "a", SMOL)["SmolLM2-135M-Instruct-Q4_1.gguf"]) == \
            sha256(model_path("smollm2"))
        relay.cut_after = 0  # (dead before a byte, every time: the run gives up, in one line)
        env = _env(tmp_path / "b", relay.url)
        started = time.monotonic()
        line = _one_line_error(_cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", env=env))
        assert "broke or stalled 5 times in a row" in line and "the same command resumes it" in line, line
        assert time.monotonic() - started < 60
        assert not _snapshot_files(tmp_path / "b", SMOL)
        relay.cut_after = None
        assert _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=env).returncode == 0
    finally:
        relay.stop()


def test_a_stalled_body_times_out_and_the_run_resumes_it(hub, tmp_path) -> None:
    relay = Relay(hub.url)
    try:
        relay.stall_after, relay.stalls = 20_000_000, 1  # (the first body stops at 20 MB and holds the line open)
        env = _env(tmp_path / "a", relay.url, HF_HUB_DOWNLOAD_TIMEOUT="2")
        started = time.monotonic()
        done = _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=env, timeout=90)
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - started < 60
        starts = [int(h["range"][6:-1]) for method, _, h in relay.requests if method == "GET" and "range" in h]
        assert len(starts) == 1 and 15e6 < starts[0] <= 20e6, starts  # (one more try, from the part's end)
        assert sha256(_snapshot_files(tmp_path / "a", SMOL)["SmolLM2-135M-Instruct-Q4_1.gguf"]) == \
            sha256(model_path("smollm2"))
        relay.stall_after, relay.stalls = 0, 100  # (a hub that never sends a byte of the body)
        started = time.monotonic()
        line = _one_line_error(_cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", env=_env(tmp_path / "b", relay.url,
                                                                              HF_HUB_DOWNLOAD_TIMEOUT="2"), timeout=90))
        assert "ReadTimeout" in line and "the same command resumes it" in line, line
        assert time.monotonic() - started < 60
    finally:
        relay.stop()


def test_the_token_goes_to_the_hub_and_never_to_a_cdn_on_another_host(hub, tmp_path) -> None:
    cdn, front = Relay(hub.url), Relay(hub.url)
    try:
        front.redirect_to = cdn.url  # (huggingface.co sends a large file's address to its CDN, on another host)
        token = "hf_" + "b" * 34
        done = _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=_env(tmp_path, front.url, HF_TOKEN=token))
        assert done.returncode == 0, done.stderr
        assert any(m == "GET" and "/resolve/" in path for m, path, _ in cdn.requests)  # (the bytes came from there)
        assert not [h for _, _, h in cdn.requests if "authorization" in h]
        assert front.requests and all(h.get("authorization") == f"Bearer {token}" for _, _, h in front.requests)
        assert sha256(_snapshot_files(tmp_path, SMOL)["SmolLM2-135M-Instruct-Q4_1.gguf"]) == sha256(model_path("smollm2"))
    finally:
        cdn.stop()
        front.stop()


def test_the_official_client_fetching_the_same_file_waits_for_the_same_lock(hub, tmp_path) -> None:
    relay = Relay(hub.url)
    try:
        relay.rate = 20e6  # (about 5 s for the file)
        env = _env(tmp_path, relay.url)
        ours = subprocess.Popen([sys.executable, "-m", "rml_chat", "-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2"],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while relay.body_bytes < 10e6 and ours.poll() is None:
            time.sleep(0.05)
        theirs = subprocess.run([sys.executable, "-c", "import sys; from huggingface_hub import hf_hub_download; "
                                 "print(hf_hub_download(sys.argv[1], sys.argv[2]))", SMOL,
                                 "SmolLM2-135M-Instruct-Q4_1.gguf"], env=env, capture_output=True, text=True, timeout=120)
        _, err = ours.communicate(timeout=120)
        assert ours.returncode == 0 and theirs.returncode == 0, err + theirs.stderr
        size = model_path("smollm2").stat().st_size
        assert relay.body_bytes < 1.2 * size  # one download: the client waited on the lock, then found the blob
        assert sha256(Path(theirs.stdout.strip())) == sha256(model_path("smollm2"))
        locks = tmp_path / "hub" / ".locks" / f"models--{SMOL.replace('/', '--')}"
        blob = next((tmp_path / "hub" / f"models--{SMOL.replace('/', '--')}" / "blobs").iterdir())
        assert [p.name for p in locks.iterdir()] == [f"{blob.name}.lock"]  # the client's own, and no other
    finally:
        relay.stop()


def test_a_body_longer_than_the_size_named_is_refused_and_leaves_nothing(hub, tmp_path) -> None:
    relay = Relay(hub.url)
    try:
        relay.grow_by = 4096
        env = _env(tmp_path, relay.url)
        line = _one_line_error(_cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", env=env))
        assert "the hub sent more than the 98," in line and "the part was removed" in line, line
        assert not list((tmp_path / "hub").rglob("*.incomplete")) and not _snapshot_files(tmp_path, SMOL)
        relay.grow_by = 0  # (a good hub: the next run starts clean and works)
        assert _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=env).returncode == 0
    finally:
        relay.stop()


def _with_files(*names: str):  # type: ignore[no-untyped-def]
    def rewrite(body: bytes) -> bytes:
        listing = json.loads(body)
        listing["siblings"] += [{"rfilename": name, "size": 1000} for name in names]
        return json.dumps(listing).encode()
    return rewrite


def _sized(size: object):  # type: ignore[no-untyped-def]
    def rewrite(body: bytes) -> bytes:
        listing = json.loads(body)
        for sibling in listing["siblings"]:
            sibling["size"] = size
        return json.dumps(listing).encode()
    return rewrite


def test_a_silent_hostile_or_html_listing_is_one_line(hub, tmp_path) -> None:
    relay = Relay(hub.url)
    try:
        env = _env(tmp_path, relay.url, HF_HUB_DOWNLOAD_TIMEOUT="2")
        relay.api_rewrite = lambda _: b"<!doctype html><html><body>Sign in</body></html>"
        line = _one_line_error(_cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", env=env))
        assert "something other than the hub's JSON" in line and "not in the cache" in line, line
        relay.api_rewrite = _with_files("../../../../escape-Q2_K.gguf", "/etc/abs-Q2_K.gguf",
                                        "title\x1b]0;PWNED\x07-Q3_K.gguf", "bidi\u202egguf.Q3_K.gguf")
        for tag in ("Q2_K", "Q3_K"):
            done = _cli("-hf", f"{SMOL}:{tag}", "-p", "hi", env=env)
            assert f"has no {tag} file; it has Q4_1, Q8_0" in _one_line_error(done)
            assert "\x1b" not in done.stderr
        assert not list(tmp_path.rglob("escape-*")) and not list(tmp_path.rglob("*PWNED*"))
        for size in ("big", -98_000_000, True, 1e400):  # (sizes that are none: the file is fetched unsized)
            relay.api_rewrite = _sized(size)
            shutil.rmtree(tmp_path / "hub", ignore_errors=True)  # (the size counts for a file still to fetch)
            done = _cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", "-n", "2", env=env)
            assert done.returncode == 0, (size, done.stderr)
        shutil.rmtree(tmp_path / "hub")  # (with nothing cached, a hub that can't be reached is an error)
        relay.api_rewrite, relay.api_stall = None, 30  # (a hub that never answers the listing)
        started = time.monotonic()
        line = _one_line_error(_cli("-hf", f"{SMOL}:Q4_1", "-p", "hi", env=env, timeout=60))
        assert "cannot reach" in line and "Timeout" in line, line
        assert time.monotonic() - started < 25
    finally:
        relay.stop()


def test_a_full_disk_is_one_line(hub, tmp_path) -> None:
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))

    done = subprocess.run([sys.executable, "-m", "rml_chat", "-hf", f"{SMOL}:Q4_1", "-p", "hi"], cwd=ROOT,
                          env=_env(tmp_path, hub.url), capture_output=True, text=True, preexec_fn=limited, timeout=120)
    line = _one_line_error(done)
    assert "SmolLM2-135M-Instruct-Q4_1.gguf" in line and ("full" in line or "limit" in line)


# ----- the models already here: four layouts, built as their tools write them ---------------------------------

def _place(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)  # (another name for the same bytes: each layout holds its own file)
    except OSError:
        target.write_bytes(source.read_bytes())
    return target


def _machine(home: Path) -> dict[str, str]:
    """A home folder holding SmolLM2 in each tool's layout, and two damaged ollama models; its environment."""
    smollm, gemma = model_path("smollm2"), model_path("gemma3")
    commit = "1" * 40
    hf_repo = home / ".cache" / "huggingface" / "hub" / "models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF"
    blob = _place(smollm, hf_repo / "blobs" / ("e" * 64))
    (hf_repo / "refs").mkdir(parents=True)
    (hf_repo / "refs" / "main").write_text(commit)
    link = hf_repo / "snapshots" / commit / "smollm2-135m-instruct-q4_1.gguf"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    llama = home / ".cache" / "llama.cpp"
    _place(gemma, llama / "ggml-org_gemma-3-270m-GGUF_gemma-3-270m-Q4_K_M.gguf")
    (llama / "manifest=ggml-org=gemma-3-270m-GGUF=Q4_K_M.json").write_text(
        json.dumps({"ggufFile": {"rfilename": "gemma-3-270m-Q4_K_M.gguf"}}))
    _place(smollm, home / ".lmstudio" / "models" / "lmstudio-community" / "SmolLM2-135M-Instruct-GGUF"
           / "SmolLM2-135M-Instruct-Q4_1.gguf")
    store = home / ".ollama" / "models"
    digest = hub_sha = sha256(smollm)
    _place(smollm, store / "blobs" / f"sha256-{digest}")
    params = json.dumps({"temperature": 0.2, "top_k": 30, "stop": ["<|im_end|>"]}).encode()
    params_digest = __import__("hashlib").sha256(params).hexdigest()
    (store / "blobs" / f"sha256-{params_digest}").write_bytes(params)
    library = store / "manifests" / "registry.ollama.ai" / "library"

    def manifest(name: str, tag: str, layer_digest: str, size: int) -> None:
        (library / name).mkdir(parents=True, exist_ok=True)
        (library / name / tag).write_text(json.dumps({"schemaVersion": 2, "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{layer_digest}", "size": size},
            {"mediaType": "application/vnd.ollama.image.params", "digest": f"sha256:{params_digest}",
             "size": len(params)}]}))

    manifest("tinychat", "135m", hub_sha, smollm.stat().st_size)
    cut = store / "blobs" / f"sha256-{'c' * 64}"
    cut.write_bytes(smollm.read_bytes()[:1_000_000])
    manifest("broken", "latest", "c" * 64, smollm.stat().st_size)
    manifest("ghost", "latest", "d" * 64, 123)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_", "LLAMA_CACHE", "OLLAMA_", "XDG_CACHE_HOME"))}
    return {**env, "HOME": str(home)}


def test_models_lists_each_layout_and_each_name_opens(tmp_path) -> None:
    env = _machine(tmp_path)
    listed = _cli("--models", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    models = {m["name"]: m for m in json.loads(listed.stdout)["models"]}
    wanted = {"HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1": ("hf", "Q4_1", "smollm2"),
              "ggml-org/gemma-3-270m-GGUF:Q4_K_M": ("llama.cpp", "Q4_K_M", "gemma"),
              "lmstudio-community/SmolLM2-135M-Instruct-GGUF:Q4_1": ("lmstudio", "Q4_1", "smollm2"),
              "tinychat:135m": ("ollama", "Q4_1", "smollm2")}  # (ollama's blob has no name: its header's file type)
    for name, (source, quant, family) in wanted.items():
        m = models[name]
        assert (m["source"], m["quant"], m["chat_format"], m["problem"]) == (source, quant, family, None), m
        assert m["bytes"] == Path(m["weights"]).stat().st_size > 0
    assert models["tinychat:135m"]["sampling"] == {"temperature": 0.2, "top_k": 30, "stop": ["<|im_end|>"]}
    assert "holds 1,000,000 of the" in models["broken:latest"]["problem"]
    assert "which is not in" in models["ghost:latest"]["problem"]
    table = _cli("--models", env=env)
    assert table.returncode == 0 and "tinychat:135m" in table.stdout and "a pull cut short" in table.stdout
    ask = ("-p", "Name a colour.", "--temp", "0", "-n", "6", "--json")
    reference = json.loads(_cli(str(model_path("smollm2")), *ask, env=env).stdout)["reply"]
    for name in ("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "lmstudio:lmstudio-community/SmolLM2-135M-Instruct-GGUF",
                 "tinychat", "TINYCHAT:135M"):
        done = _cli(name, *ask, env=env)
        assert done.returncode == 0 and json.loads(done.stdout)["reply"] == reference, (name, done.stderr)
    published = json.loads(_cli("tinychat", "-p", "hi", "-n", "2", "--top-p", "0.9", "--json", env=env).stdout)["sampling"]
    assert published["temp"] == {"value": 0.2, "from": "model: ollama params temperature"}
    assert published["top_k"] == {"value": 30, "from": "model: ollama params top_k"}
    assert published["top_p"] == {"value": 0.9, "from": "flag"}  # (a flag wins over what it was published with)
    gemma = _cli("ggml-org/gemma-3-270m-GGUF:Q4_K_M", "--check", "--no-reply", env=env)
    assert gemma.returncode == 0, gemma.stdout + gemma.stderr


def test_a_name_that_is_ambiguous_missing_or_damaged_is_one_line(tmp_path) -> None:
    env = _machine(tmp_path)
    line = _one_line_error(_cli("SmolLM2-135M-Instruct-GGUF", "-p", "hi", env=env))
    assert "names 2 models here" in line and "lmstudio-community/SmolLM2-135M-Instruct-GGUF:Q4_1" in line
    assert "no model here by that name" in _one_line_error(_cli("no-such-model", "-p", "hi", env=env))
    assert "a pull cut short" in _one_line_error(_cli("broken", "-p", "hi", env=env))
    assert "which is not in" in _one_line_error(_cli("ghost:latest", "-p", "hi", env=env))
    assert "no such file or directory" in _one_line_error(_cli("./missing.gguf", "-p", "hi", env=env))


def test_a_run_without_hf_imports_no_hub_client() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "rml_chat", "--show-prompt", "-p", "hi"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "rml_chat.frontends.cli" in done.stderr  # (the import log is there)
    assert "huggingface_hub" not in done.stderr and "rml_chat.models" not in done.stderr


@pytest.mark.server
def test_hf_names_the_model_of_a_server_run(hub, tmp_path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import cluster

    running = cluster.start(model_path("smollm2"), workers=0, ctx=1024, log=tmp_path / "server.log")
    try:
        env = _env(tmp_path, hub.url)
        done = _cli("--server", running.url, "-hf", f"{SMOL}:Q4_1", "-p", "Name a colour.", "--temp", "0", "-n", "6",
                    "--json", env=env)
        local = _cli("--server", running.url, str(model_path("smollm2")), "-p", "Name a colour.", "--temp", "0", "-n",
                     "6", "--json", env=env)  # (the same server, the model named by its path)
        assert done.returncode == 0 and json.loads(done.stdout)["reply"] == json.loads(local.stdout)["reply"], done.stderr
        assert list(_snapshot_files(tmp_path, SMOL)) == ["SmolLM2-135M-Instruct-Q4_1.gguf"]
    finally:
        running.stop()


def test_hostile_stores_are_listed_in_bounded_time_and_the_good_models_still_open(tmp_path) -> None:
    """A manifest nested 100,000 deep, one with a size of 1e999, a 2 GB sparse one, a FIFO as the Hugging
    Face cache's refs/main, a link to /dev/zero and 10,000 files in LM Studio's folder, and two ollama names
    of one blob (``ollama cp``): --models lists within a minute, with no traceback, and both names open."""
    env = _machine(tmp_path)
    store = tmp_path / ".ollama" / "models"
    library = store / "manifests" / "registry.ollama.ai" / "library"
    (library / "tinycopy").mkdir()
    shutil.copy(library / "tinychat" / "135m", library / "tinycopy" / "latest")  # (ollama cp: another name)
    (library / "deep").mkdir()
    (library / "deep" / "latest").write_text("[" * 100_000 + "]" * 100_000)
    (library / "huge").mkdir()
    (library / "huge" / "latest").write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "e" * 64, "size": 1e999}]}))
    with open(library / "huge" / "sparse", "wb") as handle:
        handle.truncate(2 << 30)
    hf_refs = tmp_path / ".cache" / "huggingface" / "hub" / "models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF" / "refs"
    (hf_refs / "main").unlink()
    os.mkfifo(hf_refs / "main")
    crowd = tmp_path / ".lmstudio" / "models" / "someone" / "many"
    crowd.mkdir(parents=True)
    for n in range(10_000):
        (crowd / f"m-{n:05d}-of-10000.gguf").touch()
    (crowd / "zero.gguf").symlink_to("/dev/zero")
    began = time.monotonic()
    listed = _cli("--models", "--json", env=env)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert time.monotonic() - began < 60  # (a bound on a hang or a quadratic scan, not a speed test)
    models = {m["name"]: m for m in json.loads(listed.stdout)["models"]}
    assert models["tinychat:135m"]["problem"] is None and models["tinycopy:latest"]["problem"] is None
    assert "names no model layer" in models["deep:latest"]["problem"]
    assert "names no model layer" in models["huge:latest"]["problem"]
    assert models["HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1"]["problem"] is None  # (the newest snapshot)
    for name in ("tinycopy", "tinychat"):
        done = _cli(name, "-p", "Hi", "--temp", "0", "-n", "2", env=env)
        assert done.returncode == 0, (name, done.stderr)


@pytest.mark.parametrize("variable", ["HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_ETAG_TIMEOUT"])
def test_a_hub_setting_the_client_cannot_read_is_named_in_one_line(variable: str, tmp_path) -> None:
    """The client reads its variables as it is imported, and raised on a value that is not a number: an
    internal error that named no variable."""
    done = subprocess.run([sys.executable, "-m", "rml_chat", "-hf", "org/repo", "-p", "hi"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, variable: "abc", "HF_HOME": str(tmp_path)})
    assert done.returncode == 1
    assert done.stderr == (f"rml-chat: model: -hf: the Hugging Face client can't start: {variable}=abc is not a "
                           "number (invalid literal for int() with base 10: 'abc')\n")
