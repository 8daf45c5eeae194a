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
import pytest
from conftest import fetch, model_path
from test_tools import STOPS

import tokenizer
from rml_chat.core.read_reply import ReplyFormat, parse_reply
from rml_chat.core.reply import Reply
from rml_chat.core.thoughts import HIDDEN_CLOSE, HIDDEN_OPEN
from tokenizer import TokenType

SPARE = range(3, 17)  # SmolLM2's control tokens past <|im_end|>, which no chat of its writes


def vocabulary_with_markers(target: Path, template: str, markers: list[str]) -> Path:
    """A vocabulary-only copy of SmolLM2's GGUF, ``markers`` in its spare control tokens, ``template`` (a
    stem of llama.cpp's set) its chat template."""
    reader = gguf.GGUFReader(str(model_path("smollm2")))
    tokens = [str(t) for t in reader.get_field("tokenizer.ggml.tokens").contents()]
    types = list(reader.get_field("tokenizer.ggml.token_type").contents())
    known = set(tokens)
    fresh = [m for m in markers if m not in known]
    assert len(fresh) <= len(SPARE)
    for i, marker in zip(SPARE, fresh):
        tokens[i], types[i] = marker, int(gguf.TokenType.CONTROL)
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
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
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

    reply = Reply(tok, reply_format.stop_strings, reply_format.reasoning)  # the stream, id by id
    shown = "".join(reply.feed(i) for i in ids) + reply.finish()
    thought = reply.thought
    private = (HIDDEN_OPEN, HIDDEN_CLOSE)
    assert not any(p in shown + thought + reply.thought_raw + reply.raw_answer for p in private)
    assert not any(m in shown for m in controls)  # (control tokens never reach the screen)
    assert reply.written == text  # (what the model wrote, control tokens and all, for the calls to be read)
    got = parse_reply(reply_format, reply.written, schemas=SCHEMAS, in_thought=reply.opened_in_thought)
    assert [(c.name, c.arguments, c.id) for c in got.tool_calls] == calls, (family, reply.written)
    assert got.content == content and json.dumps(thought) == json.dumps(reasoning)
