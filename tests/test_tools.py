"""Tools: the call syntax read off every tool-use template of llama.cpp's set (a rendered call parses back
to the same calls), a functions file as tools, and real turns on SmolLM2's weights under tool-use
templates (copies of its GGUF): the model calls through the grammar, the tool runs (or is refused), the
result goes back as the template's tool message, and the prompt is byte for byte jinja2's rendering of
the same conversation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import fetch, model_path, ours

from rml_chat.errors import UsageError
from rml_chat.tools import loop as tool_loop
from rml_chat.tools.functions import load_functions, tool_of
from rml_chat.tools.toolbox import Toolbox
from tokenizer.chat.template import ChatTemplate
from tokenizer.chat.tool_calls import CallSyntax, ToolCall, derive

WEATHER = '''
def get_weather(city: str, days: int = 1) -> str:
    """The weather of a city."""
    return f"Sunny, 21 C in {city}"


def _helper() -> None:
    pass
'''
#: the same tool with its city among three: the grammar holds a 135M model's greedy city to a name (its free
#: text there depends on the CPU's and flash attention's arithmetic, and is not what these tests are about)
CITY_WEATHER = '''
from typing import Literal


def get_weather(city: Literal["Paris", "Oslo", "Rome"], days: int = 1) -> str:
    """The weather of a city."""
    return f"Sunny, 21 C in {city}"
'''
STOPS = ["<|im_end|>", "<|eot_id|>", "</s>", "<|eom_id|>", "<|end_of_text|>", "<|end|>", "<|call|>", "<|calls|>",
         "<｜end▁of▁sentence｜>", "<|END_OF_TURN_TOKEN|>"]


def test_a_functions_file_gives_its_public_functions_with_schemas_from_their_signatures(tmp_path) -> None:
    path = tmp_path / "fns.py"
    path.write_text(WEATHER)
    (tool,) = load_functions(str(path))
    assert tool.definition() == {"type": "function", "function": {
        "name": "get_weather", "description": "The weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}}
    assert tool.run({"city": "Oslo"}) == "Sunny, 21 C in Oslo"
    path.write_text('def f(city: str, days: int = 1) -> str:\n    """Weather.\n\n    Args:\n        city (str): The city,\n'
                    '            in full.\n        days: How many days.\n\n    Returns:\n        A line.\n    """\n')
    (documented,) = load_functions(str(path))  # an Args: section describes the parameters, as transformers reads it
    assert documented.description == "Weather." and documented.parameters["properties"] == {
        "city": {"type": "string", "description": "The city, in full."},
        "days": {"type": "integer", "description": "How many days."}}
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('no')\n")
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--functions", str(bad), "-p", "x"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "the file failed to run (ValueError: no)" in done.stderr and "Traceback" not in done.stderr


TYPED = '''
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Literal, Optional

if TYPE_CHECKING:
    from decimal import Decimal

print("loading the weather tools")


def forecast(city: str, unit: Literal["c", "f"] = "c", days: Optional[int] = None, tags: list[str] | None = None,
             precision: Decimal | None = None) -> str:
    """The forecast."""
    print("looking it up")
    return f"{city}: 21 {unit}"


async def later(city: str) -> str:
    await asyncio.sleep(0)
    return f"{city} later"
'''


def test_hints_literal_optional_and_type_checking_ones_make_schemas_and_async_tools_run(tmp_path, capsys) -> None:
    path = tmp_path / "typed.py"
    path.write_text(TYPED)
    notes: list[str] = []
    forecast, later = load_functions(str(path), notes.append)
    assert notes == ["note: --functions typed.py printed while it loaded: loading the weather tools"]
    assert forecast.parameters["properties"] == {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        "precision": {}}  # (a name imported only for type checkers: any value)
    assert later.run({"city": "Oslo"}) == "Oslo later"
    box = Toolbox([forecast, later], CallSyntax("<tool_call>", "|", "</tool_call>"), approve=lambda call: True)
    shown: list[str] = []
    box.shown = shown.append
    assert box.run(ToolCall("forecast", {"city": "Oslo"})) == "Oslo: 21 c"
    assert "looking it up" not in capsys.readouterr().out  # (a tool's print is a note, not the reply's stdout)
    assert shown[0] == "note: tool 'forecast' printed: looking it up"


