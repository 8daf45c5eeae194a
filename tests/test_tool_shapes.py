"""Tool calls read off every tool template of llama.cpp's set (the call's syntax, and the prompt holding a
call and its result, byte for byte the template's), and off templates of unusual shapes: arguments one by
one with strings quoted and the rest bare, Gemma 4 (``call:NAME{city:<|"|>Oslo<|"|>,days:3}``, keys
sorted) and LFM2 (a Python call, ``NAME(city='Oslo', days=3)``); a tool named twice (muse); templates
transformers' sandbox refuses, rendered as llama-server renders them. llama.cpp's grammar sampler is the
oracle for the call's grammar; real turns run SmolLM2's weights under Gemma 4's, MiniMax-M3's and Kimi K2
Thinking's templates."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import fetch, smollm_with_template
from test_reasoning_grammar import Grammar
from test_tools import STOPS, WEATHER

from rml_chat.core.call_reader import parse_calls
from rml_chat.core.typed_values import typed
from rml_chat.engines.runtime import schema_to_gbnf
from rml_chat.tools.functions import load_functions
from rml_chat.tools.grammar import call_grammar
from tokenizer.chat.template import ChatTemplate
from tokenizer.chat.tool_calls import CallSyntax, ToolCall, derive, render_calls, reply_start
from tokenizer.chat.tool_keyed import KeyedArgs

#: templates whose call syntax is read (the rest write arguments one by one, or refuse tools: named below)
READ = ("Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "meta-llama-Llama-3.2-3B-Instruct",
        "Mistral-Small-3.2-24B-Instruct-2506", "openai-gpt-oss-120b", "Qwen-Qwen3-0.6B", "deepseek-ai-DeepSeek-V3.1",
        "moonshotai-Kimi-K2", "upstage-Solar-Open-100B", "ibm-granite-granite-4.0", "mistralai-Mistral-Nemo-Instruct-2407",
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",  # (takes a call only in OpenAI's shape: content None, the
        "Kimi-K2-Instruct", "Kimi-K2-Thinking", "llama-cpp-deepseek-r1",  # arguments a JSON string; these three
        "fireworks-ai-llama-3-firefunction-v2",  # render as llama.cpp renders them, where transformers' sandbox
        "CohereForAI-c4ai-command-r-plus-tool_use",  # refuses them: test_tool_shapes.py; FireFunction reads
        "meetkai-functionary-medium-v3.2")  # its tools as `functions`, a JSON text: template.py; Command R+
#   writes its call before the instructions that end every prompt, its arguments as tojson(indent=4):
#   tool_calls.py; functionary's model writes a recipient first: all\n before text, a tool's name before a call)
KEYED = ("Qwen3-Coder", "Qwen3.5-4B", "GLM-4.6", "MiniMax-M2", "deepseek-ai-DeepSeek-V3.2", "ByteDance-Seed-OSS",
         "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "tencent-Hy3", "google-gemma-4-31B-it", "google-gemma-4-31B-it-interleaved",
         "LFM2.5-8B-A1B", "muse-glimmer", "MiniMax-M3")  # (Gemma 4 and LFM2 quote strings, the rest bare:
#   test_tool_shapes.py; muse names the tool twice: to=NAME<|message|>…<atem:invoke name="NAME">; MiniMax-M3
#   makes each argument a tag named by its key: <city>Oslo</city>)
def _templates() -> dict[str, str]:
    folder = fetch.models_dir() / "templates"
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.jinja"))
            if "tool_calls" in p.read_text(encoding="utf-8")}


def _reparsed(template: ChatTemplate, syntax: CallSyntax, calls: list[ToolCall]) -> list[ToolCall]:
    """The calls rendered by the template itself, then parsed back by the syntax read off it."""
    user = [{"role": "user", "content": "Weather?"}]
    tools = [{"type": "function", "function": {"name": c.name, "description": "", "parameters": {
        "type": "object", "properties": {k: {"type": "integer" if isinstance(v, int) else "string", "description": k}
                                         for k, v in c.arguments.items()}}}} for c in calls]
    rendered = render_calls([replace(c, id="abc123XYZ") for c in calls], syntax.string_arguments)
    prompt = template.render(user, True, tools=tools)
    text = template.render(user + [{"role": "assistant", "content": None if syntax.content_none else "",
                                    "tool_calls": rendered}], False, tools=tools)
    reply = text[reply_start(prompt, text):]
    return parse_calls(syntax, reply.split(syntax.lead)[-1] if syntax.lead else reply)[1]


def test_every_tool_use_template_has_its_call_syntax_read_or_a_reason_named() -> None:
    calls = [ToolCall("get_weather", {"city": "Oslo", "days": 3}), ToolCall("get_time", {"zone": "UTC"})]
    read, unread = [], {}
    for name, source in _templates().items():
        template = ChatTemplate(source)
        syntax, why = derive(template, STOPS, thought_close="</think>")
        if syntax is None:
            assert why, name
            unread[name] = why
            continue
        read.append(name)
        want = calls if syntax.between is not None else calls[:1]
        got = _reparsed(template, syntax, want)
        if syntax.keyed is not None:  # keyed values come back as text, read by the tool's schema
            got = [ToolCall(c.name, typed(c.arguments, {"properties": {"days": {"type": "integer"}}})) for c in got]
        assert [(c.name, c.arguments) for c in got] == [(c.name, c.arguments) for c in want], name
        assert (syntax.keyed is not None) == (name in KEYED) or name not in READ + KEYED, name
    assert set(READ + KEYED) <= set(read) and len(read) == 63 and unread == {}, (read, unread)
    command_r = ChatTemplate(_templates()["CohereForAI-c4ai-command-r-plus-tool_use"])  # (its call, then the
    assert derive(command_r, STOPS) == derive(command_r, ["<|im_end|>"])  # instructions; whatever the stops)
    assert derive(command_r, STOPS)[0].closing == "\n    }\n]```\n"
    r1 = derive(ChatTemplate(_templates()["deepseek-ai-DeepSeek-R1-Distill-Llama-8B"]), STOPS)[0]
    assert r1 is not None and r1.content_none and r1.string_arguments and not r1.quoted


def test_the_table_of_known_syntaxes_is_used_only_where_a_template_renders_no_calls_and_holds_to_its_family() -> None:
    """LFM2-8B-A1B's and LFM2.5-Instruct's templates list the tools and render no call: they get LFM2's
    Python call, which their family's newer template renders (read off it here) and llama.cpp reads for
    all three with one parser (its own test strings, double quotes too)."""
    from tokenizer.chat.tool_calls import RENDERS_NO_CALLS
    from tokenizer.chat.tool_table import KNOWN, known_syntax

    templates = {p.stem: ChatTemplate(p.read_text(encoding="utf-8"))
                 for p in sorted((fetch.models_dir() / "templates").glob("*.jinja"))}
    tabled = {name for name, t in templates.items()
              if derive(t, STOPS)[1] == RENDERS_NO_CALLS and known_syntax(t) is not None}
    assert tabled == {"LFM2-8B-A1B", "LFM2.5-Instruct"}  # (not Granite 3.3, Phi-3.5, SmolLM3, …)
    (lfm2,) = KNOWN
    assert replace(lfm2.syntax, in_content=False) == _syntax("LFM2.5-8B-A1B")
    for text, call in (("<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", ("special_function", {"arg1": 1})),
                       ('<|tool_call_start|>[get_time(city="XYZCITY")]<|tool_call_end|>', ("get_time", {"city": "XYZCITY"})),
                       ("Checking.<|tool_call_start|>[get_time(city='Paris', days=2)]<|tool_call_end|>",
                        ("get_time", {"city": "Paris", "days": 2}))):  # (bare values: Python literals)
        content, (got,) = parse_calls(lfm2.syntax, text)
        assert (got.name, got.arguments) == call and content in ("", "Checking.")


def _syntax(name: str):
    template = ChatTemplate((fetch.models_dir() / "templates" / f"{name}.jinja").read_text(encoding="utf-8"))
    syntax, why = derive(template, STOPS, thought_close="</think>")
    assert syntax is not None, why
    return syntax


@pytest.mark.parametrize("name, quote, text", [
    ("google-gemma-4-31B-it", '<|"|>',
     '<|tool_call>call:get_weather{city:<|"|>Oslo, "north"<|"|>,days:3}<tool_call|><|tool_call>call:get_time{zone:'
     '<|"|>UTC<|"|>}<tool_call|>'),
    ("LFM2.5-8B-A1B", "'", "<|tool_call_start|>[get_weather(city='Oslo, \"north\"', days=3), get_time(zone='UTC')]"
                           "<|tool_call_end|>"),
])
def test_quoted_strings_and_bare_values_are_read_off_the_template(name: str, quote: str, text: str) -> None:
    syntax = _syntax(name)
    assert syntax.keyed is not None and syntax.keyed.quote == quote
    content, calls = parse_calls(syntax, text)
    assert content == "" and calls == [ToolCall("get_weather", {"city": 'Oslo, "north"', "days": 3}),
                                       ToolCall("get_time", {"zone": "UTC"})]


def test_a_quoted_value_that_never_closes_is_named() -> None:
    from tokenizer.chat.errors import ChatFormatError

    with pytest.raises(ChatFormatError, match="opens '<|\"|>' and never closes it"):
        parse_calls(_syntax("google-gemma-4-31B-it"), '<|tool_call>call:get_weather{city:<|"|>Oslo}<tool_call|>')
    assert KeyedArgs(":", ",", quote="'").quote == "'"


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    path = tmp_path_factory.mktemp("quoted") / "fns.py"
    path.write_text(WEATHER)
    return load_functions(str(path))


@pytest.mark.parametrize("text, verdict", [
    ('<|tool_call>call:get_weather{city:<|"|>Oslo, "north"<|"|>,days:3}<tool_call|><|tool_response>', "complete"),
    ('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|><|tool_response>', "complete"),  # days optional
    ('<|tool_call>call:get_weather{city:Oslo}<tool_call|><|tool_response>', "refused"),  # a string is quoted
    ('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:<|"|>3<|"|>}', "refused"),  # a number is bare
])
def test_the_call_grammar_quotes_strings_and_leaves_numbers_bare(tools, text: str, verdict: str) -> None:
    grammar = call_grammar(_syntax("google-gemma-4-31B-it"), tools, schema_to_gbnf, whole=True)
    assert Grammar().verdict(grammar, text) == verdict


def test_a_template_that_names_the_tool_twice_is_read_and_its_grammar_writes_the_name_both_times(tools) -> None:
    """muse: ``to=NAME<|message|>…<atem:invoke name="NAME">``: the name's second place is a hole, filled
    with the tool's own name when a call is parsed and in the call's grammar."""
    syntax = _syntax("muse-glimmer")
    text = (' to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter '
            'name="city">Oslo</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eot|>')
    assert parse_calls(syntax, text)[1] == [ToolCall("get_weather", {"city": "Oslo"})]
    grammar = call_grammar(syntax, tools, schema_to_gbnf, whole=True)
    assert Grammar().verdict(grammar, text) == "complete"
    assert Grammar().verdict(grammar, text.replace('name="get_weather"', 'name="get_time"')) == "refused"


def test_a_template_that_closes_each_argument_with_its_key_is_read_and_its_grammar_names_the_right_key(tools) -> None:
    """MiniMax-M3: ``<city>Oslo</city><days>3</days></invoke>``, each argument a tag named by its key: the key's
    place after a value is a hole, filled with the key just read when a call is parsed, and in the grammar
    with the key just written (llama.cpp's grammar sampler the oracle)."""
    syntax = _syntax("MiniMax-M3")
    sep = "]<]minimax[>["
    head = f'{syntax.opening}get_weather">{sep}<'
    two = f"{head}city>Oslo, north{sep}</city>{sep}<days>3{sep}</days>{sep}</invoke>\n{sep}</tool_call>"
    nxt = f'{sep}</days>{sep}</invoke>\n{sep}<invoke name="get_time">{sep}<zone>UTC{sep}</zone>{sep}</invoke>\n{sep}</tool_call>'
    assert parse_calls(syntax, two)[1] == [ToolCall("get_weather", {"city": "Oslo, north", "days": "3"})]
    assert parse_calls(syntax, two.split(f"{sep}</days>")[0] + nxt)[1] == [
        ToolCall("get_weather", {"city": "Oslo, north", "days": "3"}), ToolCall("get_time", {"zone": "UTC"})]
    grammar = call_grammar(syntax, tools, schema_to_gbnf, whole=True)
    closing = syntax.closing.replace("\3", "{}")
    assert Grammar().verdict(grammar, f"{head}city>Oslo{closing.format('city')}") == "complete"  # days optional
    assert Grammar().verdict(grammar, f"{head}city>Oslo{sep}</city>{sep}<days>3{closing.format('days')}") == "complete"
    assert Grammar().verdict(grammar, f"{head}city>Oslo{closing.format('days')}") == "refused"  # the wrong key closes
    assert Grammar().verdict(grammar, f"{head}days>3{closing.format('days')}") == "refused"  # city is required


def test_a_template_whose_model_writes_a_recipient_first_is_read_and_its_calls_held_from_the_name(tools) -> None:
    """functionary v3.2: the prompt ends with ``>>>``; the model writes ``all\n`` then text, or a tool's
    name, a newline and the arguments (after text, ``>>>`` opens the next recipient), as llama.cpp's own
    test of the template writes them."""
    from rml_chat.core.reply import AnswerText, ReplyFormat, ReplyParser

    syntax = _syntax("meetkai-functionary-medium-v3.2")
    assert (syntax.text_lead, syntax.between, syntax.trigger(), syntax.string_arguments) == ("all\n", ">>>", ">>>", True)
    assert parse_calls(syntax, 'special_function\n{"arg1": 1}') == ("", [ToolCall("special_function", {"arg1": 1})])
    assert parse_calls(syntax, "all\nHello, world!\nWhat's up?") == ("Hello, world!\nWhat's up?", [])
    assert parse_calls(syntax, 'Let me look.>>>get_weather\n{"city": "Oslo"}>>>get_time\n{}') == (
        "Let me look.", [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_time", {})])
    assert parse_calls(syntax, "Paris\nis sunny.") == ("Paris\nis sunny.", [])  # a name and a newline, but no arguments
    whole, lazy = (call_grammar(syntax, tools, schema_to_gbnf, whole=w) for w in (True, False))
    assert Grammar().verdict(whole, 'get_weather\n{"city": "Oslo", "days": 3}') == "complete"
    assert Grammar().verdict(whole, '>>>get_weather\n{"city": "Oslo"}') == "refused"
    assert Grammar().verdict(lazy, '>>>get_weather\n{"city": "Oslo"}') == "complete"  # from either trigger
    assert Grammar().verdict(lazy, 'get_weather\n{"city": "Oslo"}') == "complete"
    for pieces, shown, calls in ((("get_", "weather", '\n{"city": "Oslo"}'), "", [("get_weather", {"city": "Oslo"})]),
                                 (("get", " the", " umbrella>>>", "get_weather\n{}"), "get the umbrella",
                                  [("get_weather", {})])):
        parser = ReplyParser(ReplyFormat(calls=syntax), schemas={"get_weather": {}})
        events = [event for piece in pieces for event in parser.feed_text(piece)] + parser.finish()
        assert "".join(e.text for e in events if isinstance(e, AnswerText)) == shown
        assert parser.message is not None and [(c.name, c.arguments) for c in parser.message.tool_calls] == calls


def test_the_text_a_model_writes_before_its_answer_is_not_shown_nor_kept() -> None:
    """functionary v3.2's ``all\n``: what the template writes before an assistant's text that the generation
    prompt does not; hidden from the answer and from the history (the template writes it back)."""
    from conftest import ours

    from rml_chat.core.reply import AnswerText, ReplyFormat, ReplyParser
    from tokenizer.chat.tool_calls import answer_lead

    template = ChatTemplate((fetch.models_dir() / "templates" / "meetkai-functionary-medium-v3.2.jinja").read_text())
    assert answer_lead(template) == "all\n" and answer_lead(ChatTemplate(_templates()["Qwen-Qwen2.5-7B-Instruct"])) == ""
    tok = ours("smollm2")
    for text, shown in (("all\nHello there", "Hello there"), ("allowed: yes", "allowed: yes"), ("Hi", "Hi")):
        reply = ReplyParser(ReplyFormat(answer_lead="all\n"), tokenizer=tok)
        events = [event for i in tok.encode(text) for event in reply.feed(i)] + reply.finish()
        out = "".join(e.text for e in events if isinstance(e, AnswerText))
        assert out == shown and reply.raw_answer == shown, text


#: WEATHER with its parameters described (Command R+ writes every parameter's description)
DOCUMENTED = WEATHER.replace('"""The weather of a city."""', '"""The weather of a city.\n\n    Args:\n        city: The '
                                                               'city.\n        days: How many days.\n    """')


@pytest.mark.parametrize("template, flags", [
    ("google-gemma-4-31B-it", []),
    ("fireworks-ai-llama-3-firefunction-v2", []),  # its tools handed as `functions`, a JSON text
    ("CohereForAI-c4ai-command-r-plus-tool_use", []),  # its call before the instructions ending every prompt
    ("meetkai-functionary-medium-v3.2", []),  # the model writes the recipient: the tool's name
    # its prompt opens a thought the 135M model never closes: the budget closes it; then the grammar
    ("MiniMax-M3", ["--reasoning-budget", "0"]),
    # rendered as llama.cpp renders it (below); a thought the model may open first, closed by the budget
    ("Kimi-K2-Thinking", ["--reasoning-budget", "0"]),
])
def test_a_tool_is_called_on_real_weights_and_the_result_goes_back(template: str, flags: list[str], tmp_path) -> None:
    copy = smollm_with_template(tmp_path / "copy.gguf", template)
    functions = tmp_path / "fns.py"
    functions.write_text(DOCUMENTED)
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(copy), "--functions", str(functions), "--tool-choice",
                           "required", "-p", "What is the weather in Paris?", "-n", "120", "--temp", "0", "--json",
                           "--tools-approve", *flags], capture_output=True, text=True, timeout=300)
    out = json.loads(done.stdout)
    first = out["tool_calls"][0]
    assert first["name"] == "get_weather" and isinstance(first["arguments"]["city"], str)
    assert first["result"] == f"Sunny, 21 C in {first['arguments']['city']}" and "tool call: get_weather(" in done.stderr


def test_a_tool_the_template_cant_describe_is_left_out_in_one_line(tmp_path) -> None:
    copy = smollm_with_template(tmp_path / "copy.gguf", "CohereForAI-c4ai-command-r-plus-tool_use")
    functions = tmp_path / "fns.py"
    functions.write_text(WEATHER + DOCUMENTED.replace("get_weather", "get_forecast"))
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(copy), "--functions", str(functions), "-p", "Hi",
                           "-n", "4", "--verbose"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert ("note: tool 'get_weather' (--functions fns.py) left out: the chat template can't write its definition "
            "(the chat template failed (UndefinedError: 'dict object' has no attribute 'description'))") in done.stderr
    assert "tools: get_forecast (calls written as 'Action:" in done.stderr


def test_a_call_inside_a_thought_that_never_closes_is_a_call_and_the_thought_ends_where_it_begins(tools) -> None:
    """Kimi K2 Thinking writes its calls inside its thought, which never closes (llama.cpp's own test of the
    template reads them as calls). Call markup in a thought that did close is reasoning, not a call (as
    llama.cpp's "fake tool call marker inside reasoning")."""
    from types import SimpleNamespace

    from rml_chat.core.message import Message
    from rml_chat.core.tool_round import calls_of_reply
    from rml_chat.tools.toolbox import Toolbox

    box = Toolbox(tools, _syntax("Kimi-K2-Thinking"))
    call = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
            '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>')

    from tokenizer.chat.reasoning import derive as derive_reasoning

    reasoning = derive_reasoning(ChatTemplate((fetch.models_dir() / "templates" / "Kimi-K2-Thinking.jinja").read_text()))

    from rml_chat.core.reply import ReplyFormat, parse_reply

    def recorded(thought: str, answer: str, ended_in_thought: bool) -> tuple[Message, SimpleNamespace]:
        written = f"<think>{thought}" + ("" if ended_in_thought else f"</think>{answer}")  # (as the model wrote it)
        read = parse_reply(ReplyFormat(reasoning, box.syntax), written, schemas=box.schemas(), in_thought=False)
        return Message("assistant", answer, reasoning=thought), SimpleNamespace(
            ended_in_thought=ended_in_thought, generation=SimpleNamespace(stop_reason="stop"), message=read)

    message, calls = calls_of_reply(*recorded("I need the weather. " + call, "", True), box.syntax, print, box.new_id)
    assert calls == [ToolCall("get_weather", {"city": "Oslo"}, "functions.get_weather:0")]  # (its id)
    assert message.reasoning == "I need the weather." and message.content == ""
    assert message.tool_calls[0]["function"] == {"name": "get_weather", "arguments": {"city": "Oslo"}}
    closed, last = recorded(f"I could write {call} here.", "Sunny, I think.", False)
    message, calls = calls_of_reply(closed, last, box.syntax, print, box.new_id)
    assert calls == [] and message is closed and message.reasoning.endswith("here.")


