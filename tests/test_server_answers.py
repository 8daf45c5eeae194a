"""Whatever answers at ``--server``'s URL, an answer that is not llama-server's is one line, never an
internal error: each field of /props, /v1/models, /tokenize and the streamed events is read for the type
it must have, and a token id must be one of the vocabulary's.

The server here is a stand-in on 127.0.0.1 that answers as llama-server does (tokenizing with our own
tokenizer, so the check at connect passes) except for the one answer a test replaces.
"""

from __future__ import annotations

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

TOKENIZER = tokenizer.load(model_path("smollm2"))
HELLO = TOKENIZER.encode("Hello there")
NOT_LLAMA_SERVER = "is it llama.cpp's llama-server?"


def _answers(replaced: dict) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler answering as llama-server, but with ``replaced[path]`` (a JSON text; for /completion, the
    streamed events' JSON texts) where given."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, body: str) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            usual = {"/props": {"default_generation_settings": {"n_ctx": 2048}},
                     "/v1/models": {"data": [{"id": "stand-in", "meta": {"n_vocab": TOKENIZER.vocab_size}}]}}
            self._send(replaced.get(self.path, json.dumps(usual.get(self.path, {}))))

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize":
                ids = TOKENIZER.encode(request["content"], parse_special=request["parse_special"])
                return self._send(replaced.get(self.path, json.dumps({"tokens": ids})))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            events = replaced.get(self.path, [json.dumps({"tokens": HELLO}), json.dumps({"stop": True})])
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
    engine.check_vocabulary(TOKENIZER, "the tokenizer")
    return list(engine.generate(TOKENIZER.encode("Hi"), Sampling(temp=0.0, max_tokens=8), [], Generation()))


def test_the_stand_in_answers_as_llama_server_does(serve) -> None:
    assert _reply(serve({})) == HELLO  # (so each test below fails on the one answer it replaces)


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
    events = [json.dumps({"tokens": HELLO}), figures] if "stop" in figures else [figures, json.dumps({"tokens": HELLO}),
                                                                                 json.dumps({"stop": True})]
    assert _reply(serve({"/completion": events})) == HELLO


def test_the_command_says_a_token_id_out_of_the_vocabulary_in_one_line(serve) -> None:
    url = serve({"/completion": [json.dumps({"tokens": HELLO[:1]}), json.dumps({"tokens": [10**12]})]})
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--server", url, str(model_path("smollm2")), "-p", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (f"rml-chat: server: {url}/completion: the server sent 1000000000000 as a "
                                            f"token id, not one of the vocabulary's 49,152; {NOT_LLAMA_SERVER}")
    assert done.stdout == TOKENIZER.decode(HELLO[:1]) + "\n"  # what came before it is kept


def test_a_reply_that_breaks_off_in_the_repl_keeps_the_part_shown_and_says_so_not_that_nothing_was_sent(
        serve, tmp_path) -> None:
    url = serve({"/completion": [json.dumps({"tokens": HELLO}), json.dumps({"tokens": [10**12]})]})
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