@pytest.mark.parametrize(("source", "refusal"), [
    ("shout = lambda text: text.upper()\n", "a lambda can't be a tool"),
    ("def pick(a, /, b):\n    return a\n", "'pick' can't be a tool: its parameter 'a' is positional-only"),
])
def test_a_callable_that_cant_be_a_tool_is_refused_by_name(tmp_path, source: str, refusal: str) -> None:
    path = tmp_path / "odd.py"
    path.write_text(source)
    with pytest.raises(UsageError, match=refusal):
        load_functions(str(path))


@pytest.mark.parametrize(("path", "refusal"), [("/nonexistent/tools.py", "no such file"),
                                               ("/dev/zero", "not a regular file"), ("/", "not a regular file")])
def test_a_functions_path_that_is_no_python_file_says_what_it_is(path: str, refusal: str) -> None:
    with pytest.raises(UsageError, match=f"--functions {path}: {refusal}"):
        load_functions(path)


def test_a_huge_result_is_cut_in_bytes_then_in_tokens_and_the_model_is_told() -> None:
    from rml_chat.tools.toolbox import MAX_RESULT_BYTES, capped

    def dump(x: str) -> str:
        return "é" * MAX_RESULT_BYTES  # (two bytes each: cut between characters, never inside one)

    box = Toolbox([tool_of(dump, "test")], CallSyntax("<tool_call>", "|", "</tool_call>"), approve=lambda call: True)
    result = box.run(ToolCall("dump", {"x": "1"}))
    body, note = result.rsplit("\n", 1)
    assert body == "é" * (MAX_RESULT_BYTES // 2)
    assert note == f"[the tool's result was cut here: {MAX_RESULT_BYTES} of its {2 * MAX_RESULT_BYTES} bytes]"
    tok = ours("smollm2")
    cut = capped("word " * 5000, tok.encode, 512)
    body, note = cut.rsplit("\n", 1)
    assert len(tok.encode(body)) <= 512
    assert note == f"[the tool's result was cut here: 512 of its {len(tok.encode('word ' * 5000))} tokens]"
    assert capped("short", tok.encode, 512) == "short"


def test_a_raising_a_hanging_and_an_unknown_tool_each_end_the_call_with_an_error_the_model_reads() -> None:
    def boom(x: str) -> str:
        raise RuntimeError("disk on fire")

    def hang(x: str) -> str:
        time.sleep(30)
        return "late"

    def odd(x: str) -> object:
        return {1, 2}

    syntax = CallSyntax("<tool_call>", "|", "</tool_call>")
    box = Toolbox([tool_of(f, "test") for f in (boom, hang, odd)], syntax, timeout=0.5, approve=lambda call: True)
    shown: list[str] = []
    box.shown = shown.append
    assert box.run(ToolCall("boom", {"x": "1"})) == "error: the tool raised RuntimeError: disk on fire"
    started = time.perf_counter()
    assert box.run(ToolCall("hang", {"x": "1"})) == "error: the tool did not answer within 0.5 s"
    assert time.perf_counter() - started < 5
    assert box.run(ToolCall("odd", {"x": "1"})).startswith("error: the tool's result is not JSON")
    assert box.run(ToolCall("nope", {})).startswith("error: there is no tool 'nope'")
    assert Toolbox(box.tools.values(), syntax).run(ToolCall("boom", {"x": "1"})) == "error: the user did not allow this call"
    assert shown[0] == 'tool call: boom({"x": "1"}) -> error: the tool raised RuntimeError: disk on fire'


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("tools")
    made = {}
    for family, name in (("qwen2.5", "Qwen-Qwen2.5-7B-Instruct"), ("llama3.2", "meta-llama-Llama-3.2-3B-Instruct"),
                         ("hermes3", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"), ("qwen3", "Qwen-Qwen3-0.6B"),
                         ("mistral3.2", "Mistral-Small-3.2-24B-Instruct-2506"), ("gpt-oss", "openai-gpt-oss-120b"),
                         ("qwen3-coder", "Qwen3-Coder"), ("glm4.6", "GLM-4.6"),
                         ("r1-distill", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B"), ("lfm2", "LFM2-8B-A1B")):
        target = folder / f"{family}.gguf"
        subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(target),
                        "--chat-template-file", str(fetch.models_dir() / "templates" / f"{name}.jinja"), "--force"],
                       check=True, capture_output=True)
        made[family] = str(target)
    (folder / "fns.py").write_text(CITY_WEATHER)
    made["functions"] = str(folder / "fns.py")
    return made


def _ask(copies: dict[str, str], family: str, *flags: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-m", "rml_chat", copies[family], "--functions", copies["functions"],
                           "--tool-choice", "required", "-p", "What is the weather in Paris?", "-n", "96", "--temp", "0",
                           "--json", *flags], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.mark.parametrize("family", ["qwen2.5", "llama3.2", "hermes3", "qwen3", "mistral3.2", "gpt-oss",
                                    "qwen3-coder", "glm4.6",  # (these two write arguments one by one)
                                    "r1-distill"])  # (a call in OpenAI's shape: content None, arguments a string)
def test_the_model_calls_through_the_grammar_and_the_approved_result_goes_back(copies, family: str) -> None:
    # R1's prompt opens a thought, which a 135M model never closes: the budget closes it, and its markers
    # are plain text under SmolLM2's vocabulary (a call of ~100 tokens); gpt-oss's model may write its
    # analysis before the call (as llama.cpp's grammar allows), which the budget closes too
    extra = {"r1-distill": ("--reasoning-budget", "0", "-n", "200"),
             "gpt-oss": ("--reasoning-budget", "8", "-n", "160")}.get(family, ())
    out, said = _ask(copies, family, "--tools-approve", *extra)
    call = out["tool_calls"][0] if out["tool_calls"] else {}
    assert call == {"name": "get_weather", "arguments": call["arguments"], "id": call["id"],
                    "result": f"Sunny, 21 C in {call['arguments']['city']}"} and call["id"]  # (ours, or the model's)
    if family != "r1-distill":  # (after R1's 100 tokens of markers the 135M model writes a date there, greedily)
        assert call["arguments"]["city"] == "Paris"
    assert "tool call: get_weather(" in said and out["stop_reason"] in ("stop", "stop_string", "length")
    # the second turn's prompt held the call and the result, and reused the first turn's cache (not under R1's
    # template here: it drops the thought it opened, and under SmolLM2's vocabulary its markers are text, so
    # "｜><｜tool" merges apart from the model's "</think><｜tool" and no run of the call's tokens is found again)
    last = out["steps"][-1]  # (the turn's counts add up its steps: the step after the result is the one that reuses)
    assert last["prompt_tokens_reused"] > last["prompt_tokens"] / 2 or family == "r1-distill"


def test_a_script_without_tools_approve_refuses_the_call_and_the_model_is_told(copies) -> None:
    out, said = _ask(copies, "qwen2.5")
    assert out["tool_calls"][0]["result"] == "error: the user did not allow this call"
    assert "-> error: the user did not allow this call" in said


@pytest.mark.parametrize("family", ["qwen2.5", "lfm2"])  # (LFM2-8B-A1B renders no calls: the table's syntax, the
def test_the_prompt_with_a_call_and_its_result_is_jinja2s_rendering_of_the_same_conversation(copies, family) -> None:
    from rml_chat.core.model import load_model  # call kept in the content, where the template writes it back)
    from rml_chat.core.session import ChatSession, SessionOptions
    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine
    from tokenizer.chat.tool_table import known_syntax

    model = load_model(copies[family])
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2)
    try:
        session = ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, max_tokens=48)))
        template = ChatTemplate(model.tokenizer.chat_template)
        syntax = derive(template, ["<|im_end|>"])[0] or known_syntax(template).syntax
        tools = load_functions(copies["functions"])
        session.options.tools = Toolbox(tools, syntax, choice="required", approve=lambda call: True)
        prompts: list[list[int]] = []
        cached: list[list[int]] = []
        generate = engine.generate
        engine.generate = lambda ids, *a, **k: (prompts.append(list(ids)), cached.append(engine.cached_ids()),
                                                generate(ids, *a, **k))[2]
        result = tool_loop.exchange(session, "What is the weather in Paris?", lambda t: None, lambda t: None)
        assert result.tool_calls and len(prompts) == 2
        messages = session.conversation.for_prompt()[:-1]  # the conversation the second prompt was made of
        assert messages[1]["tool_calls"] and messages[-1]["role"] == "tool"
        assert messages[1]["content"].startswith("<|tool_call_start|>[get_weather(") is (family == "lfm2")
        definitions = [t.definition() for t in tools]
        expected = ChatTemplate(model.tokenizer.chat_template).render(
            messages, True, tools=definitions, bos_token="<|im_start|>", eos_token="<|im_end|>")
        assert model.tokenizer.decode(prompts[1]) == expected
        # the call's tokens are the model's own (the grammar let it split them its way): the prompt goes on
        # from all the cache held, and only the call's end and the result were evaluated
        assert prompts[1][:len(cached[1])] == cached[1] and len(cached[1]) > len(prompts[0])
        canonical = model.encoder.encode(model.encoder.format(messages, tools=definitions))
        tail = model.tokenizer.decode(prompts[1][len(cached[1]):])
        assert tail.startswith("<|im_end|>") and "Sunny, 21 C in " in tail  # (the city is the model's choice)
        assert result.generation.evaluated == len(prompts[1]) - len(cached[1]) < len(canonical) - len(prompts[0])
    finally:
        engine.close()


