"""Replies whose markers are control tokens, as they are in the real vocabularies of gpt-oss, Kimi K2 and
DeepSeek V3.1: SmolLM2's vocabulary with its spare control tokens (StarCoder's ``<filename>``, …, ids 3 to
16) renamed to the family's markers, type CONTROL, written by the gguf package as a vocabulary-only file
under the family's template. The reply goes in as ids, the way the engine hands it over, through the
streaming path (``Reply``: control tokens hidden from the screen); the calls are read off what it recorded
and must be llama.cpp's reading of the same text, and nothing shown or kept holds a private character."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from conftest import fetch, model_path
from test_tools import STOPS

import tokenizer
from rml_chat.core.reply import AnswerText, CallClosed, CallOpened, ReplyFormat, ReplyParser, parse_reply
from rml_chat.core.thoughts import HIDDEN_CLOSE, HIDDEN_OPEN
from rml_chat.tools import loop as tool_loop
from tokenizer import TokenType

SPARE = range(3, 17)  # SmolLM2's control tokens past <|im_end|>, which no chat of its writes


def vocabulary_with_markers(target: Path, template: str, markers: list[str], *, weights: bool = False,
                            user_defined: frozenset[str] = frozenset()) -> Path:
    """A copy of SmolLM2's GGUF, ``markers`` in its spare control tokens (type CONTROL, or USER_DEFINED for
    those in ``user_defined``, as the real vocabulary has them), ``template`` (a stem of llama.cpp's set)
    its chat template; vocabulary only, or with the weights."""
    reader = gguf.GGUFReader(str(model_path("smollm2")))
    tokens = [str(t) for t in reader.get_field("tokenizer.ggml.tokens").contents()]
    types = list(reader.get_field("tokenizer.ggml.token_type").contents())
    known = set(tokens)
    fresh = [m for m in markers if m not in known]
    assert len(fresh) <= len(SPARE)
    for i, marker in zip(SPARE, fresh):
        kind = gguf.TokenType.USER_DEFINED if marker in user_defined else gguf.TokenType.CONTROL
        tokens[i], types[i] = marker, int(kind)
    writer = gguf.GGUFWriter(str(target), reader.get_field("general.architecture").contents())
    new = {"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
           "tokenizer.chat_template": (fetch.models_dir() / "templates" / f"{template}.jinja").read_text(encoding="utf-8")}
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = new.pop(field.name, field.contents())
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    for name, value in new.items():
        writer.add_key_value(name, value, gguf.GGUFValueType.STRING)
    tensors = {t.name: t.data for t in reader.tensors} if weights else {}
    if tensors:  # each marker's embedding (tied: its output row too) is that of its text's first token, so
        embeddings = tensors["token_embd.weight"].copy()  # the 135M model writes it where it would write
        plain = tokenizer.load(str(model_path("smollm2")))  # that text, as a real model writes its markers
        for i, marker in zip(SPARE, fresh):
            embeddings[i] = embeddings[plain.encode(marker)[0]]
            scales = embeddings[i].reshape(-1, 34)[:, :2].copy().view(np.float16)  # (Q8_0 blocks: a scale, 32 bytes)
            embeddings[i].reshape(-1, 34)[:, :2] = (scales * np.float16(1.002)).view(np.uint8)  # the marker a little
        tensors["token_embd.weight"] = embeddings  # ahead of its text: no tie for a sampler's sort to break either way
    kinds = {t.name: t.tensor_type for t in reader.tensors}
    for name, data in tensors.items():
        writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, kinds[name])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in tensors.values():
        writer.write_tensor_data(data, tensor_endianess=reader.endianess)
    writer.close()
    return target


FAMILIES = {  # template, its control-token markers, a reply with a call, what llama.cpp reads in it
    "gpt-oss": ("openai-gpt-oss-120b", ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                                        "<|return|>", "<|call|>"],
                "<|channel|>analysis<|message|>The user wants Oslo's weather.<|end|><|start|>assistant<|channel|>"
                'commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}',
                ("", "The user wants Oslo's weather.", [("get_weather", {"city": "Oslo"}, "")])),
    "Kimi K2": ("moonshotai-Kimi-K2", ["<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
                                       "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                       "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"],
                "Let me look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                '<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
                ("Let me look.", "", [("get_weather", {"city": "Oslo"}, "functions.get_weather:0")])),
    "DeepSeek V3.1": ("deepseek-ai-DeepSeek-V3.1", ["<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>",
                                                   "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                                                   "<｜tool▁sep｜>", "<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜>"],
                      "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                      '{"city": "Oslo"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
                      ("Checking.", "", [("get_weather", {"city": "Oslo"}, "")])),
}
SCHEMAS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_call_whose_markers_are_control_tokens_is_read_from_the_streamed_ids(family: str, tmp_path) -> None:
    template, markers, text, (content, reasoning, calls) = FAMILIES[family]
    path = vocabulary_with_markers(tmp_path / "vocab.gguf", template, markers)
    tok = tokenizer.load(str(path))
    ids = tok.encode(text, parse_special=True)
    controls = [tok.id_to_token(i) for i in ids if tok.token_type(i) == TokenType.CONTROL]
    assert controls and all(c in markers for c in controls), controls  # (the markers are control tokens)
    reply_format = ReplyFormat.of_template(tok.chat_template, stops=STOPS)
    assert reply_format.calls is not None
    expected = parse_reply(reply_format, text, schemas=SCHEMAS, in_thought=False)  # the text read whole
    assert (expected.content, expected.reasoning, [(c.name, c.arguments, c.id) for c in expected.tool_calls]) == \
           (content, reasoning, calls)

    markers = reply_format.calls.markers(tok.special_texts())  # (as the toolbox gives them)
    reply = ReplyParser(reply_format, tokenizer=tok, schemas=SCHEMAS, markers=markers)  # the stream, id by id
    events = [event for i in ids for event in reply.feed(i)] + reply.finish()
    shown = "".join(e.text for e in events if isinstance(e, AnswerText))
    thought = reply.thought
    private = (HIDDEN_OPEN, HIDDEN_CLOSE)
    assert not any(p in shown + thought + reply.thought_raw + reply.raw_answer for p in private)
    assert not any(m in shown for m in controls)  # (control tokens never reach the screen)
    assert reply.written == text  # (what the model wrote, control tokens and all)
    got = reply.message
    assert got is not None and [(c.name, c.arguments, c.id) for c in got.tool_calls] == calls, (family, reply.written)
    assert got.content == content and json.dumps(thought) == json.dumps(reasoning)
    assert [e.name for e in events if isinstance(e, CallOpened)] == [name for name, _, _ in calls]  # (as they stream)
    assert [e.call for e in events if isinstance(e, CallClosed)] == list(got.tool_calls)
    assert parse_reply(reply_format, ids, tokenizer=tok, schemas=SCHEMAS, markers=markers, in_thought=False) == got


REAL_WEIGHTS = {  # the families of issue 42's proof: template, markers, those the real vocabulary has as
    # user-defined rather than control, and what the turn needs (gpt-oss may write its analysis first, which
    # the budget closes: its close is control tokens too)
    **{family: (*FAMILIES[family][:2], frozenset(), {}) for family in FAMILIES},
    "Qwen3-Coder": ("Qwen3-Coder", ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"],
                    frozenset({"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"}), {}),
    "GLM 4.6": ("GLM-4.6", ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
                            "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                            "<think>", "</think>"], frozenset(), {}),
    "Mistral Small 3.2": ("Mistral-Small-3.2-24B-Instruct-2506",
                          ["[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]",
                           "[CALL_ID]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
                          frozenset(), {}),
}
REAL_WEIGHTS["gpt-oss"] = (*REAL_WEIGHTS["gpt-oss"][:3], {"reasoning_budget": 8, "max_tokens": 160})


#: the tool of the test below: a city among three, so that a greedy SmolLM2 under a foreign template can't write
#: a name that never ends (its greedy text differs from CPU to CPU; on an AMD EPYC it looped in the string)
CITY_WEATHER = '''
from typing import Literal


def get_weather(city: Literal["Paris", "Oslo", "Rome"], days: int = 1) -> str:
    """The weather of a city."""
    return f"Sunny, 21 C in {city}"
'''


@pytest.mark.parametrize("family", list(REAL_WEIGHTS))
def test_a_required_call_on_real_weights_whose_markers_are_control_tokens(family: str, tmp_path) -> None:
    """SmolLM2's weights under the family's template and markers, ``--tool-choice required``: the call is
    read from what the model wrote (control tokens and all), run with the user's consent, the thought shown
    and kept holds no private character, and the next prompt is the template's own rendering of the
    conversation, the model's call id in it."""
    from rml_chat.core.model import load_model
    from rml_chat.core.session import ChatSession, SessionOptions
    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine
    from rml_chat.tools.functions import load_functions
    from rml_chat.tools.toolbox import Toolbox
    from tokenizer.chat.template import ChatTemplate

    template, markers_list, user_defined, extra = REAL_WEIGHTS[family]
    path = vocabulary_with_markers(tmp_path / "model.gguf", template, markers_list, weights=True,
                                   user_defined=user_defined)
    (tmp_path / "fns.py").write_text(CITY_WEATHER)
    model = load_model(str(path))
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2)
    asked: list[str] = []
    prompts: list[list[int]] = []
    thoughts: list[str] = []
    shown: list[str] = []  # what reached the screen
    cut: list[int] = []  # how much of it had when the call was asked for
    try:
        session = ChatSession(model, engine, SessionOptions(Sampling(**{"temp": 0.0, "max_tokens": 96, **extra})))
        reply_format = ReplyFormat.of_template(model.tokenizer.chat_template, stops=STOPS)
        assert reply_format.calls is not None
        tools = load_functions(str(tmp_path / "fns.py"))
        markers = reply_format.calls.markers(model.tokenizer.special_texts())
        assert markers and set(markers) <= set(markers_list)  # (the syntax's markers, written as tokens)
        session.options.tools = Toolbox(tools, reply_format.calls, choice="required", markers=markers,
                                  approve=lambda call: asked.append(call.name) or cut.append(len(shown)) or True)
        generate = engine.generate
        engine.generate = lambda ids, *a, **k: (prompts.append(list(ids)), generate(ids, *a, **k))[1]
        result = tool_loop.exchange(session, "What is the weather in Paris?", shown.append, lambda line: None,
                                    think=thoughts.append)
    finally:
        engine.close()
    assert asked[0] == "get_weather"  # (asked before it ran; the model may call again after its result)
    screen = "".join(shown[:cut[0]])  # (the call's turn: its call is a line of the toolbox's, never its text)
    assert '"city"' not in screen and "city=" not in screen and not any(m in screen for m in markers_list), screen
    ran = result.tool_calls[0]
    assert ran.call.name == "get_weather" and ran.result == f"Sunny, 21 C in {ran.call.arguments['city']}"
    private = (HIDDEN_OPEN, HIDDEN_CLOSE, "\ue000")
    kept = json.dumps([m.as_dict() for m in session.conversation.messages], ensure_ascii=False)
    assert not any(p in "".join(thoughts) + kept for p in private)
    messages = session.conversation.for_prompt(model.reasoning)[:-1]  # what the second prompt was made of
    made = next(m for m in messages if m.get("tool_calls"))
    if family == "Kimi K2":  # (its model writes the id: the one handed back to the template)
        assert made["tool_calls"][0]["id"].startswith("functions.get_weather:")
    assert len(prompts) >= 2
    expected = ChatTemplate(model.tokenizer.chat_template).render(
        messages, True, tools=[t.definition() for t in tools], bos_token="<|im_start|>", eos_token="<|im_end|>")
    assert model.tokenizer.decode(prompts[-1]) == expected


