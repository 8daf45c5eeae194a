"""Whatever answers at ``--server``'s URL, an answer that is not llama-server's is one line, never an
internal error: each field of /props, /v1/models, /tokenize and the streamed events is read for the type
it must have, and a token id must be one of the vocabulary's.

The server here is a stand-in on 127.0.0.1 that answers as llama-server does (tokenizing with our own
tokenizer, so the check at connect passes) except for the one answer a test replaces.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from conftest import model_path
from test_repl import Terminal

import tokenizer
from rml_chat.engines.base import Generation, Sampling
from rml_chat.engines.server import ServerEngine, ServerError


@functools.cache
def _tokenizer() -> tokenizer.Tokenizer:
    """SmolLM2's (loaded when a test runs: collecting this module needs no model, as the offline tier's does)."""
    return tokenizer.load(model_path("smollm2"))


def _hello() -> list[int]:
    return _tokenizer().encode("Hello there")

NOT_LLAMA_SERVER = "is it llama.cpp's llama-server?"


def _answers(replaced: dict) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler answering as llama-server, but with ``replaced[path]`` (a JSON text; for /completion, the
    streamed events' JSON texts) where given."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, body: str, status: int = 200) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            """As llama-server started with --api-key KEY: a request without that key is refused."""
            key = replaced.get("key")
            if key is None or self.headers.get("Authorization") == f"Bearer {key}":
                return False
            self._send('{"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}', 401)
            return True

        def do_GET(self) -> None:
            if self._refused():
                return
            usual = {"/props": {"default_generation_settings": {"n_ctx": 2048}},
                     "/v1/models": {"data": [{"id": "stand-in", "meta": {"n_vocab": _tokenizer().vocab_size}}]}}
            self._send(replaced.get(self.path, json.dumps(usual.get(self.path, {}))))

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self._refused():
                return
            if self.path == "/tokenize":
                ids = _tokenizer().encode(request["content"], parse_special=request["parse_special"])
                return self._send(replaced.get(self.path, json.dumps({"tokens": ids})))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            events = replaced.get(self.path, [json.dumps({"tokens": _hello()}), json.dumps({"stop": True})])
            for event in events:
                self.wfile.write(b"data: " + event.encode() + b"\n\n")

        def log_message(self, *args) -> None:
            pass

    return Handler


@pytest.fixture
def serve() -> Iterator:
    """``serve(replaced)``: the URL of a stand-in server with those answers."""
    servers = []

    def start(replaced: dict) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _answers(replaced))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def _reply(url: str) -> list[int]:
    engine = ServerEngine(url)
    engine.check_vocabulary(_tokenizer(), "the tokenizer")
    return list(engine.generate(_tokenizer().encode("Hi"), Sampling(temp=0.0, max_tokens=8), [], Generation()))


def test_the_stand_in_answers_as_llama_server_does(serve) -> None:
    assert _reply(serve({})) == _hello()  # (so each test below fails on the one answer it replaces)


@pytest.mark.parametrize(("path", "answer", "said"), [
    ("/props", "[1]", "/props: not a JSON object but [1]"),
    ("/props", '{"n_ctx": "2048"}', "/props names no context size from 1 to 4,294,967,295"),
    ("/props", '{"n_ctx": NaN}', "/props names no context size"),
    ("/props", '{"default_generation_settings": [1]}', "/props names no context size"),
    ("/props", '{"n_ctx": 100000000000000000000}', "/props names no context size from 1 to 4,294,967,295"),
    pytest.param("/props", "[" * 100_000 + "]" * 100_000, "/props: not JSON", id="/props-nested-100000-deep"),
    ("/v1/models", '"models"', '/v1/models: not a JSON object but "models"'),
    ("/tokenize", '{"tokens": "abc"}', '/tokenize: the server sent "abc" as a token id, not one of the '
                                       "vocabulary's 49,152"),
    ("/tokenize", '{"tokens": [{"piece": "x"}]}', '/tokenize: the server sent {"piece": "x"} as a token id'),
])
def test_an_answer_at_connect_that_is_not_llama_servers_is_one_line(serve, path, answer, said) -> None:
    url = serve({path: answer})
    with pytest.raises(ServerError) as raised:
        _reply(url)
    assert str(raised.value).startswith(url + said) and str(raised.value).endswith(NOT_LLAMA_SERVER)


@pytest.mark.parametrize(("events", "said"), [
    (["5"], ": a streamed event: not a JSON object but 5"),
    (['{"tokens": 5}'], "/completion: the server sent 5 as a list of token ids"),
    (['{"tokens": [49152]}'], "/completion: the server sent 49152 as a token id, not one of the vocabulary's 49,152"),
    (['{"tokens": [-1]}'], "/completion: the server sent -1 as a token id"),
    (['{"tokens": [1.5]}'], "/completion: the server sent 1.5 as a token id"),
    (['{"tokens": [true]}'], "/completion: the server sent true as a token id"),
])
def test_a_streamed_event_that_is_not_llama_servers_is_one_line(serve, events, said) -> None:
    url = serve({"/completion": events})
    with pytest.raises(ServerError) as raised:
        _reply(url)
    assert str(raised.value).startswith(url + said) and str(raised.value).endswith(NOT_LLAMA_SERVER)


def test_an_error_event_that_is_text_is_said_as_it_is(serve) -> None:
    url = serve({"/completion": ['{"error": "the slot is busy"}']})
    with pytest.raises(ServerError, match=r": the slot is busy$"):
        _reply(url)


@pytest.mark.parametrize("figures", [
    '{"prompt_progress": "half"}',
    '{"prompt_progress": {"total": "x", "cache": null, "processed": [1]}}',
    '{"stop": true, "timings": {"prompt_n": NaN}}',
    '{"stop": true, "timings": "fast"}',
])
def test_figures_of_another_type_are_figures_not_given_and_the_reply_stands(serve, figures) -> None:
    events = [json.dumps({"tokens": _hello()}), figures] if "stop" in figures else [figures, json.dumps({"tokens": _hello()}),
                                                                                 json.dumps({"stop": True})]
    assert _reply(serve({"/completion": events})) == _hello()


def test_the_command_says_a_token_id_out_of_the_vocabulary_in_one_line(serve) -> None:
    url = serve({"/completion": [json.dumps({"tokens": _hello()[:1]}), json.dumps({"tokens": [10**12]})]})
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", url, str(model_path("smollm2")), "-p", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (f"rml-chat: server: {url}/completion: the server sent 1000000000000 as a "
                                            f"token id, not one of the vocabulary's 49,152; {NOT_LLAMA_SERVER}")
    assert done.stdout == _tokenizer().decode(_hello()[:1]) + "\n"  # what came before it is kept


def test_a_reply_that_breaks_off_in_the_repl_keeps_the_part_shown_and_says_so_not_that_nothing_was_sent(
        serve, tmp_path) -> None:
    url = serve({"/completion": [json.dumps({"tokens": _hello()}), json.dumps({"tokens": [10**12]})]})
    term = Terminal(tmp_path, "--server", url)
    term.prompt_ready()
    term.ask(b"hi", b"/continue goes on]")
    term.ask(b"/history", b"[cut]")
    said = term.output.decode().replace("\r\n", "\n")
    assert "Hello there\nerror: " in said and "the server sent 1000000000000 as a token id" in said
    assert "[the reply broke off; the part shown stays in the conversation, and /continue goes on]" in said
    assert "not sent" not in said
    assert re.search(r"1 user +hi\n +2 assistant Hello there \[cut\]", said), said[-600:]
    term.send(b"/quit\r")
    term.read_until(lambda out: b"saved 2 messages" in out)


def test_a_server_started_with_a_key_is_reached_with_it_and_without_it_says_which_flag_gives_it(
        serve, tmp_path) -> None:
    url = serve({"key": "sesame"})
    (tmp_path / "key").write_text("sesame\n")
    runs = {name: subprocess.run([sys.executable, "-m", "rml_chat", "--server", url, str(model_path("smollm2")),
                                  *flags, "-p", "hi"], capture_output=True, text=True, timeout=120)
            for name, flags in (("no key", []), ("--api-key", ["--api-key", "sesame"]),
                                ("--api-key-file", ["--api-key-file", str(tmp_path / "key")]),
                                ("another key", ["--api-key", "open"]))}
    for name in ("--api-key", "--api-key-file"):
        assert runs[name].returncode == 0 and runs[name].stdout == "Hello there\n", runs[name].stderr
    for name in ("no key", "another key"):
        assert runs[name].returncode == 1
        assert runs[name].stderr.splitlines()[-1] == (
            f'rml-chat: server: {url}/props: HTTP 401 ({{"error": {{"code": 401, "message": "Invalid API Key", "type": '
            f'"authentication_error"}}}}); --api-key or --api-key-file gives the server\'s key')
    assert "sesame" not in "".join(r.stderr for r in runs.values())
    lines = "".join(json.dumps({"id": i, "prompt": "hi"}) + "\n" for i in range(3))
    batch = subprocess.run([sys.executable, "-m", "rml_chat", "--server", url, str(model_path("smollm2")), "--api-key",
                            "sesame", "--batch", "-", "-np", "2"], input=lines, capture_output=True, text=True, timeout=120)
    assert batch.returncode == 0, batch.stderr  # (each of -np's connections has the key)
    assert [json.loads(line)["reply"] for line in batch.stdout.splitlines()] == ["Hello there"] * 3


@pytest.mark.parametrize(("url", "said"), [
    ("http://[::1", "give http://HOST:PORT (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999", "give http://HOST:PORT (a port from 1 to 65535)"),
    ("http://127.0.0.1:port", "give http://HOST:PORT (a port from 1 to 65535)"),
    ("http://127.0.0.1:0", "give http://HOST:PORT (a port from 1 to 65535)"),
    ("https://127.0.0.1:8080", "give http://HOST:PORT (rml-chat reaches llama-server over plain http://)"),
    ("", "give http://HOST:PORT"),
    ("http://" + "a" * 64 + ":8080", "give http://HOST:PORT (the host is not a host name)"),
])
def test_a_server_url_that_is_no_url_is_a_usage_line_before_the_model_loads(url, said) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", url, "-p", "hi"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"rml-chat: usage: --server {url!r}: {said}"), done.stderr


def test_a_user_and_password_in_the_url_are_refused_and_an_ipv6_host_is_written_in_brackets() -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", "http://me:secret@127.0.0.1:8080", "-p", "hi"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--api-key or --api-key-file" in done.stderr and "secret" not in done.stderr
    with pytest.raises(ServerError, match=r"^http://\[::1\]:1/props: "):  # (refused, or no IPv6 here)
        ServerEngine("http://[::1]:1")