def test_a_template_that_renders_no_calls_is_refused_at_start_in_one_line(tmp_path) -> None:
    fns = tmp_path / "fns.py"
    fns.write_text(WEATHER)
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "--functions", str(fns),
                           "-p", "x"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "--functions: SmolLM2-135M-Instruct.Q4_1 can't call tools: the template renders no tool calls; a model " \
           "whose template does can, a small one: rml-chat -hf Qwen/Qwen2.5-0.5B-Instruct-GGUF" in done.stderr


def test_the_repl_asks_before_each_call_and_always_means_this_tool_this_session(copies, tmp_path) -> None:
    from test_repl import Terminal

    saved = tmp_path / "tools.json"
    term = Terminal(tmp_path, copies["qwen2.5"], "--functions", copies["functions"], "--tool-choice", "required",
                    "--temp", "0", "-n", "40", model=False)
    term.prompt_ready()

    def turn(message: bytes, answer: bytes | None, shown: bytes) -> bytes:
        """A message, the answer to the question it raises (None: no question is awaited), what it showed."""
        start = len(term.output)
        term.send(message + b"\r")
        if answer is not None:
            term.read_until(lambda out: b'? [y]es, [n]o, [a]lways for get_weather: ' in out[start:])
            term.send(answer + b"\r")
        term.read_until(lambda out: shown in out[start:] and out.endswith(b"> "))
        term.prompt_ready()
        return term.output[start:]

    assert b'run get_weather({"city": "Paris"})?' in turn(b"What is the weather in Paris?", b"n",
                                                          b"-> error: the user did not allow this call")
    turn(b"And in Oslo?", b"a", b"-> Sunny, 21 C in ")
    assert b"[y]es, [n]o" not in turn(b"And in Rome?", None, b"-> Sunny, 21 C in ")  # always: not asked again
    term.send(b"/tools\r")
    term.read_until(lambda out: b"get_weather  (--functions fns.py)  The weather of a city." in out)
    term.prompt_ready()
    term.send(f"/save {saved}\r".encode())
    term.read_until(lambda out: b"saved " in out)
    term.prompt_ready()
    assert term.finish() == 0
    messages = json.loads(saved.read_text())["messages"]
    assert [m["role"] for m in messages[:4]] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert messages[2] == {"role": "tool", "content": "error: the user did not allow this call",
                           "tool_call_id": messages[1]["tool_calls"][0]["id"], "name": "get_weather"}


