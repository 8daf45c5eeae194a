"""Which call the model makes, and when: ``--tool-choice auto`` with the call started by the model itself on
real weights (llama.cpp's lazy grammar waiting for the call's opening), and ``required`` where thought and
answer are channels (gpt-oss: the call is a message of its own). SmolLM2's weights under the templates'
copies; the rest of the tool loop is tests/test_tools.py."""

from __future__ import annotations

import pytest
from conftest import smollm_with_template
from test_tools import STOPS, WEATHER

from rml_chat.tools import loop as tool_loop
from rml_chat.tools.functions import load_functions
from rml_chat.tools.toolbox import Toolbox
from tokenizer.chat.template import ChatTemplate
from tokenizer.chat.tool_calls import ToolCall, derive, render_calls


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("choice")
    made = {family: smollm_with_template(folder / f"{family}.gguf", name) for family, name in (
        ("qwen2.5", "Qwen-Qwen2.5-7B-Instruct"), ("hermes3", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"),
        ("gpt-oss", "openai-gpt-oss-120b"))}
    (folder / "fns.py").write_text(WEATHER)
    made["functions"] = str(folder / "fns.py")
    return made


@pytest.mark.parametrize("family", ["qwen2.5", "hermes3", "gpt-oss"])  # (gpt-oss: the call a message of its own)
def test_under_auto_the_model_opens_a_call_itself_and_the_lazy_grammar_holds_it(copies, family: str) -> None:
    """--tool-choice auto on real weights, the call started by the model: with five calls and their answers
    earlier in the conversation (three were enough with flash attention off, not with it on), SmolLM2 writes
    the call's opening by itself; llama.cpp's lazy grammar (no constraint until that opening) holds the rest
    to the template's syntax; the call runs and the answer uses its result. (Llama 3.2's syntax, which
    opens with '{"name"', is not written by itself here.)"""
    from rml_chat.core.model import load_model
    from rml_chat.core.session import ChatSession, SessionOptions
    from rml_chat.engines.base import LazyGrammar, Sampling
    from rml_chat.engines.local import LocalEngine
    from tokenizer.chat.tool_calls import tool_message

    model = load_model(copies[family])
    engine = LocalEngine(model.weights, n_ctx=4096, n_threads=2)
    grammars: list[object] = []
    generate = engine.generate
    engine.generate = lambda ids, *a, **k: (grammars.append(k.get("grammar", a[4] if len(a) > 4 else None)),
                                            generate(ids, *a, **k))[1]
    try:
        session = ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, max_tokens=80)))
        syntax, _ = derive(ChatTemplate(model.tokenizer.chat_template), STOPS)
        session.options.tools = Toolbox(load_functions(copies["functions"]), syntax, choice="auto", approve=lambda call: True)
        for i, city in enumerate(["Oslo", "Rome", "Madrid", "Berlin", "Lisbon"]):
            call = ToolCall("get_weather", {"city": city}, f"call0000{i}")
            for message in [
                {"role": "user", "content": f"What is the weather in {city}?"},
                {"role": "assistant", "content": "", "tool_calls": render_calls([call])},
                tool_message(call, f"Sunny, 21 C in {city}"),
                {"role": "assistant", "content": f"It is sunny and 21 C in {city}."}]:
                session.conversation.add(message)
        result = tool_loop.exchange(session, "What is the weather in Paris?", lambda t: None, lambda t: None)
    finally:
        engine.close()
    assert [(r.call.name, r.call.arguments, r.result) for r in result.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "Sunny, 21 C in Paris")]
    assert isinstance(grammars[0], LazyGrammar) and grammars[0].triggers == (syntax.trigger(),)  # none before it
    call_message, tool, answer = session.conversation.messages[-3:]
    assert call_message.tool_calls[0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert tool.content == "Sunny, 21 C in Paris" and "Paris" in answer.content


def test_a_required_call_on_gpt_oss_is_a_message_of_its_own_not_after_the_final_channel(copies) -> None:
    """gpt-oss's thought and answer are channels, and a call is a message of its own (` to=functions.NAME
    <|channel|>commentary json<|message|>ARGS`). Under `required` the reply is that call, after the model's
    analysis or without one (llama.cpp's gpt-oss grammar: analysis messages, then the call), as the grammar
    the session hands llama.cpp says (its sampler the oracle); never the final channel, which answers."""
    from test_reasoning_grammar import Grammar

    from rml_chat.core.gbnf import for_reply
    from rml_chat.core.model import load_model

    model = load_model(copies["gpt-oss"])
    syntax, _ = derive(ChatTemplate(model.tokenizer.chat_template), STOPS, thought_close=model.reasoning.close)
    box = Toolbox(load_functions(copies["functions"]), syntax, choice="required")
    handed = for_reply(box.required_grammar(model.reasoning), model.reasoning, in_thought=False, thought_over=False)
    call = ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}'
    analysis = "<|channel|>analysis<|message|>The user wants Paris. <|end|> is a token.<|end|><|start|>assistant"
    assert Grammar().verdict(handed, call) == "complete"
    assert Grammar().verdict(handed, analysis + call) == "complete"  # its analysis first, as llama.cpp's allows
    assert Grammar().verdict(handed, "<|channel|>final<|message|>" + call) == "refused"
    assert Grammar().verdict(handed, analysis + "<|channel|>final<|message|>Sunny") == "refused"
    # the budget or Ctrl-C closes the analysis with the message's end alone, and the call follows (not the final channel)
    after = for_reply(box.required_grammar(model.reasoning), model.reasoning, in_thought=False, thought_over=True)
    assert box.required_grammar(model.reasoning).close == "<|end|><|start|>assistant"
    assert Grammar().verdict(after, call) == "complete" and Grammar().verdict(after, analysis + call) == "refused"
