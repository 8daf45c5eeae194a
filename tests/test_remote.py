"""The chat on llama.cpp's server over two ggml RPC workers, fed our ids; everything on 127.0.0.1.

The binaries are built once from the llama-cpp-python sdist into the cache (scripts/cluster.py; ~6-10
minutes the first time, then reused). Requests are bounded: a few tokens each, timeouts on every wait.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import resource
import subprocess
import sys
import threading

import pytest
from conftest import ROOT, model_path

from rml_chat.core.model import load_model
from rml_chat.core.session import ChatSession, SessionOptions
from rml_chat.engines import server as server_engine
from rml_chat.engines.base import Sampling
from rml_chat.engines.local import LocalEngine
from rml_chat.engines.server import ServerEngine, ServerError

sys.path.insert(0, str(ROOT / "scripts"))
import cluster  # noqa: E402

pytestmark = pytest.mark.server

GREEDY = Sampling(temp=0.0, seed=0, max_tokens=24)
QUESTIONS = ["Name three colors.", "Which of them is warm?", "Say it in French."]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cluster.build(lambda line: print(line, file=sys.stderr))
    running = cluster.start(model_path("smollm2"), workers=2, ctx=2048, threads=1,
                            log=tmp_path_factory.mktemp("cluster") / "cluster.log")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def model():
    return load_model(str(model_path("smollm2")))


def _chat(session: ChatSession) -> list[tuple[str, int]]:
    out = []
    for question in QUESTIONS:
        result = session.turn(question, lambda _: None, lambda _: None)
        out.append((result.reply, result.generation.evaluated))
    return out


def test_the_cluster_spreads_the_model_over_both_workers(server) -> None:
    log = server.log.read_text(errors="replace")
    for address in server.workers:  # llama-server's own account of where the weights and the KV cache went
        assert "using device RPC" in log and f"[{address}] model buffer size" in log, address
        assert f"[{address}] KV buffer size" in log, address
    assert "offloaded 31/31 layers" in log


def test_a_remote_chat_gives_the_local_engines_greedy_replies_and_turn_two_evaluates_only_new_ids(server, model):
    remote = ChatSession(model, ServerEngine(server.url), SessionOptions(Sampling(**vars(GREEDY))))
    remote.engine.check_vocabulary(model.tokenizer, model.source)
    local = ChatSession(model, LocalEngine(model.weights, n_ctx=2048, n_threads=1), SessionOptions(Sampling(**vars(GREEDY))))
    try:
        theirs, ours = _chat(remote), _chat(local)
    finally:
        local.engine.close()
    assert [reply for reply, _ in theirs] == [reply for reply, _ in ours]
    assert all(reply.strip() for reply, _ in theirs)
    new_message = len(model.encoder.encode(model.encoder.format([{"role": "user", "content": QUESTIONS[1]}])))
    assert 0 < theirs[1][1] <= new_message + 2  # the server's own count: its prompt cache held the rest


#: each sampler of llama.cpp's chain away from its default, then all of them in another order (sampler_chain.py)
ONE_EACH = {"top-k": {"top_k": 5}, "top-p": {"top_p": 0.8}, "min-p": {"min_p": 0.1}, "typical": {"typical_p": 0.7},
            "top-n-sigma": {"top_n_sigma": 1.5}, "xtc": {"xtc_probability": 0.5, "xtc_threshold": 0.05},
            "penalties": {"repeat_last_n": 32, "repeat_penalty": 1.3, "presence_penalty": 0.5, "frequency_penalty": 0.4},
            "dry": {"dry_multiplier": 1.0, "dry_base": 1.5, "dry_allowed_length": 1, "dry_sequence_breakers": ("\n",)},
            "dynatemp": {"dynatemp_range": 0.5, "dynatemp_exp": 2.0}, "logit-bias": {"logit_bias": ((330, 3.0), (28, -2.0))},
            "order": {"samplers": ("temperature", "top_k", "min_p")}}
SAMPLED = {"greedy": Sampling(temp=0.0, max_tokens=64),
           **{name: Sampling(temp=0.9, seed=11, max_tokens=64, **settings) for name, settings in ONE_EACH.items()},
           "every-sampler": Sampling(temp=0.9, seed=42, max_tokens=64, top_k=60, top_p=0.9, min_p=0.02, typical_p=0.95,
                                     top_n_sigma=2.5, xtc_probability=0.3, xtc_threshold=0.2, repeat_last_n=32,
                                     repeat_penalty=1.1, presence_penalty=0.3, frequency_penalty=0.2,
                                     dry_multiplier=0.8, dry_base=1.5, dry_allowed_length=3, dry_penalty_last_n=48,
                                     dry_sequence_breakers=("\n", "."), dynatemp_range=0.3, dynatemp_exp=1.2,
                                     logit_bias=((330, 2.0), (28, -1.5)),
                                     samplers=("dry", "penalties", "top_k", "typ_p", "top_n_sigma", "top_p", "min_p",
                                               "xtc", "temperature")),
           "mirostat-2": Sampling(temp=0.7, seed=9, max_tokens=64, mirostat=2, mirostat_ent=4.0, mirostat_lr=0.2),
           "mirostat-1-ignore-eos": Sampling(temp=0.7, seed=5, max_tokens=64, mirostat=1, ignore_eos=True)}


#: the cases whose whole chain the device can run (the rest stop at XTC, DRY, top-n-sigma, typical or Mirostat)
ALL_ON_DEVICE = {"greedy", "top-k", "top-p", "min-p", "penalties", "dynatemp", "logit-bias", "order"}


@pytest.mark.parametrize("backend_sampling", [False, True], ids=["on-the-cpu", "backend-sampling"])
def test_the_sampler_chain_draws_the_same_tokens_as_llama_server_from_the_same_seed(model, tmp_path,
                                                                                     backend_sampling) -> None:
    """llama-server builds its chain from the request's fields (common_sampler_init); ours is built stage by
    stage (sampler_chain.py): from the same logits, the same seed draws the same tokens. The same logits:
    the server in this process's own setup (no RPC workers, both at llama.cpp's defaults), and the prompt
    evaluated once by both before (its last token then evaluated alone on both sides).

    With ``-bs`` on both sides (llama-server's ``backend_sampling`` request field) the chain runs in the
    graph, as far as the device can run its stages, and the same seed still draws llama-server's tokens.
    Where the whole chain ran there, every token was drawn there; where a stage can't (XTC on, DRY on,
    Mirostat …), none was: the rest of the chain ran here after the device's part, as on the server."""
    from dataclasses import replace

    from rml_chat.engines.base import Generation

    running = cluster.start(model_path("smollm2"), workers=0, ctx=2048, threads=1, log=tmp_path / "server.log")
    local = LocalEngine(model.weights, n_ctx=2048, n_threads=1)
    try:
        ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Tell me about the moon."}]))
        engines = (local, ServerEngine(running.url))
        for engine in engines:
            list(engine.generate(ids, Sampling(temp=0.0, max_tokens=1), model.stop_ids, Generation()))
        drawn, ours = {}, {name: Generation() for name in SAMPLED}
        for name, sampling in SAMPLED.items():
            drawn[name] = [list(engine.generate(ids, replace(sampling, backend_sampling=backend_sampling),
                                                model.stop_ids, gen))
                           for engine, gen in ((local, ours[name]), (engines[1], Generation()))]
    finally:
        local.close()
        running.stop()
    for name, (mine, theirs) in drawn.items():
        assert mine == theirs and len(mine) >= 32, name
        whole = backend_sampling and name in ALL_ON_DEVICE  # (>=: the stop id is drawn too)
        assert (ours[name].on_device >= len(mine)) if whole else ours[name].on_device == 0, name
    assert len({tuple(drawn[name][0]) for name in ("greedy", "every-sampler", "mirostat-2")}) == 3  # (settings that matter)