def test_a_lazy_grammar_leaves_the_text_free_until_its_trigger_and_then_holds_it() -> None:
    """--tool-choice auto: llama.cpp's lazy grammar sampler, from the call's opening on. Shown on a word the
    model writes anyway: after it, the grammar writes the rest, and the turn ends where the grammar does."""
    from rml_chat.core.model import load_model
    from rml_chat.engines.base import Generation, LazyGrammar, Sampling
    from rml_chat.engines.local import LocalEngine

    model = load_model(str(model_path("smollm2")))
    ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Name the capital of France in one sentence."}]))
    engine = LocalEngine(model.weights, n_ctx=1024, n_threads=2)
    try:
        free = model.tokenizer.decode(list(engine.generate(ids, Sampling(temp=0.0, max_tokens=24), model.stop_ids,
                                                           Generation())))
        assert "Paris" in free
        held = LazyGrammar('root ::= "Paris (a lazy grammar wrote this)."', ["Paris"])
        gen = Generation()
        out = model.tokenizer.decode(list(engine.generate(ids, Sampling(temp=0.0, max_tokens=48), model.stop_ids,
                                                          gen, grammar=held)))
        first = free.split()[0]  # a pattern anchored at the reply's start (functionary's call by its name)
        anchored = [model.tokenizer.decode(list(engine.generate(ids, Sampling(temp=0.0, max_tokens=24), model.stop_ids,
                                                                Generation(), grammar=LazyGrammar(
                                                                    f'root ::= "{word} (held)."', [word], [f"^({word})"]))))
                    for word in (first, "Paris")]
    finally:
        engine.close()
    assert out == free[:free.index("Paris")] + "Paris (a lazy grammar wrote this)."
    assert gen.stop_reason == "stop" and anchored == [f"{first} (held).", free]  # (Paris is not at the start)


