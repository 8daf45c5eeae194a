"""Scale: the GPU flags reach llama.cpp (on this CPU build, -ngl 0 and -1 give the same greedy ids), and a
batch line can be a whole conversation that replies as the same conversation resumed does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import model_path

from rml_chat.core.conversation import Conversation
from rml_chat.engines.local import LocalEngine
from rml_chat.errors import UsageError


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rml_chat", *args], capture_output=True, text=True, timeout=300,
                          input=stdin)


@pytest.mark.whitebox
def test_the_gpu_layers_reach_llama_cpp_and_the_cpu_build_says_where_they_went() -> None:
    engine = LocalEngine(model_path("smollm2"), n_ctx=512, n_threads=2, gpu=(7, "row"))
    try:
        assert engine._llama.n_gpu_layers == 7
        assert engine.placement.startswith("CPU only: this llama.cpp build has no GPU backend")
    finally:
        engine.close()
    runs = [json.loads(_cli(str(model_path("smollm2")), "-p", "Name a colour.", "-n", "12", "--temp", "0", "-ngl", n,
                            "--json").stdout) for n in ("0", "-1")]
    assert runs[0]["reply"] == runs[1]["reply"] and runs[0]["completion_tokens"] == runs[1]["completion_tokens"]
    verbose = _cli(str(model_path("smollm2")), "-p", "Hi", "-n", "1", "--verbose")
    assert "layers: CPU only: this llama.cpp build has no GPU backend" in verbose.stderr


def test_llama_cpps_extra_cpu_buffers_are_left_off_where_asked_or_where_its_amx_kernels_would_crash(monkeypatch) -> None:
    """On a CPU with AMX, llama.cpp's AMX product crashes on the first batch (engines/cpu_quirks.py): the
    weights load without the extra buffers there, or anywhere $RML_CHAT_CPU_REPACK=off says so."""
    from rml_chat.engines import cpu_quirks

    monkeypatch.setenv(cpu_quirks.ENV, "on")
    assert cpu_quirks.no_extra_buffers() == ""
    monkeypatch.setenv(cpu_quirks.ENV, "auto")
    assert bool(cpu_quirks.no_extra_buffers()) == ("amx_int8" in cpu_quirks.cpu_flags())
    monkeypatch.setenv(cpu_quirks.ENV, "maybe")  # (taken as unset before: not the choice made, and not said)
    with pytest.raises(UsageError, match=r"^\$RML_CHAT_CPU_REPACK is on, off or auto, not 'maybe'$"):
        cpu_quirks.no_extra_buffers()
    monkeypatch.setenv(cpu_quirks.ENV, "off")
    verbose = _cli(str(model_path("smollm2")), "-p", "Name a colour.", "-n", "4", "--temp", "0", "--verbose")
    assert verbose.returncode == 0 and "no extra CPU buffers: $RML_CHAT_CPU_REPACK=off" in verbose.stderr
    assert "AMX model buffer" not in verbose.stderr and "CPU_REPACK model buffer" not in verbose.stderr


def test_a_messages_line_replies_as_the_same_conversation_resumed(tmp_path) -> None:
    history = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"}]
    saved = tmp_path / "chat.json"
    Conversation("Be terse.", [dict(m) for m in history]).save(saved)
    resumed = json.loads(_cli(str(model_path("smollm2")), "--resume", str(saved), "-p", "Name a colour.", "-n", "12",
                              "--temp", "0", "--json").stdout)
    lines = [{"id": "a", "system": "Be terse.", "messages": [*history, {"role": "user", "content": "Name a colour."}]},
             {"id": "b", "messages": [{"role": "system", "content": "Be terse."}, *history,
                                      {"role": "user", "content": "Name a colour."}]},
             {"id": "c", "messages": history}, {"id": "d", "prompt": "x", "messages": history}]
    done = _cli(str(model_path("smollm2")), "--batch", "-", "-n", "12", "--temp", "0",
                stdin="\n".join(map(json.dumps, lines)) + "\n")
    a, b, c, d = (json.loads(line) for line in done.stdout.splitlines())
    assert a["reply"] == b["reply"] == resumed["reply"] and a["prompt_tokens"] == resumed["prompt_tokens"]
    assert "must end with the user message to answer" in c["error"]["message"]
    assert "'prompt' or 'messages', not both" in d["error"]["message"]


def test_a_parallel_batch_gives_one_line_per_line_in_order_with_per_line_settings() -> None:
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    lines = [{"id": f"q{i}", "prompt": f"Name a colour, number {i}.", "max_tokens": 4 + i} for i in range(9)]
    lines[3] = {"id": "schema", "prompt": "A colour as JSON.", "schema": schema, "max_tokens": 40}
    lines[5] = {"id": "bad", "prompt": "x", "temp": "hot"}
    lines[7] = {"id": "history", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                                              {"role": "user", "content": "Name a colour."}]}
    done = _cli(str(model_path("smollm2")), "--batch", "-", "-np", "4", "--temp", "0", "-n", "24",
                stdin="\n".join(map(json.dumps, lines)) + "\n")
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert [o["id"] for o in out] == [line["id"] for line in lines] and [o["line"] for o in out] == list(range(1, 10))
    assert done.returncode == 1 and "8 of 9 lines ran cleanly; not: line 6" in done.stderr
    for line, o in zip(lines, out):
        if "max_tokens" in line and line["id"] != "schema":
            assert o["ok"] and 0 < o["completion_tokens"] <= line["max_tokens"], o
    assert set(json.loads(out[3]["reply"])) == {"colour"} and out[3]["complete"] is True
    assert "temp must be a number" in out[5]["error"]["message"] and out[7]["ok"] and out[7]["reply"]
    sequential = [json.loads(line) for line in _cli(str(model_path("smollm2")), "--batch", "-", "--temp", "0", "-n", "24",
                                                   stdin="\n".join(map(json.dumps, lines)) + "\n").stdout.splitlines()]
    assert [o.get("prompt_tokens") for o in sequential] == [o.get("prompt_tokens") for o in out]  # the same prompts


@pytest.mark.parametrize("parallel", ["1", "2"])
def test_a_bad_batch_line_is_one_error_line_and_every_other_line_is_answered_in_order(parallel: str) -> None:
    """A line nested 100,000 deep and a line that is no JSON: each is its own error line (the unreadable
    one's id None, never a number another line has), and the lines around them are answered, at every
    -np."""
    deep = "[" * 100_000 + "]" * 100_000
    stdin = "\n".join([json.dumps({"id": "a", "prompt": "Hi"}), deep, "{nope", json.dumps({"id": 3, "prompt": "Hi"})])
    done = _cli(str(model_path("smollm2")), "--batch", "-", "-np", parallel, "--temp", "0", "-n", "2", stdin=stdin + "\n")
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert [o["line"] for o in out] == [1, 2, 3, 4] and [o["id"] for o in out] == ["a", None, None, 3], done.stderr
    assert out[0]["ok"] and out[3]["ok"] and not out[1]["ok"] and not out[2]["ok"]
    assert "nested too deeply" in out[1]["error"]["message"] and "not JSON" in out[2]["error"]["message"]
    assert done.returncode == 1 and "Traceback" not in done.stderr


def _strict_json(line: str) -> dict:
    """A line as every JSON reader but Python's reads it: NaN and Infinity are not JSON (jq refuses them)."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


def test_an_id_that_is_nan_or_past_a_doubles_range_comes_back_as_valid_json() -> None:
    """Python reads ``NaN`` and ``1e400`` (infinity) from a line; written back as they were read, the output
    line was no JSON at all (``"id": NaN``), and a reader such as jq refused the whole stream."""
    stdin = '{"id": NaN, "prompt": "Hi"}\n{"id": 1e400, "prompt": "Hi"}\n{"id": -Infinity, "prompt": "Hi"}\n'
    done = _cli(str(model_path("smollm2")), "--batch", "-", "--temp", "0", "-n", "2", stdin=stdin)
    out = [_strict_json(line) for line in done.stdout.splitlines()]
    assert [(o["id"], o["line"], o["ok"]) for o in out] == [(None, 1, True), (None, 2, True), (None, 3, True)]