FRESH_PROMPTS = ["Tell me about the moon.", "Write a haiku about rain.", "What is a prime number?",
                 "Describe a busy market.", "Why is the sea salty?", "Give me three names for a cat."]


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_a_prompt_is_evaluated_as_llama_server_evaluates_it_so_a_seed_draws_its_reply(name, tmp_path) -> None:
    """Sampled replies on both sides, each prompt new to both (its shared start reused by both): llama-server
    evaluates what is new in one batch with the last id, and so do we, so the same seed draws the same
    reply from the same logits, on SmolLM2 and on Gemma 3 (where a last id evaluated alone parted most).
    Gemma 3's sliding-window cache is full-size on both sides (``--swa-full``, our setting: docs/long-chats.md);
    with llama-server's small one it evaluates every prompt from its start again."""
    from rml_chat.engines.base import Generation

    loaded = load_model(str(model_path(name)))
    running = cluster.start(model_path(name), workers=0, ctx=2048, threads=1, extra=("--swa-full",),
                            log=tmp_path / "server.log")
    local, server = LocalEngine(loaded.weights, n_ctx=2048, n_threads=1), ServerEngine(running.url)
    parted = []
    try:
        for seed, text in enumerate(FRESH_PROMPTS):
            ids = loaded.encoder.encode(loaded.encoder.format([{"role": "user", "content": text}]))
            sampling = Sampling(temp=0.8, seed=100 + seed, max_tokens=40)
            ours, theirs = (list(engine.generate(ids, sampling, loaded.stop_ids, Generation()))
                            for engine in (local, server))
            assert len(ours) >= 4, text
            if ours != theirs:
                parted.append(text)
    finally:
        local.close()
        running.stop()
    assert parted == []