MCP_SERVER = '''
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather")
if len(sys.argv) > 1:  # a file to write the server's pid to (for the test that it ends with rml-chat)
    with open(sys.argv[1], "w") as pid_file:
        pid_file.write(str(os.getpid()))


@server.tool()
def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"Cloudy, 12 C in {city}"


@server.tool()
def stall(seconds: int) -> str:
    """Sleeps, then answers."""
    time.sleep(seconds)
    return "woke"


@server.tool()
def die() -> str:
    """Ends the server."""
    os._exit(1)


if __name__ == "__main__":
    server.run()
'''


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory) -> str:
    import mcp  # noqa: F401  (the test extras hold it: without it these tests fail, as they should, not skip)

    path = tmp_path_factory.mktemp("mcp") / "weather_server.py"
    path.write_text(MCP_SERVER)
    return f"{sys.executable} {path}"


def test_an_mcp_servers_tools_are_called_through_the_model_and_the_server_ends_with_the_run(copies, mcp_server,
                                                                                          tmp_path) -> None:
    pid_file = tmp_path / "server.pid"
    done = subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--mcp", f"{mcp_server} {pid_file}",
                           "--tool-choice", "required", "--tools-approve",
                           "-p", "What is the weather in Paris?", "-n", "48", "--temp", "0", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["tool_calls"][0]["name"] == "get_weather" and out["tool_calls"][0]["result"].startswith("Cloudy, 12 C in")
    assert not _alive(int(pid_file.read_text()))
    # the turn is counted whole: the step that called and the step that answered
    first, second = out["steps"]
    assert out["completion_tokens"] == first["completion_tokens"] + second["completion_tokens"]
    assert out["prompt_tokens_evaluated"] == first["prompt_tokens_evaluated"] + second["prompt_tokens_evaluated"]
    assert second["prompt_tokens_reused"] >= first["prompt_tokens"]  # (llama.cpp's cache kept the first step)
    assert out["timings"]["total_ms"] >= first["ms"] + second["ms"]


def test_tools_whose_definitions_leave_no_room_are_named_as_what_takes_it(copies, tmp_path) -> None:
    many = tmp_path / "many.py"
    docstring = '"""' + "Looks it up. " * 150 + '"""'
    many.write_text("".join(f"def tool_{i}(city: str) -> str:\n    {docstring}\n    return ''\n\n" for i in range(40)))
    done = subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--functions", str(many), "-c", "4096",
                           "-p", "Hi", "-n", "8"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("rml-chat:")]
    found = re.search(r"needs (\d+) tokens, (\d+) of them the definitions of 40 tools;", line)
    assert found is not None and 4096 < int(found[2]) < int(found[1]), line
    assert line.endswith("-c/--ctx-size gives a larger one, fewer tools a shorter prompt")


def test_a_tool_name_given_twice_keeps_the_first_and_says_which_was_left_out(copies, mcp_server) -> None:
    """The functions file and the MCP server both give ``get_weather``: a call names one tool, so the second
    could never be called; it is left out with a note, and the call runs the first."""
    done = subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--functions", copies["functions"],
                           "--mcp", mcp_server, "--tool-choice", "required", "--tools-approve", "-p",
                           "What is the weather in Paris?", "-n", "40", "--temp", "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"note: tool 'get_weather' of --mcp {sys.executable} is left out: --functions fns.py gives one of that " \
           "name" in done.stderr
    assert '-> Sunny, 21 C in Paris' in done.stderr  # (the functions file's, not the server's "Cloudy")


