"""Going on with a reply: ``parse_reply``'s ``prefill`` and ``partial``, ``ChatSession.go_on`` (the REPL's
``/continue``) and ``-p --prefill``, on the real SmolLM2 and on vocabularies whose markers are tokens.
(llama.cpp's own 72 continuation cases and 9 partial ones run in ``test_llama_chat_suite.py``.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import fetch, model_path, smollm_session, smollm_with_template
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from test_control_tokens import vocabulary_with_markers
from test_tools import STOPS

import tokenizer
from rml_chat.core.conversation import ChatError
from rml_chat.core.reply import AnswerText, Prefill, ReplyFormat, ReplyParser, parse_reply
from rml_chat.frontends.repl import Repl
from rml_chat.tools import loop as tool_loop
from tokenizer.chat.tool_calls import OpenCall, ToolCall

ENTER = "\r"


def _format(template: str) -> ReplyFormat:
    source = (fetch.models_dir() / "templates" / f"{template}.jinja").read_text(encoding="utf-8")
    return ReplyFormat.of_template(source, stops=STOPS)


@pytest.mark.parametrize(("template", "opened"), [("Qwen-Qwen3-0.6B", False), ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
                                                                              True)])
def test_a_reply_goes_on_from_its_thought_or_its_answer_as_text_and_as_tokens(tmp_path, template, opened) -> None:
    """The thought goes on (a message with a thought and no answer), or the answer does; the message is the
    whole, read the same from text and from ids where the markers are tokens (as in Qwen's vocabulary)."""
    reply_format = _format(template)
    tok = tokenizer.load(str(vocabulary_with_markers(tmp_path / "v.gguf", template, ["<think>", "</think>"],
                                                     user_defined=frozenset(["<think>", "</think>"]))))
    cases = [(Prefill(reasoning="Oslo or"), " Bergen?</think>\n\nBergen.", ("Bergen.", "Oslo or Bergen?")),
             (Prefill("It is ", "Oslo?"), "Bergen.", ("It is Bergen.", "Oslo?")),
             (Prefill("Hi"), " there.", ("Hi there.", ""))]
    for prefill, more, (content, reasoning) in cases:
        for reply in (more, tok.encode(more, parse_special=True)):
            read = parse_reply(reply_format, reply, tokenizer=None if isinstance(reply, str) else tok,
                               prefill=prefill, in_thought=opened)
            assert (read.content, read.reasoning.strip()) == (content, reasoning), (prefill, reply)
        written = prefill.written(reply_format.reasoning, opened)
        assert written.startswith("<think>") != opened  # (the opening is never written twice)


def test_a_partial_reply_names_the_call_still_being_written_and_nothing_uncertain() -> None:
    qwen = _format("Qwen-Qwen2.5-7B-Instruct")
    schemas = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}}}
    calls = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "get_weather", "arguments": {"ci')
    read = parse_reply(qwen, "Let me look.\n" + calls, schemas=schemas, partial=True)
    assert read.content == "Let me look."
    assert read.tool_calls == (ToolCall("get_weather", {"city": "Oslo"}),)
    assert read.open_call == OpenCall("get_weather", '{"ci')
    held = parse_reply(qwen, "Let me look.\n<tool_c", schemas=schemas, partial=True)
    assert (held.content, held.tool_calls, held.open_call) == ("Let me look.", (), None)  # (it may be a call yet)
    whole = parse_reply(qwen, "Let me look.\n<tool_c", schemas=schemas)
    assert whole.content == "Let me look.\n<tool_c"  # (at the end, it was not)
    kimi = parse_reply(_format("moonshotai-Kimi-K2"), "<|tool_calls_section_begin|><|tool_call_begin|>functions."
                       'get_weather:0<|tool_call_argument_begin|>{"city": "O', partial=True)
    assert kimi.open_call == OpenCall("get_weather", '{"city": "O', "functions.get_weather:0")


def test_a_parser_fed_a_prefill_gives_events_for_the_new_text_alone() -> None:
    parser = ReplyParser(_format("Qwen-Qwen3-0.6B"))
    parser.go_on_from("<think>Oslo")
    events = parser.feed_text("?</think>Yes.") + parser.finish()
    assert [type(e).__name__ for e in events][:2] == ["ThoughtText", "AnswerText"]
    assert parser.message is not None and (parser.message.reasoning, parser.message.content) == ("Oslo?", "Yes.")


def test_a_stop_string_in_a_prefill_is_the_users_text_and_one_the_model_writes_after_it_stops() -> None:
    """As llama-server reads a prefilled reply, only what the model writes can stop it: ``--prefill "Hello
    END and" --stop END`` was cut to ``Hello``, the user's own start lost."""
    source = (fetch.models_dir() / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    parser = ReplyParser(ReplyFormat.of_template(source, stops=STOPS, stop_strings=["END"]))
    parser.go_on_from("Hello END and")
    shown = [e.text for e in parser.feed_text(" welcome. ") + parser.feed_text("The END of it.") + parser.finish()
             if isinstance(e, AnswerText)]
    assert "".join(shown) == " welcome. The " and parser.stopped_by == "END"
    assert parser.message is not None and parser.message.content == "Hello END and welcome. The"
    done = _cli("-p", "Say hello.", "--prefill", "Hello END and", "--stop", "END", "--temp", "0", "-n", "6", "--json")
    assert json.loads(done.stdout)["reply"].startswith("Hello END and "), done.stdout


# ----- a real model --------------------------------------------------------------------------------------

COUNT = "Count from 1 to 40, separated by commas."


def test_a_reply_cut_by_n_goes_on_as_the_longer_reply_would_have(tmp_path) -> None:
    """Greedy: 12 tokens, then /continue's 12 more, are the 24 tokens of one reply; the conversation holds
    one assistant message, whole, not marked cut."""
    with smollm_session(2048, 24) as session:
        whole = session.turn(COUNT, _ignore, _ignore).reply
        session.conversation.clear()
        session.options.sampling.max_tokens = 12
        first = session.turn(COUNT, _ignore, _ignore).reply
        shown: list[str] = []
        result = tool_loop.go_on(session, shown.append, _ignore)
    assert len(first) < len(whole) and whole.startswith(first)
    assert result.reply == whole and first + "".join(shown) == whole  # (the screen: the new text alone)
    assert [m.role for m in session.conversation.messages] == ["user", "assistant"]
    assert session.conversation.messages[-1].content == whole and not session.conversation.messages[-1].cut


def test_there_is_nothing_to_continue_before_a_reply_and_a_continuation_that_fails_loses_nothing() -> None:
    with smollm_session(2048, 12) as session:
        with pytest.raises(ChatError, match="no reply to continue"):
            tool_loop.go_on(session, _ignore, _ignore)
        session.turn(COUNT, _ignore, _ignore)
        before = list(session.conversation.messages)
        session.engine.n_ctx = len(session.prompt_ids(add_generation_prompt=False)) // 2  # (it no longer fits)
        try:
            with pytest.raises(ChatError, match="context"):
                tool_loop.go_on(session, _ignore, _ignore)
        finally:
            session.engine.n_ctx = 2048
        assert session.conversation.messages == before


def test_the_repl_continues_the_last_reply(tmp_path, capsys) -> None:
    with smollm_session(2048, 24) as session, create_pipe_input() as pipe:
        whole = session.turn(COUNT, _ignore, _ignore).reply
        session.conversation.clear()
        session.options.sampling.max_tokens = 12
        pipe.send_text("/continue" + ENTER + COUNT + ENTER + "/continue" + ENTER)
        pipe.close()
        assert Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history").run() == 0
        out = capsys.readouterr().out
        messages = session.conversation.messages
    assert "no reply to continue" in out
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].content == whole and f"\n{whole[:len(whole) // 2]}\n" in out  # (the first part, then
    assert f"\n{whole[len(whole) // 2:]}\n" in out  # the rest alone: nothing shown twice)
    assert "/continue goes on" in out


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), *args], capture_output=True,
                          text=True, timeout=300)