def test_ctrl_c_mid_reply_keeps_the_partial_reply_and_the_server_serves_the_next_turn(server, model) -> None:
    session = ChatSession(model, ServerEngine(server.url), SessionOptions(Sampling(temp=0.0, max_tokens=200)))
    seen = []

    def emit(chunk: str) -> None:
        if chunk:
            seen.append(chunk)
            if len(seen) == 3:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.turn("Write a long story about a lighthouse.", emit, lambda _: None)
    cut = session.conversation.messages[-1]
    assert cut.role == "assistant" and cut.cut is True and cut.content
    session.options.sampling.max_tokens = 8
    result = session.turn("Now say hi.", lambda _: None, lambda _: None)
    assert result.reply.strip() and result.generation.evaluated < len(result.prompt_ids)


def test_a_server_killed_mid_reply_is_one_line_and_the_conversation_is_kept(model, tmp_path) -> None:
    alone = cluster.start(model_path("smollm2"), workers=0, ctx=1024, threads=1, log=tmp_path / "alone.log")
    session = ChatSession(model, ServerEngine(alone.url, timeout=20), SessionOptions(Sampling(temp=0.0, max_tokens=300)))
    seen = []

    def emit(chunk: str) -> None:
        if chunk:
            seen.append(chunk)
            if len(seen) == 2:
                alone.server().kill()

    try:
        with pytest.raises(ServerError, match="the reply broke off|closed the connection mid-reply"):
            session.turn("Write a long story about a lighthouse.", emit, lambda _: None)
    finally:
        alone.stop()
    assert session.conversation.messages[0].content.startswith("Write a long story")
    assert session.conversation.messages[-1].cut is True


def test_a_server_with_another_model_is_refused_at_connect(model, tmp_path) -> None:
    other = cluster.start(model_path("gemma3"), workers=0, ctx=1024, threads=1, log=tmp_path / "other.log")
    try:
        done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", other.url, str(model_path("smollm2")),
                               "-p", "hi"], capture_output=True, timeout=120)
    finally:
        other.stop()
    err = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in err
    assert "does not fit the tokenizer" in err and "262144 tokens" in err


def test_check_and_json_and_batch_and_a_schema_work_against_the_server(server) -> None:
    smol = str(model_path("smollm2"))
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", server.url, smol, "--check", "--json"],
                          capture_output=True, timeout=300)
    report = json.loads(done.stdout)["models"][0]
    assert done.returncode == 0 and report["ok"] and report["facts"]["prompt"]["verified"], report
    assert report["facts"]["tokenizer"]["id_exact"] == report["facts"]["tokenizer"]["texts"]
    assert report["facts"]["reply"]["stop_reason"] == "stop"
    schema = json.dumps({"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]})
    lines = "\n".join([json.dumps("Name a colour."), json.dumps({"id": "s", "prompt": "A colour as JSON.",
                                                                  "schema": json.loads(schema)})])
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", server.url, smol, "--batch", "-", "--temp",
                           "0", "-n", "20"], input=lines.encode(), capture_output=True, timeout=300)
    out = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert done.returncode == 0 and len(out) == 2 and out[0]["reply"], done.stderr
    assert set(json.loads(out[1]["reply"])) == {"colour"} and out[1]["complete"] is True
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", server.url, smol, "-p", "A colour as JSON.",
                           "-j", schema, "--prefill", "{"], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (1, "") and done.stderr.splitlines()[-1] == (  # (a local model can:
        "rml-chat: server: a reply begun before its grammar (--prefill, /continue) follows the grammar on a "
        "local model only: llama-server starts a grammar at the first token it draws")  # the grammar reads the start)


def test_a_refused_connection_is_one_line(model) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", f"http://127.0.0.1:{cluster.free_port()}",
                           str(model_path("smollm2")), "-p", "hi"], capture_output=True, timeout=60)
    err = done.stderr.decode().strip()
    assert done.returncode == 1 and err.count("\n") == 0 and "connection refused" in err, err


