"""The reply decided once: what the stream shows (its events) is the message that is recorded, run and
reported, at every chunking, whatever the model writes, on plain-text markers and on vocabularies whose
markers are tokens of their own.

The kinds of what real models write beside what their template writes, each a category with its own
cases: the thought's opening written again, a thought opened again in the answer, a close with no thought
open, a call opened inside a thought, gpt-oss's messages on other channels (a commentary preamble, a call,
a built-in tool's call, an empty call body). And the whole of llama.cpp's parser suite, streamed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re

import pytest
from conftest import fetch
from llama_chat_cases import extract
from test_control_tokens import vocabulary_with_markers
from test_tools import STOPS

import tokenizer
from rml_chat.core.reply import AnswerText, CallClosed, CallOpened, ReplyFormat, ReplyParser, ThoughtText, parse_reply
from rml_chat.core.thoughts import HIDDEN_CLOSE, HIDDEN_OPEN
from tokenizer.chat.tool_calls import ToolCall

WEATHER = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}


@functools.cache
def _format(template: str) -> ReplyFormat:
    source = (fetch.models_dir() / "templates" / f"{template}.jinja").read_text(encoding="utf-8")
    return ReplyFormat.of_template(source, stops=STOPS)


def _streamed(parser: ReplyParser, pieces: list[str] | list[int]) -> tuple[str, str, tuple[ToolCall, ...]]:
    """What the stream showed: the answer's text, the thought's, the calls closed; and the message must
    be the same (content and reasoning at their edges, the calls exactly)."""
    feed = parser.feed if pieces and isinstance(pieces[0], int) else parser.feed_text
    events = [e for piece in pieces for e in feed(piece)] + parser.finish()  # type: ignore[arg-type]
    answer = "".join(e.text for e in events if isinstance(e, AnswerText))
    thought = "".join(e.text for e in events if isinstance(e, ThoughtText))
    calls = tuple(e.call for e in events if isinstance(e, CallClosed))
    message = parser.message
    assert message is not None
    assert (answer.strip(), thought.strip(), calls) == (message.content, message.reasoning.strip(), message.tool_calls)
    assert not any(p in answer + thought for p in (HIDDEN_OPEN, HIDDEN_CLOSE))
    return message.content, message.reasoning, message.tool_calls


def _at_every_chunking(reply_format: ReplyFormat, text: str, *, in_thought: bool = False,
                       schemas: dict | None = None) -> tuple[str, str, tuple[ToolCall, ...]]:
    """The message of ``text``, the same streamed whole, in ones, twos, threes and sevens."""
    read = {size: _streamed(ReplyParser(reply_format, in_thought=in_thought, schemas=schemas),
                            [text[i:i + size] for i in range(0, len(text), size)])
            for size in (len(text) or 1, 1, 2, 3, 7)}
    assert all(got == read[1] for got in read.values()), read
    return read[1]


# ----- the kinds, as categories ---------------------------------------------------------------------------

KINDS = [  # (kind, template, reply, the prompt opened the thought, (content, reasoning, calls))
    ("the opening written again in a thought the prompt opened", "Qwen3.5-4B",
     "<think>\nThe user says hi.\n</think>\n\nHello!", True, ("Hello!", "The user says hi.", ())),
    ("... and in a distill's", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
     "<think>Two and two.</think>Four.", True, ("Four.", "Two and two.", ())),
    ("... twice, mid-thought", "Qwen3.5-4B", "Hm, <think>wait.</think>Hi.", True, ("Hi.", "Hm, wait.", ())),
    ("a thought opened again in the answer", "Qwen-Qwen3-0.6B",
     "<think>a</think>Hi <think>b</think>there", False, ("Hi there", "a\n\nb", ())),
    ("... after the answer (Gemma 4)", "google-gemma-4-31B-it",
     "Hi!<|channel>thought\nhm<channel|>", False, ("Hi!", "hm", ())),
    ("a close with no opening, the prompt having opened the thought", "Qwen3.5-4B",
     "It is a greeting.</think>\n\nHello!", True, ("Hello!", "It is a greeting.", ())),
    ("... Mistral's [/THINK]", "mistralai-Ministral-3-14B-Reasoning-2512",
     "Simple.[/THINK]Four.", True, ("Four.", "Simple.", ())),
    ("a close with no thought open, at the answer's start", "Qwen-Qwen3-0.6B", "</think>\n\nHello!", False,
     ("Hello!", "", ())),
    ("... at the answer's end (Gemma 4's last <channel|>)", "google-gemma-4-31B-it", "Hello!<channel|>\n", False,
     ("Hello!", "", ())),
    ("... between two pieces of the answer: the answer's text, as written", "Qwen-Qwen3-0.6B",
     "<think>x</think>Use </think> to close.", False, ("Use </think> to close.", "x", ())),
    ("a call opened in a thought that never closed", "Qwen3.5-4B",
     "I should look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
     "</tool_call>", True, ("", "I should look.", (ToolCall("get_weather", {"city": "Oslo"}),))),
    ("... a call inside a thought that closes is the thought's text", "mistralai-Ministral-3-14B-Reasoning-2512",
     '[THINK]Maybe [TOOL_CALLS]get_weather[ARGS]{"city": "Rome"} then.[/THINK][TOOL_CALLS]get_weather[ARGS]'
     '{"city": "Oslo"}', False,
     ("", 'Maybe [TOOL_CALLS]get_weather[ARGS]{"city": "Rome"} then.', (ToolCall("get_weather", {"city": "Oslo"}),))),
    ("a call's opening with a space after its first marker (Mistral Nemo)", "mistralai-Mistral-Nemo-Instruct-2407",
     '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "abcdefghi"}]', False,
     ("", "", (ToolCall("get_weather", {"city": "Oslo"}, "abcdefghi"),))),
    ("... and text that only looks like one", "mistralai-Mistral-Nemo-Instruct-2407", "Use [TOOL_CALLS] [x] here.",
     False, ("Use [TOOL_CALLS] [x] here.", "", ())),
    ("one malformed call among good ones: the good ones are read", "Qwen-Qwen2.5-7B-Instruct",
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n<tool_call>\n'
     '{"name": "get_time", "arguments": {"city": Rome}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", '
     '"arguments": {"city": "Paris"}}\n</tool_call>', False,
     ("", "", (ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Paris"})))),
    ("an argument whose close the model left out ends at the next one's opening (Qwen3-Coder)", "Qwen3-Coder",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2\n</parameter>\n"
     "</function>\n</tool_call>", False, ("", "", (ToolCall("get_weather", {"city": "Oslo", "days": 2}),))),
    ("... or at the call's close", "Qwen3-Coder",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</function>\n</tool_call>", False,
     ("", "", (ToolCall("get_weather", {"city": "Oslo"}),))),
    ("all arguments wrapped in one the tool does not declare", "Qwen-Qwen2.5-7B-Instruct",
     '<tool_call>\n{"name": "get_weather", "arguments": {"input": {"city": "Oslo", "days": 2}}}\n</tool_call>',
     False, ("", "", (ToolCall("get_weather", {"city": "Oslo", "days": 2}),))),
    ("... or in its JSON text", "Qwen-Qwen2.5-7B-Instruct",
     '<tool_call>\n{"name": "get_weather", "arguments": {"arguments": "{\\"city\\": \\"Oslo\\"}"}}\n</tool_call>',
     False, ("", "", (ToolCall("get_weather", {"city": "Oslo"}),))),
    ("a call without the namespace its template writes (Kimi K2's functions.)", "moonshotai-Kimi-K2",
     "<|tool_calls_section_begin|><|tool_call_begin|>get_weather:0<|tool_call_argument_begin|>{\"city\": \"Oslo\"}"
     "<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Rome\"}"
     "<|tool_call_end|><|tool_calls_section_end|>", False,
     ("", "", (ToolCall("get_weather", {"city": "Oslo"}, "get_weather:0"),
               ToolCall("get_weather", {"city": "Rome"}, "functions.get_weather:1")))),
    ("the syntax's own 'this value is JSON', where no schema types it (DeepSeek V3.2's string=\"false\")",
     "deepseek-ai-DeepSeek-V3.2", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="plot">\n<｜DSML｜parameter name="n" '
     'string="false">1</｜DSML｜parameter>\n<｜DSML｜parameter name="label" string="true">2</｜DSML｜parameter>\n'
     '<｜DSML｜parameter name="at" string="false">{"x": [1, 2]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
     '</｜DSML｜function_calls>', False, ("", "", (ToolCall("plot", {"n": 1, "label": "2", "at": {"x": [1, 2]}}),))),
    ("gpt-oss: a commentary to no one is the answer, each analysis the thought", "openai-gpt-oss-120b",
     "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary<|message|>Looking."
     "<|end|><|start|>assistant<|channel|>analysis<|message|>More.<|end|><|start|>assistant<|channel|>final"
     "<|message|>Done.", False, ("Looking.\n\nDone.", "Think.\n\nMore.", ())),
    ("gpt-oss: a call addressed before its channel, with <|constrain|>", "openai-gpt-oss-120b",
     "<|channel|>analysis<|message|>Oslo?<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary "
     '<|constrain|>json<|message|>{"city": "Oslo"}<|call|>', False,
     ("", "Oslo?", (ToolCall("get_weather", {"city": "Oslo"}),))),
    ("gpt-oss: a call addressed after its channel, an empty body read as {}", "openai-gpt-oss-120b",
     "<|channel|>commentary to=functions.get_weather<|message|>", False, ("", "", (ToolCall("get_weather", {}),))),
    ("gpt-oss: a built-in tool's call is left out", "openai-gpt-oss-120b",
     "<|channel|>analysis<|message|>Run it.<|end|><|start|>assistant<|channel|>commentary to=python "
     "<|constrain|>code<|message|>print(1)", False, ("", "Run it.", ())),
    ("gpt-oss: no header at all is the answer, as written", "openai-gpt-oss-120b", "Just text.", False,
     ("Just text.", "", ())),
    ("each call of a list keeps the id written after it (Mistral)", "mistralai-Mistral-Nemo-Instruct-2407",
     '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}, "id": "one000001"}, {"name": "get_weather", '
     '"arguments": {"city": "Oslo"}, "id": "two000002"}]', False,
     ("", "", (ToolCall("get_weather", {"city": "Rome"}, "one000001"), ToolCall("get_weather", {"city": "Oslo"},
                                                                                "two000002")))),
    ("... after a malformed call too", "mistralai-Mistral-Nemo-Instruct-2407",
     '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": Rome}, "id": "bad000001"}, {"name": "get_weather", '
     '"arguments": {"city": "Oslo"}, "id": "two000002"}]', False,
     ("", "", (ToolCall("get_weather", {"city": "Oslo"}, "two000002"),))),
    ("the wrapper a template's instructions put around the answer is taken off (Granite 3.3's <response>)",
     "ibm-granite-granite-3.3-2B-Instruct", "<think>Hm.</think>\n<response>Hi there.</response>", False,
     ("Hi there.", "Hm.", ())),
    ("... with no thought before it", "ibm-granite-granite-3.3-2B-Instruct", "<response>Hi there.</response>", False,
     ("Hi there.", "", ())),
    ("a JSON call object with its keys in the other order", "Qwen-Qwen2.5-7B-Instruct",
     'Sure.\n<tool_call>\n{"arguments": {"city": "Oslo"}, "name": "get_weather"}\n</tool_call>\n<tool_call>\n'
     '{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>', False,
     ("Sure.", "", (ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Rome"})))),
    ("... Mistral's, its id after them", "mistralai-Mistral-Nemo-Instruct-2407",
     '[TOOL_CALLS][{"arguments": {"city": "Oslo"}, "name": "get_weather", "id": "a1b2c3d4e"}]', False,
     ("", "", (ToolCall("get_weather", {"city": "Oslo"}, "a1b2c3d4e"),))),
    ("... Llama 3.1's, with no marker before it", "meta-llama-Llama-3.1-8B-Instruct",
     '{"parameters": {"city": "Oslo"}, "name": "get_weather"}', False,
     ("", "", (ToolCall("get_weather", {"city": "Oslo"}),))),
    ("a name key inside the arguments opens no call", "meta-llama-Llama-3.1-8B-Instruct",
     '{"name": "get_weather", "parameters": {"name": "home", "city": "Oslo"}}', False,
     ("", "", (ToolCall("get_weather", {"name": "home", "city": "Oslo"}),))),
    ("... in either order", "Qwen-Qwen2.5-7B-Instruct",
     '<tool_call>\n{"arguments": {"name": "home", "city": "Oslo"}, "name": "get_weather"}\n</tool_call>', False,
     ("", "", (ToolCall("get_weather", {"name": "home", "city": "Oslo"}),))),
    ("a call whose first marker the model left out, its opening in pieces, an argument holding the thought's "
     "opening", "Qwen3.5-4B", "Sure.\n<function=get_weather>\n<parameter=city>\nUse <think> here\n</parameter>\n"
     "</function>", False, ("Sure.", "", (ToolCall("get_weather", {"city": "Use <think> here"}),))),
    ("a recipient template's call of a tool it was not given (functionary v3.2): a call, never shown as text",
     "meetkai-functionary-medium-v3.2", 'get_time\n{"city": "Oslo"}', False,
     ("", "", (ToolCall("get_time", {"city": "Oslo"}),))),
    ("a stop string that may open a call ends the answer where no call follows (Kimi K3's <|close|>)", "Kimi-K3",
     "Hi<|close|>", False, ("Hi", "", ())),
]


@pytest.mark.parametrize(("kind", "template", "reply", "in_thought", "expected"), KINDS, ids=[k[0] for k in KINDS])
def test_each_kind_is_decided_as_it_streams_and_the_screen_is_the_message(kind, template, reply, in_thought,
                                                                         expected) -> None:
    assert _at_every_chunking(_format(template), reply, in_thought=in_thought, schemas=WEATHER) == expected
    assert _message_tuple(parse_reply(_format(template), reply, in_thought=in_thought, schemas=WEATHER)) == expected


@pytest.mark.parametrize("kind", [k for k in KINDS if k[4][2]], ids=[k[0] for k in KINDS if k[4][2]])
def test_each_call_is_named_once_as_it_streams_at_every_chunking(kind) -> None:
    """``CallOpened`` names each call once, in order, whatever the pieces (a name key in the arguments opens
    none; the next call's name is said even when its opening came in pieces; a malformed call is named too:
    it opened)."""
    _, template, reply, in_thought, (_, _, calls) = kind
    for size in (len(reply), 1, 2, 3, 7):
        parser = ReplyParser(_format(template), in_thought=in_thought, schemas=WEATHER)
        events = [e for i in range(0, len(reply), size) for e in parser.feed_text(reply[i:i + size])] + parser.finish()
        named = [e.name for e in events if isinstance(e, CallOpened)]
        malformed = {"one malformed call among good ones: the good ones are read": ["get_weather", "get_time",
                                                                                    "get_weather"],
                     "... after a malformed call too": ["get_weather", "get_weather"]}
        assert named == malformed.get(kind[0], [c.name for c in calls]), size


def test_a_malformed_call_is_named_and_the_others_still_run() -> None:
    reply = next(k[2] for k in KINDS if k[0].startswith("one malformed call"))
    read = parse_reply(_format("Qwen-Qwen2.5-7B-Instruct"), reply, schemas=WEATHER)
    assert read.problem == "tool call 'get_time': its arguments are not JSON (Expecting value at 9)"
    oss = parse_reply(_format("openai-gpt-oss-120b"), "<|channel|>commentary to=functions.get_time<|message|>{city: 1}"
                      "<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{}")
    assert oss.tool_calls == (ToolCall("get_weather", {}),) and oss.problem == "tool call 'get_time': its arguments are not JSON"


def _message_tuple(message) -> tuple:  # type: ignore[no-untyped-def]
    return message.content, message.reasoning, message.tool_calls


MARKERS = {  # the markers as the real vocabularies have them: (control, user-defined)
    "Qwen3.5-4B": ([], ["<think>", "</think>", "<tool_call>", "</tool_call>"]),
    "Qwen-Qwen3-0.6B": ([], ["<think>", "</think>", "<tool_call>", "</tool_call>"]),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ([], ["<think>", "</think>"]),
    "mistralai-Ministral-3-14B-Reasoning-2512": (["[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"], []),
    "google-gemma-4-31B-it": (["<|channel>", "<channel|>", "<|tool_call>"], []),
    "mistralai-Mistral-Nemo-Instruct-2407": (["[TOOL_CALLS]"], []),
    "Qwen-Qwen2.5-7B-Instruct": ([], ["<tool_call>", "</tool_call>"]),
    "Qwen3-Coder": ([], ["<tool_call>", "</tool_call>"]),
    "moonshotai-Kimi-K2": (["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                            "<|tool_call_argument_begin|>", "<|tool_call_end|>"], []),
    "openai-gpt-oss-120b": (["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
                             "<|call|>"], []),
}


TOKENS_READ = {  # where a marker that is a token of the vocabulary reads otherwise than its text
    "... between two pieces of the answer: the answer's text, as written": ("Use  to close.", "x", ()),  # (a token
    # of the call syntax outside a call: shown nowhere, kept nowhere)
    "... and text that only looks like one": ("Use  [x] here.", "", ()),  # (the same: its marker is a token)
    "... a call inside a thought that closes is the thought's text": (
        "", 'Maybe get_weather{"city": "Rome"} then.', (ToolCall("get_weather", {"city": "Oslo"}),)),  # (control
    # tokens in a thought are left out of it, as everywhere)
}


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory) -> dict[str, tokenizer.Tokenizer]:
    folder = tmp_path_factory.mktemp("decided")
    return {template: tokenizer.load(str(vocabulary_with_markers(folder / f"{template}.gguf", template,
                                                                 control + user, user_defined=frozenset(user))))
            for template, (control, user) in MARKERS.items()}


@pytest.mark.parametrize(("kind", "template", "reply", "in_thought", "expected"), [k for k in KINDS if k[1] in MARKERS],
                         ids=[k[0] for k in KINDS if k[1] in MARKERS])
def test_each_kind_reads_the_same_when_the_markers_are_tokens(vocabularies, kind, template, reply, in_thought,
                                                             expected) -> None:
    """The same replies as ids of a vocabulary whose markers are tokens, control or user-defined as in the
    real one (SmolLM2's spare entries renamed), fed to the stream id by id."""
    tok = vocabularies[template]
    ids = tok.encode(reply, parse_special=True)
    control, user = MARKERS[template]
    if any(m in reply for m in control + user):
        assert {tok.id_to_token(i) for i in ids} & set(control + user)  # (the markers are tokens here)
    reply_format = _format(template)
    markers = reply_format.calls.markers(tok.special_texts()) if reply_format.calls is not None else ()
    parser = ReplyParser(reply_format, tokenizer=tok, in_thought=in_thought, schemas=WEATHER, markers=markers)
    assert _streamed(parser, ids) == TOKENS_READ.get(kind, expected)


# ----- random replies made of each template's own markers ---------------------------------------------------

PLAIN = ["Hi", " there", "a", " ", "\n", "\n\n", "x<y", '{"', "é", "👋", "`", "```", "<", "</", "[", "]", "Oslo", "\\",
         '"', "get_weather", '{"city": "Oslo"}', "city", "{", "}", ">", "|", "<|", "|>"]


def _markers_of(reply_format: ReplyFormat) -> list[str]:
    """The texts a template's replies are read by: its thought's markers, its call syntax's pieces (each
    whole and in its words), its answer's lead and its stop strings."""
    found: set[str] = set()
    r, calls = reply_format.reasoning, reply_format.calls
    if r is not None:
        found.update(m for m in (r.open, r.close, r.answer_open, r.answer_close, *(r.channels() or ())) if m)
    if calls is not None:
        for text in (calls.lead, calls.opening, calls.after_name, calls.closing, calls.between or "", calls.text_lead):
            found.update([text.replace("\0", "id1"), *text.replace("\0", "id1").split()])
        if calls.keyed is not None:
            found.update((calls.keyed.key_value, calls.keyed.between_args))
    found.update((reply_format.answer_lead, *reply_format.stop_strings))
    return sorted(m for m in found if m.strip())


def test_replies_made_of_a_templates_own_markers_read_the_same_at_every_chunking() -> None:
    """Replies put together at random (seeded) from each template's markers and plain text, as models
    mangle them (a call's marker left out, a thought's opening inside an argument, a close with no opening,
    a stop string where a call might open): at every chunking the same message, and what the stream showed
    is that message. Each prefilled with some of the same at times (a ``/continue``)."""
    templates = sorted(p.stem for p in (fetch.models_dir() / "templates").glob("*.jinja"))
    pools = {t: pool for t in templates if (pool := _markers_of(_format(t)))}
    assert len(pools) >= 60
    rng = random.Random(20261207)
    for template, pool in pools.items():
        for _ in range(30):
            reply_format = _format(template)
            if rng.random() < 0.3:  # (and a stop string of the user's, beside the template's)
                stops = (rng.choice(pool + PLAIN), *reply_format.stop_strings)
                reply_format = dataclasses.replace(reply_format, stop_strings=stops)
            reply = "".join(rng.choice(pool if rng.random() < 0.5 else PLAIN) for _ in range(rng.randrange(1, 14)))
            in_thought = reply_format.reasoning is not None and rng.random() < 0.3
            prefill = "".join(rng.choice(pool + PLAIN) for _ in range(rng.randrange(1, 4))) if rng.random() < 0.2 else ""
            read = set()
            for size in (len(reply), 1, 2, 3, 7):
                parser = ReplyParser(reply_format, in_thought=in_thought, schemas=WEATHER)
                if prefill:  # (the prefilled start is on screen already: the message alone)
                    parser.go_on_from(prefill)
                    for i in range(0, len(reply), size):
                        parser.feed_text(reply[i:i + size])
                    parser.finish()
                    read.add(repr(_message_tuple(parser.message)))
                else:
                    read.add(repr(_streamed(parser, [reply[i:i + size] for i in range(0, len(reply), size)])))
            assert len(read) == 1, (template, reply, prefill, reply_format.stop_strings, read)


@pytest.mark.parametrize(("template", "stop", "reply", "content"), [
    ("unsloth-Apriel-1.5", "|", '{"a": 1}<|end|>', '{"a": 1}'),  # (the template's <|end|> starts before "|")
    ("GigaChat3-10B-A1.8B", "}<|message_sep|>\n\n", "Done}<|message_sep|>\n\n", "Done"),  # (... and a call's
    # opening, <|message_sep|>, after the start of the user's)
])
def test_of_two_stop_strings_the_one_that_starts_first_ends_the_answer_at_every_chunking(template, stop, reply,
                                                                                      content) -> None:
    """A stop string whose end comes later but whose start comes first wins, as it does when the reply is
    read whole: the stream waits while a longer one may be starting."""
    reply_format = _format(template)
    reply_format = dataclasses.replace(reply_format, stop_strings=(stop, *reply_format.stop_strings))
    assert _at_every_chunking(reply_format, reply) == (content, "", ())


# ----- llama.cpp's parser suite, streamed ------------------------------------------------------------------

def test_the_screen_is_the_message_for_every_llama_cpp_case_at_every_chunking() -> None:
    """Every case of llama.cpp's ``test-chat.cpp`` that reads a whole reply, streamed whole, in ones and in
    threes, with the case's own options (llama-server's ``reasoning_format: none`` shows the thought in the
    answer; a JSON answer shown without its fence): the answer and thought the events showed, and the
    calls they closed, are the message's."""
    from test_llama_chat_suite import _reading

    cases, unreadable = extract(fetch.llama_chat_tests().read_text(encoding="utf-8"))
    assert not unreadable
    checked, with_options = 0, 0
    for case in (c for c in cases if not c.continuation and not c.is_partial):
        reply_format, text, options = _reading(case)
        r = reply_format.reasoning
        in_thought = options["in_thought"] if options["in_thought"] is not None else bool(r and r.prefilled)
        with_options += options["thought_in_content"] or options["json_answer"]
        for size in (len(text) or 1, 1, 3):
            parser = ReplyParser(reply_format, in_thought=in_thought, schemas=options["schemas"],
                                 thought_in_content=options["thought_in_content"], json_answer=options["json_answer"])
            _streamed(parser, [text[i:i + size] for i in range(0, len(text), size)])
            checked += 1
    assert checked >= 1100 and with_options >= 150


# ----- in the REPL, in a real pty ---------------------------------------------------------------------------

REPL_KINDS = {  # template -> replies the grammar makes SmolLM2 write, each a kind above; (answer, thought) saved
    "Qwen-Qwen3-0.6B": [("<think>\na\n</think>\n\nHi <think>b</think>there", ("Hi there", "a\n\nb")),
                        ("</think>\n\nPlain hello", ("Plain hello", "")),
                        ("<think>\nc\n</think>\n\nBye now</think>", ("Bye now", "c")),
                        ("Oslo or Bergen.</think>\n\nOslo it is.", ("Oslo it is.", "Oslo or Bergen."))],
    "ibm-granite-granite-3.3-2B-Instruct": [("<think>Hm.</think><response>Hi there.", ("Hi there.", "Hm."))],  # (its
    # </response> is a stop: under this test's grammar it would be a grammar cut short)
    "Qwen3.5-4B": [("<think>\nd\n</think>\n\nAgain hi", ("Again hi", "d")),
                   ("e is it</think>\n\nClosed hi", ("Closed hi", "e is it"))],
    "openai-gpt-oss-120b": [("<|channel|>analysis<|message|>f<|end|><|start|>assistant<|channel|>commentary<|message|>"
                             "Looking<|end|><|start|>assistant<|channel|>final<|message|>Found it",
                             ("Looking\n\nFound it", "f"))],
}


@pytest.mark.parametrize("template", list(REPL_KINDS))
def test_the_repl_shows_exactly_the_message_it_saves(template: str, tmp_path) -> None:
    """Each kind written for real by SmolLM2 under the family's template (a grammar makes it write the reply),
    in the REPL in a real pty: the screen shows the saved thought and answer, and no marker."""
    from conftest import smollm_with_template
    from test_rendering import gbnf_literal
    from test_repl import Terminal

    model = smollm_with_template(tmp_path / "model.gguf", template)
    term = Terminal(tmp_path, model, "--temp", "0", "--markdown", "off", model=False)
    term.prompt_ready()
    for reply, _ in REPL_KINDS[template]:
        term.ask(b"/grammar " + gbnf_literal(reply).encode(), b"grammar")
        term.ask(b"Say it", b" evaluated")
    assert term.finish() == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    saved = [m for m in json.loads(chat.read_text())["messages"] if m["role"] == "assistant"]
    turns = re.split(r"Say it\r*\n", term.output.decode("utf-8", "replace"))[1:]
    assert len(turns) == len(saved) == len(REPL_KINDS[template]), term.output[-3000:]
    for turn, message, (_, (answer, thought)) in zip(turns, saved, REPL_KINDS[template]):
        assert (message["content"].strip(), message.get("reasoning", "").strip()) == (answer, thought)
        _assert_drawn(turn, answer, thought)


def _assert_drawn(turn: str, answer: str, thought: str) -> None:
    """The turn's reply as the pty drew it: the thought dim, then the answer, word for word, and no marker."""
    reply = re.split(r"\r*\n[^\n]*prompt tokens evaluated", turn)[0]
    reply = re.sub(r"\x1b\[2m(?:evaluating the prompt|prompt): [^\x1b]*\x1b\[0m", "", reply)  # (the progress
    # line a slow evaluation draws, then clears: not the reply)
    dim = "".join(re.findall(r"\x1b\[2m(.*?)\x1b\[0m", reply, re.DOTALL))  # the thought, as drawn
    rest = re.sub(r"\x1b\[2m.*?\x1b\[0m", "", reply, flags=re.DOTALL)
    rest = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", rest)
    assert not any(m in reply for m in ("<think>", "</think>", "<|", "[THINK]", "[/THINK]")), reply
    assert _words(dim) == _words(thought) and _words(rest) == _words(answer), (reply, answer, thought)


SCRIPTED_THOUGHTS = [  # (template, the reply's pieces (a marker: its token; each piece once), (answer, thought))
    ("Qwen3.5-4B", ["<think>", "\nd\n", "</think>", "\n\nAgain hi"], ("Again hi", "d")),
    ("Qwen3.5-4B", ["e is it", "</think>", "\n\nClosed hi"], ("Closed hi", "e is it")),
    ("Qwen-Qwen3-0.6B", ["</think>", "\n\nPlain hello"], ("Plain hello", "")),
    ("mistralai-Ministral-3-14B-Reasoning-2512", ["Simple.", "[/THINK]", "Four."], ("Four.", "Simple.")),
]


@pytest.mark.parametrize(("template", "script", "saved"), SCRIPTED_THOUGHTS,
                         ids=[f"{t}: {''.join(s)[:24]!r}" for t, s, _ in SCRIPTED_THOUGHTS])
def test_the_repl_shows_exactly_the_thought_it_saves_when_the_markers_are_tokens(template, script, saved,
                                                                                tmp_path) -> None:
    """The thought kinds again, on a vocabulary whose markers are the tokens the real one has (user-defined
    ``<think>``, control ``[/THINK]``), written by a model whose reply is set in its weights
    (scripted_model.py), in the REPL in a real pty."""
    from scripted_model import scripted_model
    from test_repl import Terminal

    control, user = MARKERS[template]
    model = scripted_model(tmp_path / "model.gguf", template, script, ["(not reached)"],
                           control=tuple(m for m in control if m in script), user_defined=tuple(m for m in user if m in script))
    term = Terminal(tmp_path, str(model), "--temp", "0", "-n", "32", "--markdown", "off", model=False)
    term.prompt_ready()
    term.ask(b"Say it", b" evaluated")
    assert term.finish() == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    (message,) = [m for m in json.loads(chat.read_text())["messages"] if m["role"] == "assistant"]
    assert (message["content"].strip(), (message.get("reasoning") or "").strip()) == saved
    _assert_drawn(re.split(r"Say it\r*\n", term.output.decode("utf-8", "replace"))[1], *saved)


CALLERS = ["Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "mistralai-Mistral-Nemo-Instruct-2407"]


@pytest.mark.parametrize("markers_are_tokens", [False, True], ids=["markers as text", "markers as tokens"])
@pytest.mark.parametrize("template", CALLERS)
def test_the_repl_shows_exactly_the_calls_and_answer_it_saves(template: str, markers_are_tokens: bool,
                                                             tmp_path) -> None:
    """A call written for real by SmolLM2 (``--tool-choice required``: the grammar writes the call, the
    model its arguments), run with consent, and the answer after it, in the REPL in a real pty, on the
    family's markers as plain text and as the tokens the real vocabulary has: the screen shows each call
    the saved message holds, with its result, then the saved answer, and no call markup."""
    from conftest import smollm_with_template
    from test_repl import Terminal
    from test_tools import CITY_WEATHER

    if markers_are_tokens:
        control, user = MARKERS[template]
        model = str(vocabulary_with_markers(tmp_path / "model.gguf", template, control + user, weights=True,
                                            user_defined=frozenset(user)))
    else:
        model = smollm_with_template(tmp_path / "model.gguf", template)
    (tmp_path / "fns.py").write_text(CITY_WEATHER)
    term = Terminal(tmp_path, model, "--functions", str(tmp_path / "fns.py"), "--tool-choice", "required",
                    "--temp", "0", "-n", "96", "--markdown", "off", model=False)
    term.prompt_ready()
    start = len(term.output)
    term.send(b"What is the weather in Paris?\r")
    term.read_until(lambda out: b"[a]lways for get_weather: " in out[start:])
    term.send(b"a\r")  # (always: a second call in the turn runs without asking)
    term.read_until(lambda out: b"stop: " in out[start:].split(b"[a]lways")[-1] and out.endswith(b"> "))
    term.prompt_ready()
    drawn = term.output[start:].decode("utf-8", "replace")
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    assert term.finish() == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    messages = json.loads(chat.read_text())["messages"]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    saved = [(c["function"]["name"], json.dumps(c["function"]["arguments"]), results[c["id"]])
             for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert saved and re.findall(r"tool call: (\w+)\((\{.*?\})\) -> (.*)\r", screen) == saved
    answer = messages[-1]
    assert answer["role"] == "assistant" and not answer.get("tool_calls")
    last = drawn.split("tool call:")[-1].split("\n", 1)[1]  # (the last reply, as drawn)
    last = re.sub(r"\x1b\[2m(?:evaluating the prompt|prompt): [^\x1b]*\x1b\[0m", "", last)  # (progress, cleared)
    last = re.split(r"\r?\n(?:\x1b\[2m)?(?:\[the reply|\[reply cut|[^\n]*prompt tokens evaluated)", last)[0]
    dim = "".join(re.findall(r"\x1b\[2m(.*?)\x1b\[0m", last, re.DOTALL))  # the thought, as drawn
    rest = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", re.sub(r"\x1b\[2m.*?\x1b\[0m", "", last, flags=re.DOTALL))
    assert (_words(dim), _words(rest)) == (_words(answer.get("reasoning", "")), _words(answer["content"])), last
    calls_shown = screen.rsplit("tool call:", 1)[0]
    assert not any(m in calls_shown for m in ("<tool_call>", "[TOOL_CALLS]", '{"name"')), screen


def _words(text: str) -> list[str]:
    return text.split()


UNMARKED = [  # (template, reply, (content, reasoning)): the prompt neither opened nor closed a thought
    ("Qwen-Qwen3-0.6B", "Oslo, or Bergen? Oslo.</think>\n\nOslo it is.", ("Oslo it is.", "Oslo, or Bergen? Oslo.")),
    ("mistralai-Ministral-3-14B-Reasoning-2512", "Think it over.[/THINK]Done.", ("Done.", "Think it over.")),
    ("Qwen-Qwen3-0.6B", "<think>hm</think>Opened as written.", ("Opened as written.", "hm")),
    ("Qwen-Qwen3-0.6B", "An answer with no thought at all.", ("An answer with no thought at all.", "")),
    ("Qwen-Qwen3-0.6B", "x" * 1600 + "</think>late", ("x" * 1600 + "</think>late", "")),  # (past the hold: the
]  # answer's, and the close between two pieces of it its text)


@pytest.mark.parametrize(("template", "reply", "expected"), UNMARKED, ids=[u[1][:24] for u in UNMARKED])
def test_a_thought_whose_opening_the_model_left_out_is_the_thought_as_it_streams(vocabularies, template, reply,
                                                                                expected) -> None:
    """Kind 2 where the prompt did not open the thought: the reply's start is held (up to
    ``thoughts.UNMARKED_HOLD`` characters) until a close with no opening makes it the thought; an opening,
    a call, the hold's end or the reply's end make it the answer. At every chunking, as text and as ids
    of a vocabulary whose markers are tokens; the screen is the message."""
    reply_format = _format(template)
    for size in (len(reply), 1, 3, 7):
        parser = ReplyParser(reply_format, schemas=WEATHER, unmarked_thought=True)
        got = _streamed(parser, [reply[i:i + size] for i in range(0, len(reply), size)])
        assert (got[0], got[1].strip()) == expected, size
    tok = vocabularies[template]
    parser = ReplyParser(reply_format, tokenizer=tok, schemas=WEATHER, unmarked_thought=True)
    got = _streamed(parser, tok.encode(reply, parse_special=True))
    syntax_tokens = reply_format.calls.markers(tok.special_texts())  # (the call syntax's tokens, Qwen3's empty
    content = re.sub("|".join(map(re.escape, syntax_tokens)), "", expected[0])  # thought: outside a call, kept nowhere)
    assert (got[0], got[1].strip()) == (content, expected[1])
    assert parse_reply(reply_format, reply, unmarked_thought=False).reasoning == ("hm" if "<think>" in reply else "")