THOUGHT_FAMILIES = {  # a family whose prompt opens the thought: template, markers, those user-defined in the real vocabulary
    "Command A (cohere2)": ("Cohere2MoE", ["<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>",
                                           "<|USER_TOKEN|>", "<|SYSTEM_TOKEN|>", "<|START_THINKING|>", "<|END_THINKING|>",
                                           "<|START_TEXT|>", "<|END_TEXT|>", "<|START_ACTION|>", "<|END_ACTION|>"],
                            frozenset()),
    "MiniMax M2": ("MiniMax-M2", ["]~!b[", "]~b]", "[e~[", "<think>", "</think>"], frozenset({"<think>", "</think>"})),
}


@pytest.mark.parametrize("ending", ["budget", "ctrl-c"])
@pytest.mark.parametrize("family", list(THOUGHT_FAMILIES))
def test_a_thought_whose_markers_are_tokens_is_ended_by_the_budget_and_by_ctrl_c(family: str, ending: str,
                                                                                 tmp_path) -> None:
    """SmolLM2's weights under a family whose prompt opens the thought, its markers the vocabulary's own
    tokens: after eight tokens of thought the budget (or the REPL's first Ctrl-C) closes it with the
    close's tokens, and the model answers. Nothing private or marked reaches the screen or the history,
    and the next prompt is the template's own rendering of the conversation."""
    from rml_chat.core.model import load_model
    from rml_chat.core.session import ChatSession, SessionOptions
    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine
    from tokenizer.chat.template import ChatTemplate

    template, markers, user_defined = THOUGHT_FAMILIES[family]
    model = load_model(str(vocabulary_with_markers(tmp_path / "model.gguf", template, markers, weights=True,
                                                   user_defined=user_defined)))
    r = model.reasoning
    assert r is not None and r.prefilled
    close = (r.close_written or r.close).rstrip()
    if r.answer_open and close.endswith(r.answer_open) and close != r.answer_open:
        close = close[:-len(r.answer_open)]  # (Cohere's <|START_TEXT|> after the close: the answer's)
    close_ids = model.tokenizer.encode(close, parse_special=True)
    kinds = {TokenType.USER_DEFINED if m in user_defined else TokenType.CONTROL for m in markers if m in close}
    assert {model.tokenizer.token_type(i) for i in close_ids if model.tokenizer.id_to_token(i) in markers} == kinds
    engine = LocalEngine(model.weights, n_ctx=1024, n_threads=2)
    if ending == "ctrl-c":  # the REPL's first Ctrl-C, after eight tokens of thought
        generate, calls = engine.generate, []

        def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
            inner = generate(*args, **kwargs)
            calls.append(inner)
            for n, token in enumerate(inner):
                yield token
                if len(calls) == 1 and n == 7:
                    inner.close()  # (as the signal would: the engine's own generator ends first)
                    raise KeyboardInterrupt

        engine.generate = interrupted
    shown: list[str] = []
    thoughts: list[str] = []
    budget = 8 if ending == "budget" else -1
    # (the markers' embeddings are their text's first token, "<", and the prompt is full of them: left alone,
    # the 135M model writes nothing but markers; kept out of its reach, it writes text, and the markers that
    # close the thought are the chat's own)
    unsampled = tuple((model.tokenizer.token_to_id(m), float("-inf")) for m in markers)
    try:
        session = ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, max_tokens=40, reasoning_budget=budget,
                                                                     logit_bias=unsampled)))
        result = tool_loop.exchange(session, "Tell me about the sea.", shown.append, lambda line: None, think=thoughts.append,
                                  ctrl_c_ends_thought=ending == "ctrl-c")
        follow_up = session.prompt_ids()
    finally:
        engine.close()
    assert result.reasoning_tokens == 8 + len(close_ids), result
    assert result.reasoning.strip() and result.reply.strip() and not result.ended_in_thought
    private = (HIDDEN_OPEN, HIDDEN_CLOSE)
    kept = json.dumps([m.as_dict() for m in session.conversation.messages], ensure_ascii=False)
    for text in ("".join(shown), "".join(thoughts), kept):
        assert not any(p in text for p in private)
    assert not any(m in "".join(shown) + "".join(thoughts) for m in markers)
    expected = ChatTemplate(model.tokenizer.chat_template).render(
        session.conversation.for_prompt(model.reasoning), True, bos_token=model.encoder.bos_text,
        eos_token=model.encoder.eos_text)
    assert model.tokenizer.decode(follow_up) == expected