def test_prefill_starts_the_reply_of_p_and_json_has_it_whole() -> None:
    asked = ["-p", "Write a JSON object with keys name and age for a person.", "--prefill", '{"name": "', "--temp", "0",
             "-n", "30"]
    printed = _cli(*asked)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith('{"name": "') and len(printed.stdout) > len('{"name": "') + 3
    reported = _cli(*asked, "--json")
    assert json.loads(reported.stdout)["reply"] == printed.stdout.strip()
    usage = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "--prefill", "x",
                            "--batch", "-"], input="", capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "--prefill starts the reply of -p" in usage.stderr


PERSON = json.dumps({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                     "required": ["name", "age"]})


@pytest.mark.parametrize(("start", "template"), [("{", ""), ('{"name": "', ""),
                                                 ("{", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B")])
def test_a_prefilled_reply_under_a_schema_follows_it_as_a_whole(tmp_path, start: str, template: str) -> None:
    """The grammar reads the reply's start before the model writes: ``--prefill {`` goes on inside the
    object. Before, the grammar began again after the start, and the reply was ``{{"name": …}``: not JSON.
    Where the prompt opens the thought (R1's distills), the start is the thought's close and then ``{``, and
    the grammar read from the reply's start takes it."""
    model = smollm_with_template(tmp_path / "r1.gguf", template) if template else str(model_path("smollm2"))
    done = subprocess.run([sys.executable, "-m", "rml_chat", model, "-p", "A person.", "--prefill", start, "-j",
                           PERSON, "--temp", "0", "-n", "40", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)["reply"]
    assert reply.startswith(start) and set(json.loads(reply)) == {"name", "age"}, reply


@pytest.mark.parametrize(("start", "said"), [
    ("x", "the reply's start 'x' does not follow --json-schema: its grammar refuses 'x' as the reply's first text"),
    ('{"a', """the reply's start '{"a' does not follow --json-schema: its grammar refuses 'a' after '{"'""")])
def test_a_prefill_the_schema_refuses_is_one_line_and_nothing_is_written(start: str, said: str) -> None:
    done = _cli("-p", "A person.", "--prefill", start, "-j", PERSON, "--temp", "0", "-n", "40")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"rml-chat: chat: {said}\n")


def test_continue_under_a_schema_goes_on_inside_the_reply_so_far(tmp_path, capsys) -> None:
    """A JSON reply cut by -n, then /continue with the schema still on: the whole is one JSON object (the
    grammar restarted before, and the reply grew a second object inside the first). /schema changed
    since, so that the reply so far breaks it: one line, and the chat as it was."""
    def repl(keys: list[str]) -> str:
        with create_pipe_input() as pipe:
            pipe.send_text("".join(key + ENTER for key in keys))
            pipe.close()
            assert Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history").run() == 0
        return capsys.readouterr().out

    with smollm_session(2048, 8) as session:
        out = repl([f"/schema {PERSON}", "A person.", "/set n 60", "/continue"])
        whole = session.conversation.messages[1].content
        assert "before a JSON schema was complete" in out and set(json.loads(whole)) == {"name", "age"}, out
        out = repl(["/set n 4", "/regen", '/schema {"type": "array"}', "/continue"])
        messages = session.conversation.messages
    assert "does not follow /schema: its grammar refuses '{' as the reply's first text" in out, out
    assert [(m.role, m.content) for m in messages] == [("user", "A person."), ("assistant", '{ "name":')]


def _ignore(_: str) -> None:
    pass


def test_continue_after_a_reply_the_model_ended_says_that_nothing_was_added(tmp_path) -> None:
    """A reply the model ended itself: /continue shows it the reply again, and the model ends it again at
    once (a scripted model, in a real pty). The REPL says nothing was added, and the saved reply is the one."""
    from scripted_model import scripted_model
    from test_repl import Terminal

    model = scripted_model(tmp_path / "model.gguf", "Qwen-Qwen2.5-7B-Instruct", ["Hello there", "[wave]"], ["(not reached)"],
                           user_defined=("[wave]",))  # (the reply's last token, found again in its text)
    term = Terminal(tmp_path, str(model), "--temp", "0", "-n", "32", "--markdown", "off", model=False)
    term.prompt_ready()
    term.ask(b"Greet me", b" evaluated")
    start = len(term.output)
    term.ask(b"/continue", b"stop: ")
    after = term.output[start:].decode("utf-8", "replace")
    assert term.finish() == 0
    assert "[nothing added: the model ended the reply again at once; the reply stays as it was]" in after
    assert "0 tokens" in after
    (chat,) = (tmp_path / "sessions").glob("*.json")
    assert [m["content"] for m in json.loads(chat.read_text())["messages"]] == ["Greet me", "Hello there[wave]"]


def _shown_prompt(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-p", "hi", "--show-prompt",
                           "--json", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_prefill_is_literal_text_and_show_prompt_shows_it_where_the_model_sees_it() -> None:
    """``--prefill "<|im_end|> ok"`` is those characters, as a message is: it was encoded with the markers'
    rules, so the reply's start was SmolLM2's end of turn (the reply came back empty, the prefill lost),
    and --show-prompt left the prefill out of the prompt it showed."""
    tok = tokenizer.load(str(model_path("smollm2")))
    plain, prefilled = _shown_prompt(), _shown_prompt("--prefill", "<|im_end|> ok")
    assert prefilled["ids"] == plain["ids"] + tok.encode("<|im_end|> ok")
    assert prefilled["prompt"] == plain["prompt"] + "<|im_end|> ok"
    assert prefilled["control_tokens"] == plain["control_tokens"]
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-p", "hi", "--prefill",
                           "<|im_end|>", "-n", "3", "--temp", "0", "--json"], capture_output=True, text=True, timeout=120)
    reply = json.loads(done.stdout)
    assert reply["reply"].startswith("<|im_end|>") and reply["completion_tokens"] == 3, reply
