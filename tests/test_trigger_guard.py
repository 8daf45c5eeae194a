"""A token that goes past a tool call's trigger: llama.cpp's lazy grammar replays it from the trigger on and,
where the grammar refuses what follows the trigger in that token, throws a C++ exception that ends the
process (llama.cpp issues 12597, 26787). The trigger guard (rml_chat/engines/trigger_guard.py) leaves such
a token out and draws again; a token whose text past the trigger the grammar takes is drawn as before.

The model is a scripted one (scripted_model.py) whose first token is the call's opening and more, on
Qwen 2.5's template with its markers as plain text (so ``<tool_call>`` is a trigger word, not a token).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_model import scripted_model
from test_tools import CITY_WEATHER

ANSWER = ["It is sunny", " in Paris."]
# Qwen 2.5's trigger is '<tool_call>\n{"name": "' (as llama.cpp's): each script's first token goes past it
REFUSED = ['<tool_call>\n{"name": "get_weather", "args": {', '"city": "Paris"}}\n</tool_call>']  # ("args": the
TAKEN = ['<tool_call>\n{"name": "get_weather", ', '"arguments": {"city": "Paris"}}\n</tool_call>']  # grammar wants
# "arguments")


def _reply(tmp_path, script: list[str], *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    model = tmp_path / "model.gguf"
    if not model.exists():  # (a server may have it open already)
        scripted_model(model, "Qwen-Qwen2.5-7B-Instruct", script, ANSWER)
    (tmp_path / "fns.py").write_text(CITY_WEATHER)
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model), "-p", "What is the weather in Paris?",
                           "--functions", str(tmp_path / "fns.py"), "--tools-approve", "-n", "64", "--json", *flags],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = done.stdout.strip().splitlines()
    return done, json.loads(lines[-1]) if lines else {}


@pytest.mark.parametrize("sampling", [["--temp", "0"], ["--temp", "0.8", "--seed", "7"]], ids=["greedy", "seeded"])
def test_a_token_whose_text_past_the_trigger_the_grammar_refuses_is_not_drawn(tmp_path, sampling) -> None:
    done, reply = _reply(tmp_path, REFUSED, *sampling)
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr[-2000:]
    assert reply["ok"] and reply["reply"] == "It is sunny in Paris." and reply["tool_calls"] == []  # (the model's
    # next choice, its answer)


def test_a_token_whose_text_past_the_trigger_the_grammar_takes_is_drawn_and_its_call_runs(tmp_path) -> None:
    done, reply = _reply(tmp_path, TAKEN, "--temp", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert [(c["name"], c["arguments"], c["result"]) for c in reply["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "Sunny, 21 C in Paris")]
    assert reply["reply"] == "It is sunny in Paris."


@pytest.mark.server
def test_on_llama_server_the_same_token_is_the_servers_error_in_one_line(tmp_path) -> None:
    """llama-server, given the same model and the same lazy grammar (``--server``), answers the request with
    its grammar's exception (it catches it; its process goes on): rml-chat says that in one line and exits 1."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import cluster

    model = scripted_model(tmp_path / "model.gguf", "Qwen-Qwen2.5-7B-Instruct", REFUSED, ANSWER)
    running = cluster.start(model, workers=0, ctx=2048, log=tmp_path / "server.log")
    try:
        done, reply = _reply(tmp_path, REFUSED, "--temp", "0", "--server", running.url)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert reply["error"]["kind"] == "server" and "Unexpected empty grammar stack" in reply["error"]["message"]
        errors = [line for line in done.stderr.splitlines() if line.startswith("rml-chat:")]
        assert len(errors) == 1 and "got exception" in errors[0], done.stderr
        assert running.processes[-1].poll() is None  # (the server itself goes on)
    finally:
        running.stop()
