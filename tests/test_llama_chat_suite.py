"""llama.cpp's own reply-parser cases (its ``tests/test-chat.cpp``, read by ``llama_chat_cases.py`` from the
sdist the suite fetches) run on our public ``parse_reply``, with the format read off the same template.

Every case runs: one that continues a prefilled assistant message goes on from it (``Prefill``), one that
reads a reply before its end reads it partially (``partial=True``: a call still being written is named
with its arguments' text so far). A case agrees when the message matches as llama.cpp's own test compares
them: content and reasoning with their edges trimmed, each call's name, arguments as JSON (two texts that
are not JSON yet compare equal, as there), and id. The count is printed; the floor only rises.
docs/tools.md lists what still differs, and why.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import replace

import pytest
from conftest import fetch
from llama_chat_cases import Case, Message, extract
from test_tools import STOPS

from rml_chat.core.reply import Prefill, ReplyFormat, parse_reply
from tokenizer.chat.errors import ChatFormatError
from tokenizer.chat.template import compiled

FLOOR = 455  # cases that agree: raised as the parser reads more (not all: the thought's opening written again
# in a thought the prompt opened is a marker here, on purpose)


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    found, unreadable = extract(fetch.llama_chat_tests().read_text(encoding="utf-8"))
    assert unreadable == [] and len(found) >= 450, unreadable
    return found


@functools.cache
def _source(template: str) -> str:
    return (fetch.models_dir() / "templates" / f"{template}.jinja").read_text(encoding="utf-8")


@functools.cache
def _format(template: str) -> ReplyFormat:
    return ReplyFormat.of_template(_source(template), stops=STOPS)


def _as_dict(message: Message) -> dict:
    made: dict = {"role": message.role, "content": message.content}
    if message.reasoning:
        made["reasoning_content"] = message.reasoning
    if message.calls:
        made["tool_calls"] = [{"id": i or "call0", "type": "function", "function": {
            "name": n, "arguments": json.loads(a) if a else {}}} for n, a, i in message.calls]
    if message.tool_call_id:
        made["tool_call_id"] = message.tool_call_id
    return made


def ours(case: Case) -> Message:
    """Our reading of the case's reply: the format of its template, the thought opened where the case's
    generation prompt opens one, going on from the prefilled message where the case continues one."""
    reply_format, text, options = _reading(case)
    return _message(parse_reply(reply_format, text, **options))


def _reading(case: Case) -> tuple[ReplyFormat, str, dict]:
    """``parse_reply``'s arguments for a case."""
    reply_format = _format(case.template)
    if not case.tools or case.tool_choice == "NONE":
        reply_format = replace(reply_format, calls=None)
    messages = list(case.messages) or [Message(role="user", content="Hey there!")]
    prefill = None
    if case.continuation:
        last = messages.pop()
        prefill = Prefill(last.content, last.reasoning, in_thought=case.continuation == "REASONING")
    in_thought = None
    r = reply_format.reasoning
    if r is not None:
        definitions = [{"type": "function", "function": t} for t in case.tools] or None
        try:
            prompt = compiled(_source(case.template)).render([_as_dict(m) for m in messages], True,
                                                             thinking=case.enable_thinking, tools=definitions,
                                                             bos_token="<s>", eos_token="</s>")
            in_thought = prompt.rstrip().endswith(r.open.strip())
        except ChatFormatError:  # (a template that refuses these messages: its format's own default)
            in_thought = None
    return reply_format, case.input, {"schemas": _schemas(case), "in_thought": in_thought, "prefill": prefill,
                                      "partial": case.is_partial,
                                      "thought_in_content": case.reasoning_format == "NONE",
                                      "json_answer": bool(case.json_schema)}


def _schemas(case: Case) -> dict:
    return {t["name"]: t["parameters"] for t in case.tools}


def _message(parsed) -> Message:  # type: ignore[no-untyped-def]
    calls = tuple((c.name, json.dumps(c.arguments, ensure_ascii=False), c.id) for c in parsed.tool_calls)
    unfinished = parsed.open_call
    return Message(parsed.content, parsed.reasoning,
                   calls + (((unfinished.name, unfinished.arguments, unfinished.id),) if unfinished else ()))


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None  # (llama.cpp's test compares unparsable arguments as equal)


def agrees(expected: Message, got: Message) -> bool:
    """As test-chat.cpp's ``assert_msg_equals`` with whitespace differences ignored."""
    return (expected.content.strip() == got.content.strip() and expected.reasoning.strip() == got.reasoning.strip()
            and len(expected.calls) == len(got.calls)
            and all(a[0] == b[0] and _json(a[1]) == _json(b[1]) and a[2] == b[2]
                    for a, b in zip(expected.calls, got.calls)))


def test_llama_cpps_parser_cases_agree_with_our_reading(cases: list[Case]) -> None:
    differ = []
    for case in cases:
        try:
            got = ours(case)
        except Exception as err:  # a crash is a difference, named
            got = Message(f"<{type(err).__name__}: {err}>")
        if not agrees(case.expect, got):
            differ.append((case, got))
    agree = len(cases) - len(differ)
    print(f"\nllama.cpp's parser cases: {agree} of {len(cases)} agree ({100 * agree / len(cases):.1f} %)")
    for template, n in Counter(c.template for c, _ in differ).most_common():
        print(f"  {n:3d}  {template}")
    assert agree >= FLOOR


def test_the_reading_is_the_same_at_every_chunking(cases: list[Case]) -> None:
    """As llama.cpp's ``test_parser_with_streaming``: the reply fed to the streaming stage one character at
    a time, and in pieces of three, gives the message it gives whole, for every case (a continued one, and
    one read before its end, too)."""
    for case in cases:
        reply_format, text, options = _reading(case)
        whole = parse_reply(reply_format, text, **options)
        for size in (1, 3):
            pieces = [text[i:i + size] for i in range(0, len(text), size)]
            assert parse_reply(reply_format, text, pieces=pieces, **options) == whole, (case.line, size)