#: templates transformers' sandbox refuses and llama.cpp renders (tokenizer/chat/template.py): Kimi K2's
#: queue their calls' ids in a list of their own; llama.cpp's own DeepSeek R1 template hands a generator to
#: tojson
RENDERED_AS_LLAMA_CPP = ("Kimi-K2-Instruct", "Kimi-K2-Thinking", "llama-cpp-deepseek-r1")


@pytest.mark.server
@pytest.mark.parametrize("name", RENDERED_AS_LLAMA_CPP)
def test_a_template_transformers_refuses_is_rendered_byte_for_byte_as_llama_server_renders_it(name: str) -> None:
    """The oracle is llama.cpp's own template engine: llama-server ``--jinja`` with the template, asked
    for the prompt of a conversation holding a call (in the shape the template takes), its result, an
    answer and a new question (``/apply-template``)."""
    import urllib.request

    from conftest import ROOT, model_path

    sys.path.insert(0, str(ROOT / "scripts"))
    import cluster

    from tokenizer.chat.tool_calls import render_calls

    path = fetch.models_dir() / "templates" / f"{name}.jinja"
    syntax = _syntax(name)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "description": "The city."}},
        "required": ["city"]}}}]
    messages = [{"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": None if syntax.content_none else "",
                 "tool_calls": render_calls([ToolCall("get_weather", {"city": "Oslo"}, "call00001")],
                                            syntax.string_arguments)},
                {"role": "tool", "content": 'Sunny, "21 C"', "tool_call_id": "call00001", "name": "get_weather"},
                {"role": "assistant", "content": "It is sunny."}, {"role": "user", "content": "And Paris?"}]
    server = cluster.start(model_path("smollm2"), workers=0, ctx=2048,
                           extra=["--jinja", "--chat-template-file", str(path)])
    try:
        request = urllib.request.Request(server.url + "/apply-template", json.dumps(
            {"messages": messages, "tools": tools}).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            theirs = json.loads(answer.read())["prompt"]
    finally:
        server.stop()
    template = ChatTemplate(path.read_text(encoding="utf-8"))
    ours = template.render(messages, True, tools=tools, bos_token="<|im_start|>", eos_token="<|im_end|>")
    assert ours == theirs and "get_weather" in ours and "Sunny" in ours
    assert template.mutates is name.startswith("Kimi")  # the sandbox that lets it change its own list: only there


@pytest.mark.parametrize("result", ['Sunny {"t": 21}', 'line one\nline "two" \\ back', " padded <|im_end|> "])
def test_every_tool_templates_prompt_with_a_call_and_its_result_is_the_template_itself(result: str) -> None:
    """Byte for byte jinja2's rendering, results with quotes, newlines and a special token's text too
    (Llama 3.x and gpt-oss hand a result to tojson: the splice takes its escaped text, still literal)."""
    import datetime

    from tokenizer.chat.errors import ChatFormatError
    from tokenizer.chat.render import format_chat
    from tokenizer.chat.segments import segments_text
    from tokenizer.chat.splice import TemplateFormat

    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "description": "The city."}}, "required": ["city"]}}}]
    now, same = datetime.datetime(2026, 1, 2), 0
    for name, source in _templates().items():
        syntax = derive(ChatTemplate(source), STOPS)[0] or CallSyntax("", "", "")  # the call in the template's shape
        conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"},
                        {"role": "assistant", "content": None if syntax.content_none else "",
                         "tool_calls": render_calls([ToolCall("get_weather", {"city": "Oslo"}, "call00001")],
                                                    syntax.string_arguments)},
                        {"role": "tool", "content": result, "tool_call_id": "call00001", "name": "get_weather"}]
        options = {"bos_token": "<s>", "eos_token": "</s>", "now": now}
        try:
            expected = ChatTemplate(source).render(conversation, True, tools=tools, **options)
        except ChatFormatError:
            continue  # the template refuses tools itself (named in the syntax test)
        segments = format_chat(TemplateFormat(name, source), conversation, True, tools=tools, **options)
        assert segments_text(segments) == expected, name
        literal = (result.strip(), json.dumps(result.strip(), ensure_ascii=False)[1:-1])  # as written, or in tojson
        assert any(not s.special and s.text in literal for s in segments), name
        same += 1
    assert same == 63, same
