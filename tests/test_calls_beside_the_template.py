"""Calls as real models write them beside their template, in the REPL in a real pty: the screen shows exactly
the calls, thought and answer the chat saves.

A 135M model under a grammar can't be made to write these: the tools' own grammar writes the template's form
from the call's opening on. So the model here is a scripted one (scripted_model.py): a real GGUF run by
llama.cpp whose reply is set in its weights, on SmolLM2's vocabulary with the family's markers as plain text
and, where the real vocabulary has them as tokens, as those tokens. The kinds are those the tools' grammar
lets through, because the call opens where the grammar is not waiting (inside a thought, with no marker) or
its form is one the grammar takes. The others (a malformed call among good ones, an argument whose close is
left out, arguments wrapped in one parameter, an empty harmony body) can't reach a local chat: the grammar
writes the template's form where the model would not (tests/test_reply_decided_once.py reads each of them
as the parser does, streamed and whole).
"""

from __future__ import annotations

import json
import re

import pytest
from scripted_model import scripted_model
from test_repl import Terminal
from test_reply_decided_once import MARKERS, _words
from test_tools import CITY_WEATHER

ANSWER = ["It is sunny", " in Paris."]

KINDS = {  # kind: (template, the reply that calls, the reply after the call's result, the call read)
    "a call opened in a thought that never closed": (
        "Qwen3.5-4B",
        ["I should look.\n", "<tool_call>", "\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
         "</function>\n", "</tool_call>"],
        ["Sunny there.", "</think>", "\n\nIt is sunny", " in Paris."], ("get_weather", {"city": "Paris"})),
    "a call without its namespace (Kimi K2's functions.)": (
        "moonshotai-Kimi-K2",
        ["<|tool_calls_section_begin|>", "<|tool_call_begin|>", "get_weather:0", "<|tool_call_argument_begin|>",
         '{"city": "Paris"}', "<|tool_call_end|>", "<|tool_calls_section_end|>"], ANSWER,
        ("get_weather", {"city": "Paris"})),
    "a call object with its keys in the other order (Qwen 2.5: its trigger is the name's key)": (
        "Qwen-Qwen2.5-7B-Instruct",
        ["<tool_call>", '\n{"arguments": {"city": "Paris"}, ', '"name": "get_weather"}\n', "</tool_call>"], ANSWER,
        ("get_weather", {"city": "Paris"})),
    "a call object with its keys in the other order and no marker (Llama 3.1)": (
        "meta-llama-Llama-3.1-8B-Instruct", ['{"parameters": {"city": ', '"Paris"}, ', '"name": "get_weather"}'], ANSWER,
        ("get_weather", {"city": "Paris"})),
    "the syntax's own 'this value is JSON' (DeepSeek V3.2's string=\"false\")": (
        "deepseek-ai-DeepSeek-V3.2",
        ['<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n',
         '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n',
         '<｜DSML｜parameter name="days" string="false">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'],
        ANSWER, ("get_weather", {"city": "Paris", "days": 2})),
}
MARKUP = ("<tool_call>", "<function=", "<parameter=", "<|tool_call", "｜DSML｜", '{"parameters"', '"name"')
CASES = [(kind, False) for kind in KINDS] + [(kind, True) for kind, (template, *_) in KINDS.items() if template in MARKERS]


@pytest.mark.parametrize(("kind", "markers_are_tokens"), CASES,
                         ids=[f"{kind[:40]}, markers as {'tokens' if tokens else 'text'}" for kind, tokens in CASES])
def test_the_repl_shows_exactly_the_call_thought_and_answer_it_saves(kind: str, markers_are_tokens: bool,
                                                                    tmp_path) -> None:
    template, calling, answering, (name, arguments) = KINDS[kind]
    control, user = MARKERS[template] if markers_are_tokens else ([], [])
    used = set(calling + answering)
    model = scripted_model(tmp_path / "model.gguf", template, calling, answering,
                           control=tuple(m for m in control if m in used), user_defined=tuple(m for m in user if m in used))
    (tmp_path / "fns.py").write_text(CITY_WEATHER)
    term = Terminal(tmp_path, str(model), "--functions", str(tmp_path / "fns.py"), "--temp", "0", "-n", "96",
                    "--markdown", "off", model=False)
    term.prompt_ready()
    start = len(term.output)
    term.send(b"What is the weather in Paris?\r")
    term.read_until(lambda out: b"[a]lways for get_weather: " in out[start:])
    term.send(b"a\r")
    term.read_until(lambda out: b"stop: " in out[start:].split(b"[a]lways")[-1] and out.endswith(b"> "))
    term.prompt_ready()
    drawn = term.output[start:].decode("utf-8", "replace")
    assert term.finish() == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    messages = json.loads(chat.read_text())["messages"]
    calling_message, result, answer = messages[-3:]
    (call,) = calling_message["tool_calls"]
    assert (call["function"]["name"], call["function"]["arguments"]) == (name, arguments)
    assert result["role"] == "tool" and result["content"] == "Sunny, 21 C in Paris"
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    assert re.findall(r"tool call: (\w+)\((\{.*?\})\) -> (.*)\r", screen) == [
        (name, json.dumps(arguments), "Sunny, 21 C in Paris")]
    before, after = drawn.split("tool call:", 1)
    after = after.split("\n", 1)[1]
    for reply, message in ((before, calling_message), (after, answer)):
        reply = re.sub(r"\x1b\[2m(?:evaluating the prompt|prompt): [^\x1b]*\x1b\[0m", "", reply)  # (progress, cleared)
        reply = re.split(r"\r?\n(?:\x1b\[2m)?(?:\[the reply|\[reply cut|[^\n]*prompt tokens evaluated|run \w+\()",
                         reply.split("Paris?", 1)[-1])[0]
        thought = "".join(re.findall(r"\x1b\[2m(.*?)\x1b\[0m", reply, re.DOTALL))
        shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", re.sub(r"\x1b\[2m.*?\x1b\[0m", "", reply, flags=re.DOTALL))
        assert (_words(thought), _words(shown)) == (_words(message.get("reasoning") or ""), _words(message["content"])), \
            (reply, message)
        assert not any(m in reply for m in MARKUP + ("<think>", "</think>")), reply
    assert answer["content"].strip() == "It is sunny in Paris."
