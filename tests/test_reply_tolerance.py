"""What models write beside their template's own rendering, read as llama.cpp reads it: cases of our own,
beyond llama.cpp's suite (``test_llama_chat_suite.py``), one per category, each on a real template's
format as ``ReplyFormat.of_template`` reads it."""

from __future__ import annotations

import functools

import pytest
from conftest import fetch
from test_tools import STOPS

from rml_chat.core import reply
from rml_chat.core.reply import ReplyFormat
from tokenizer.chat.tool_calls import ToolCall


def parse_reply(reply_format: ReplyFormat, text: str, **options) -> reply.ParsedReply:  # type: ignore[no-untyped-def]
    """``reply.parse_reply``, and every case here held to the reply decided once: streamed a character at a
    time and in threes, the events shown are the message (its answer, its thought, its calls), and the
    message is the one read whole."""
    whole = reply.parse_reply(reply_format, text, **options)
    r, in_thought = reply_format.reasoning, options.get("in_thought")
    opened = r.prefilled if in_thought is None and r is not None else bool(in_thought)
    for size in (1, 3):
        parser = reply.ReplyParser(reply_format, in_thought=opened, schemas=options.get("schemas"),
                                   thought_in_content=options.get("thought_in_content", False),
                                   json_answer=options.get("json_answer", False))
        events = [e for i in range(0, len(text), size) for e in parser.feed_text(text[i:i + size])]
        events += parser.finish()
        assert parser.message == whole, size
        shown = "".join(e.text for e in events if isinstance(e, reply.AnswerText)).strip()
        thought = "".join(e.text for e in events if isinstance(e, reply.ThoughtText)).strip()
        calls = tuple(e.call for e in events if isinstance(e, reply.CallClosed))
        assert (shown, thought, calls) == (whole.content, whole.reasoning.strip(), whole.tool_calls), size
    return whole


@functools.cache
def _format(template: str) -> ReplyFormat:
    source = (fetch.models_dir() / "templates" / f"{template}.jinja").read_text(encoding="utf-8")
    return ReplyFormat.of_template(source, stops=STOPS)


NESTED = {"properties": {
    "point": {"type": "object", "properties": {"x": {"type": "number"}, "label": {"type": "string"}}},
    "tags": {"type": "array", "items": {"type": "string"}},
    "note": {"anyOf": [{"type": "string"}, {"type": "object"}]},
}}


def test_a_thought_the_template_writes_only_before_a_call_is_read_before_an_answer_too() -> None:
    """Command R7B writes ``<|START_THINKING|>`` only in a call's message; its model thinks before an
    answer all the same, and the answer's own opening is taken off after it."""
    r7b = _format("CohereForAI-c4ai-command-r7b-12-2024-tool_use")
    read = parse_reply(r7b, "<|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>Four.<|END_RESPONSE|>")
    assert (read.reasoning, read.content) == ("Easy.", "Four.")
    read = parse_reply(r7b, '<|START_THINKING|>Look it up.<|END_THINKING|><|START_ACTION|>[\n'
                            '    {"tool_call_id": "0", "tool_name": "weather", "parameters": {"city": "Oslo"}}\n]<|END_ACTION|>')
    assert (read.reasoning, read.tool_calls) == ("Look it up.", (ToolCall("weather", {"city": "Oslo"}, "0"),))


def test_a_prefilled_thought_the_model_skips_is_empty_and_the_answer_whole() -> None:
    kimi = _format("Kimi-K3")
    assert kimi.reasoning is not None and kimi.reasoning.prefilled
    read = parse_reply(kimi, "<|open|>response<|sep|>Hi there.<|close|>response<|sep|><|close|>message<|sep|>")
    assert (read.reasoning, read.content) == ("", "Hi there.")
    read = parse_reply(kimi, "Hm.<|close|>think<|sep|><|open|>response<|sep|>Hi.")  # (and one it writes, as ever)
    assert (read.reasoning, read.content) == ("Hm.", "Hi.")


def test_values_written_as_nested_tags_are_typed_by_the_schema() -> None:
    minimax, sep = _format("MiniMax-M3"), "]<]minimax[>["
    reply = (f'{sep}<tool_call>\n{sep}<invoke name="draw">{sep}<point>{sep}<x>-2</x>{sep}<label>a <b></label>'
             f'{sep}</point>{sep}<tags>{sep}<item>one</item>{sep}<item> two </item>{sep}</tags>'
             f'{sep}<note>{sep}<x>1</x>{sep}</note>{sep}</invoke>\n{sep}</tool_call>')
    (call,) = parse_reply(minimax, reply, schemas={"draw": NESTED}).tool_calls
    assert call.arguments["point"] == {"x": -2, "label": "a <b>"}
    assert call.arguments["tags"] == ["one", " two "]  # (strings as written)
    assert call.arguments["note"] == f"{sep}<x>1</x>"  # (it may be a string: kept as text, as llama.cpp keeps it)


@pytest.mark.parametrize("template", ["MiniMax-M3", "Qwen3-Coder"])
def test_a_call_with_no_arguments_between_two_others(template: str) -> None:
    fmt = _format(template)
    if template == "MiniMax-M3":
        sep = "]<]minimax[>["
        one = f'{sep}<invoke name="{{}}">{sep}<city>Oslo{sep}</city>{sep}</invoke>\n'
        reply = (f"{sep}<tool_call>\n" + one.format("a") + f'{sep}<invoke name="now">{sep}</invoke>\n'
                 + one.format("b") + f"{sep}</tool_call>")
    else:
        one = "<tool_call>\n<function={}>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>\n"
        reply = one.format("a") + "<tool_call>\n<function=now>\n</function>\n</tool_call>\n" + one.format("b")
    calls = parse_reply(fmt, reply, schemas={}).tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("a", {"city": "Oslo"}), ("now", {}), ("b", {"city": "Oslo"})]


def test_a_cdata_value_keeps_the_markers_it_holds() -> None:
    reply = ("<tool_call>\n<function=write>\n<parameter=text>\n<![CDATA[a </parameter> b\n]]>\n</parameter>\n"
             "</function>\n</tool_call>")
    (call,) = parse_reply(_format("Qwen3-Coder"), reply).tool_calls
    assert call.arguments == {"text": "a </parameter> b\n"}


def test_the_thought_kept_in_the_content_as_llama_servers_reasoning_format_none() -> None:
    qwen = _format("Qwen3.5-4B")
    read = parse_reply(qwen, "Hm.\n</think>\n\nHi.", in_thought=True, thought_in_content=True)
    assert (read.reasoning, read.content) == ("", "<think>\nHm.\n</think>\n\nHi.")
    read = parse_reply(qwen, "Hm, no close", in_thought=True, thought_in_content=True)
    assert (read.reasoning, read.content) == ("", "Hm, no close")


def test_a_json_answer_is_taken_out_of_its_fence_only_when_asked_for_as_json() -> None:
    llama = _format("meta-llama-Llama-3.1-8B-Instruct")
    fenced = '```json\n{"a": [1, 2]}\n```'
    assert parse_reply(llama, fenced, json_answer=True).content == '{"a": [1, 2]}'
    assert parse_reply(llama, fenced).content == fenced
    assert parse_reply(llama, "Here:\n" + fenced, json_answer=True).content == "Here:\n" + fenced  # (not one block)