def test_a_broken_mcp_server_is_one_line_and_under_tool_choice_required_an_error_exit(copies, mcp_server) -> None:
    runs = {choice: subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--mcp", mcp_server,
                                    "--mcp", "no-such-mcp-server --stdio", "--tool-choice", choice, "-p", "Hi", "-n", "1"],
                                   capture_output=True, text=True, timeout=300) for choice in ("auto", "required")}
    line = "--mcp no-such-mcp-server --stdio: can't start it (No such file or directory: no-such-mcp-server)"
    assert runs["auto"].returncode == 0 and f"note: {line}; its tools are left out" in runs["auto"].stderr
    assert runs["required"].returncode == 1
    assert runs["required"].stderr.strip().splitlines()[-1] == (
        f"rml-chat: tools: {line}; --tool-choice required needs every tool given")
    assert all("Traceback" not in done.stderr for done in runs.values())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


GARBAGE_SERVER = "import sys, time\nfor i in range(21):\n    print('garbage', i, flush=True)\ntime.sleep(60)\n"
HUNG_SERVER = """import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
time.sleep(120)
"""


def test_a_server_that_writes_garbage_is_one_line_at_once_and_its_tracebacks_go_to_verbose(copies, tmp_path) -> None:
    # (mcp is in the test extras: without it these fail, as they should, rather than skip)
    (tmp_path / "garbage.py").write_text(GARBAGE_SERVER)
    runs = {flags: subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--mcp",
                                   f"{sys.executable} {tmp_path / 'garbage.py'}", "-p", "Hi", "-n", "1", *flags],
                                  capture_output=True, text=True, timeout=120) for flags in ((), ("--verbose",))}
    quiet = runs[()]
    assert quiet.returncode == 0 and "Traceback" not in quiet.stderr
    assert "it wrote a line on stdout that is not an MCP message (stdout is the protocol's alone); its tools are left " \
           "out" in quiet.stderr
    assert "mcp: Failed to parse JSONRPC message from server" in runs[("--verbose",)].stderr


def test_a_server_that_never_answers_its_handshake_is_ended_with_the_processes_it_started(tmp_path) -> None:
    # (mcp is in the test extras: without it these fail, as they should, rather than skip)
    from rml_chat.tools.mcp_tools import McpError, McpServer

    (tmp_path / "hung.py").write_text(HUNG_SERVER)
    with pytest.raises(McpError, match="the server did not answer within 2 s"):
        McpServer(f"{sys.executable} {tmp_path / 'hung.py'} {tmp_path / 'pids'}", start_timeout=2)
    server, child = (int(pid) for pid in (tmp_path / "pids").read_text().split())
    assert not _alive(server) and not _alive(child)


def test_a_hung_and_a_dead_mcp_server_each_end_the_call_with_an_error(mcp_server) -> None:
    from rml_chat.tools.mcp_tools import McpServer

    server = McpServer(mcp_server)
    try:
        tools = server.tools()
        assert [t.name for t in tools] == ["get_weather", "stall", "die"]
        assert tools[0].parameters["properties"]["city"]["type"] == "string"
        box = Toolbox(tools, CallSyntax("<tool_call>", "|", "</tool_call>"), timeout=1.0, approve=lambda call: True)
        assert box.run(ToolCall("get_weather", {"city": "Oslo"})) == "Cloudy, 12 C in Oslo"
        started = time.perf_counter()
        assert box.run(ToolCall("stall", {"seconds": 20})) == "error: the tool did not answer within 1 s"
        assert time.perf_counter() - started < 5
        assert box.run(ToolCall("die", {})).startswith("error: the tool raised")
        assert box.run(ToolCall("get_weather", {"city": "Oslo"})).startswith("error: the tool raised")  # gone now
    finally:
        server.close()


def test_batch_lines_carry_their_calls_and_a_refused_call_says_so(copies) -> None:
    lines = "\n".join(json.dumps({"id": i, "prompt": f"What is the weather in {city}?"})
                      for i, city in enumerate(["Paris", "Oslo"])) + "\n"
    runs = {}
    for flags in ((), ("--tools-approve",)):
        done = subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--functions", copies["functions"],
                               "--tool-choice", "required", "--batch", "-", "-n", "48", "--temp", "0", *flags],
                              input=lines, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs[flags] = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in runs[()]] == [0, 1]
    assert all(r["tool_calls"][0]["result"] == "error: the user did not allow this call" for r in runs[()])
    approved = runs[("--tools-approve",)]
    assert [r["tool_calls"][0]["result"].startswith("Sunny, 21 C in ") for r in approved] == [True, True]
    assert approved[1]["tool_calls"][0]["arguments"]["city"] == "Oslo"