def test_the_reasoning_budget_closes_the_thought_on_the_server_as_it_does_locally(server, tmp_path) -> None:
    """MODEL gives the tokenizer and the chat format only: SmolLM2's weights on the server run under a copy of
    its GGUF with QwQ's template, whose prompt opens a thought."""
    from conftest import fetch

    qwq = tmp_path / "qwq.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(qwq),
                    "--chat-template-file", str(fetch.models_dir() / "templates" / "Qwen-QwQ-32B.jinja"), "--force"],
                   check=True, capture_output=True)
    args = [str(qwq), "-p", "Tell me about the sea.", "--temp", "0", "-n", "60", "--think", "on", "--reasoning-budget",
            "12", "--json"]
    remote = json.loads(subprocess.run([sys.executable, "-m", "rml_chat", "--server", server.url, *args],
                                       capture_output=True, text=True, timeout=300).stdout)
    local = json.loads(subprocess.run([sys.executable, "-m", "rml_chat", *args], capture_output=True, text=True,
                                      timeout=300).stdout)
    closing = len(load_model(str(qwq)).tokenizer.encode("</think>", parse_special=True))
    assert remote["ok"] and remote["reasoning_tokens"] == 12 + closing and remote["reply"]
    assert remote["reasoning_tokens"] == local["reasoning_tokens"] and remote["reasoning"] == local["reasoning"]
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    shaped = json.loads(subprocess.run([sys.executable, "-m", "rml_chat", "--server", server.url, *args, "-j", schema],
                                       capture_output=True, text=True, timeout=300).stdout)
    assert shaped["reasoning"] == remote["reasoning"] and shaped["reasoning_tokens"] == 12 + closing  # the thought free
    assert set(json.loads(shaped["reply"])) == {"a"} and shaped["schema_valid"] is True  # the answer by the schema


def test_a_lazy_grammar_reaches_the_server_as_patterns_and_holds_as_it_does_locally(server, model) -> None:
    """A tool call's lazy grammar goes to llama-server as trigger patterns: its plain trigger word and the
    thought-aware pattern (no trigger inside a thought) give the local engine's greedy replies. Where the
    grammar leaves a choice of pieces (" grammar" or " " then "gr"), the two may split its text differently on
    another CPU, so the budget leaves room for the finest split and the replies are compared as text."""
    from rml_chat.core.gbnf import lazy_after_thought
    from rml_chat.engines.base import Generation, LazyGrammar
    from tokenizer.chat.reasoning import Reasoning

    ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Name the capital of France in one sentence."}]))
    held = LazyGrammar('root ::= "Paris (a lazy grammar wrote this)."', ["Paris"])
    think = Reasoning("<think>", "</think>")
    grammars = [None, held, lazy_after_thought(held, think, in_thought=True), lazy_after_thought(held, think)]
    local = LocalEngine(model.weights, n_ctx=1024, n_threads=1)
    remote = ServerEngine(server.url)

    def replies(engine) -> list[str]:
        return [model.tokenizer.decode(list(engine.generate(ids, Sampling(temp=0.0, max_tokens=48), model.stop_ids,
                                                            Generation(), grammar=g))) for g in grammars]
    try:
        ours, theirs = replies(local), replies(remote)
    finally:
        local.close()
    free, lazy, inside, outside = theirs
    assert theirs == ours and "Paris" in free and inside == free
    assert lazy == outside == free[:free.index("Paris")] + "Paris (a lazy grammar wrote this)."


class _Endless(http.server.BaseHTTPRequestHandler):
    """A server that is not llama-server: every answer is JSON's whitespace, without end."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        with contextlib.suppress(OSError):  # (the client hung up: what it read was enough)
            while True:
                self.wfile.write(b" " * 2**20)

    def log_message(self, *args) -> None:
        pass


def test_a_server_whose_answer_never_ends_is_refused_in_one_line_not_read_into_memory() -> None:
    endless = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    threading.Thread(target=endless.serve_forever, daemon=True).start()
    try:
        done = subprocess.run([sys.executable, "-m", "rml_chat", "--server",
                               f"http://127.0.0.1:{endless.server_address[1]}", "-p", "hi"],
                              capture_output=True, text=True, timeout=120, preexec_fn=_memory_capped)
    finally:
        endless.shutdown()
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (f"rml-chat: server: http://127.0.0.1:{endless.server_address[1]}/props: an answer "
                                   "of more than 67,108,864 bytes; is it llama.cpp's llama-server?")


@pytest.mark.whitebox
def test_a_streamed_event_that_never_ends_is_refused() -> None:
    line = io.BufferedReader(io.BytesIO(b"data: {" + b" " * server_engine.MAX_ANSWER_BYTES + b"}\n"))
    with pytest.raises(ServerError, match="a streamed event of more than 67,108,864 bytes"):
        next(server_engine._events(line, "http://127.0.0.1:1"))


def _memory_capped() -> None:
    """In the child: 4 GB of address space, so a regression that reads without bound fails, not the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))