def test_ctrl_c_during_a_call_is_the_calls_result_not_the_end_of_the_chat() -> None:
    import os
    import signal
    import threading

    def hang(x: str) -> str:
        time.sleep(30)
        return "late"

    box = Toolbox([tool_of(hang, "test")], CallSyntax("<tool_call>", "|", "</tool_call>"), timeout=20,
                  approve=lambda call: True)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.perf_counter()
    assert box.run(ToolCall("hang", {"x": "1"})) == "error: the user interrupted the call"
    assert time.perf_counter() - started < 5


def test_a_json_schema_shapes_the_whole_reply_so_such_a_turn_makes_no_call(copies) -> None:
    schema = '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}'
    done = subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--functions", copies["functions"],
                           "--tool-choice", "required", "--tools-approve", "-j", schema, "-p",
                           "What is the weather in Paris?", "-n", "48", "--temp", "0", "--json"],
                          capture_output=True, text=True, timeout=300)
    out = json.loads(done.stdout)
    assert out["tool_calls"] == [] and "tool call:" not in done.stderr
    assert out["schema_valid"] is (out["stop_reason"] == "stop") and "answer" in out["reply"]


def test_a_tool_past_its_time_is_ended_and_its_prints_from_python_or_c_are_a_note(tmp_path) -> None:
    """Each call of a Python tool runs in a process of its own: past the timeout that process is killed
    (the tool writes nothing later), and what it prints, through Python or straight to fd 1, is a note,
    with this process's sys.stdout never replaced."""
    late = tmp_path / "late"

    def hang(x: str) -> str:
        (tmp_path / "pid").write_text(str(os.getpid()))
        time.sleep(3)
        late.write_text("still running")
        return "late"

    def loud(x: str) -> str:
        print("from python")
        os.write(1, b"from C\n")
        return "ok"

    stdout = sys.stdout
    box = Toolbox([tool_of(f, "test") for f in (hang, loud)], CallSyntax("<tool_call>", "|", "</tool_call>"),
                  timeout=0.5, approve=lambda call: True)
    shown: list[str] = []
    box.shown = shown.append
    assert box.run(ToolCall("hang", {"x": "1"})) == "error: the tool did not answer within 0.5 s"
    pid = int((tmp_path / "pid").read_text())
    assert pid != os.getpid()
    time.sleep(3.5)
    assert not late.exists()  # (ended: it never got there)
    assert box.run(ToolCall("loud", {"x": "1"})) == "ok"
    assert "note: tool 'loud' printed: from python | from C" in shown and sys.stdout is stdout


LONG_TEXT_SERVER = '''
from typing import Annotated

from pydantic import Field
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def keep(note: Annotated[str, Field(max_length=1_000_000_000)]) -> str:
    """Keeps a note of up to a gigabyte."""
    return "kept"


if __name__ == "__main__":
    server.run()
'''


def test_a_tool_whose_schema_allows_a_gigabyte_of_text_costs_a_rule_not_a_gigabyte(copies, tmp_path) -> None:
    """pydantic writes ``"maxLength": 1000000000``. llama-cpp-python's port of the converter wrote the
    character rule out that many times (a MemoryError, or the machine's memory); llama.cpp writes
    ``char{0,1000000000}``, and so do we: the tool is offered, in a run held to 4 GB of address space."""
    server = tmp_path / "notes_server.py"
    server.write_text(LONG_TEXT_SERVER)
    done = subprocess.run([sys.executable, "-m", "rml_chat", copies["qwen2.5"], "--mcp", f"{sys.executable} {server}",
                           "-p", "Hi", "-n", "1", "--temp", "0"],
                          capture_output=True, text=True, timeout=300, preexec_fn=_four_gigabytes)
    assert done.returncode == 0 and "left out" not in done.stderr and "error" not in done.stderr, done.stderr


def _four_gigabytes() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


@pytest.mark.parametrize(("command", "said"), [
    ("", "give the server's command, with its arguments"),
    ("   ", "give the server's command, with its arguments"),
    ("python 'server.py", "\"python 'server.py\" is no command line: no closing quotation"),  # (an internal error)
])
def test_an_mcp_command_that_is_no_command_line_is_a_usage_line(command: str, said: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--mcp", command, "-p", "Hi"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"rml-chat: usage: argument --mcp: {said} (rml-chat --help lists the flags)\n"
