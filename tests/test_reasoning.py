"""Reasoning models: the markers read off every template of llama.cpp's set, the streaming split, and real
turns of SmolLM2's weights under reasoning templates (a copy of its GGUF with another template, written by
the ``gguf`` package; a GBNF grammar makes the 135M model write a thought, or the template's prompt opens
one)."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys

import pytest
from conftest import fetch, model_path, smollm_with_template

from rml_chat.core.message import Message
from rml_chat.core.model import load_model
from rml_chat.core.session import ChatSession, SessionOptions
from rml_chat.core.structured import from_grammar
from rml_chat.core.thoughts import HIDDEN_CLOSE, HIDDEN_OPEN, ThoughtSplitter
from rml_chat.engines.base import Sampling
from rml_chat.engines.local import LocalEngine
from tokenizer.chat.reasoning import Reasoning, derive
from tokenizer.chat.template import ChatTemplate

#: family -> (template file, open, close, answer_open, field, prefilled, history)
EXPECTED = {
    "qwen3": ("Qwen-Qwen3-0.6B", "<think>", "</think>", "", "reasoning_content", False, "drop"),
    "qwq": ("Qwen-QwQ-32B", "<think>", "</think>", "", "content", True, "drop"),
    "r1-distill": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "<think>", "</think>", "", "content", True, "drop"),
    "ministral": ("mistralai-Ministral-3-14B-Reasoning-2512", "[THINK]", "[/THINK]", "", "content", False, "keep"),
    "gpt-oss": ("openai-gpt-oss-120b", "<|channel|>analysis<|message|>",
                "<|end|><|start|>assistant<|channel|>final<|message|>", "<|channel|>final<|message|>", "thinking",
                False, "drop"),
    "seed-oss": ("ByteDance-Seed-OSS", "<seed:think>", "</seed:think>", "", "reasoning_content", False, "keep"),
    "minimax-m2": ("MiniMax-M2", "<think>", "</think>", "", "reasoning_content", True, "drop"),
    "nemotron": ("NVIDIA-Nemotron-Nano-v2", "<think>", "</think>", "", "content", True, "drop"),
    "smollm3": ("HuggingFaceTB-SmolLM3-3B", "<think>", "</think>", "", "content", False, "keep"),
    "gemma-4": ("google-gemma-4-31B-it", "<|channel>thought", "<channel|>", "", "content", False, "drop"),
    "apriel": ("Apriel-1.6-15b-Thinker-fixed", "Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]", "",
               "reasoning_content", True, "drop"),
    "cohere2": ("Cohere2MoE", "<|START_THINKING|>", "<|END_THINKING|><|START_TEXT|>", "<|START_TEXT|>",
                "reasoning_content", True, "keep"),
}
NO_THOUGHT = ["meta-llama-Llama-3.1-8B-Instruct", "Qwen-Qwen2.5-7B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407",
              "google-gemma-2-2b-it", "microsoft-Phi-3.5-mini-instruct", "Qwen3-Coder"]


def _template(name: str) -> ChatTemplate:
    return ChatTemplate((fetch.models_dir() / "templates" / f"{name}.jinja").read_text(encoding="utf-8"))


@pytest.mark.parametrize("family", EXPECTED)
def test_the_markers_are_read_off_the_templates_renderings(family: str) -> None:
    name, *expected = EXPECTED[family]
    found = derive(_template(name))
    assert found is not None and (found.open, found.close, found.answer_open, found.field, found.prefilled,
                                  found.history) == tuple(expected)


@pytest.mark.parametrize("name", NO_THOUGHT)
def test_a_template_that_writes_no_thought_has_no_markers(name: str) -> None:
    assert derive(_template(name)) is None


def _every_template() -> list[str]:
    return sorted(p.stem for p in (fetch.models_dir() / "templates").glob("*.jinja"))


def test_every_reasoning_template_of_the_set_writes_the_thought_it_was_read_with() -> None:
    """For each template where markers are found: a thought handed over the way it takes one is rendered
    between them (or dropped, as its history policy says), and a template's own generation prompt opens
    a thought exactly where ``prefilled`` says."""
    seen = 0
    for name in _every_template():
        template = _template(name)
        found = derive(template)
        if found is None:
            continue
        seen += 1
        last = template.render([{"role": "user", "content": "U"}, found.message("ANSWER_7q", "THOUGHT_7q")], False,
                               strftime_now=lambda _: "")
        if found.history in ("keep", "last"):
            assert found.open in last and "THOUGHT_7q" in last and found.close in last, name
            before = last.split("ANSWER_7q")[0]  # (a system prompt may name the markers too)
            assert before.rindex(found.open) < before.rindex("THOUGHT_7q") < before.rindex(found.close)
        assert "ANSWER_7q" in last, name
    assert seen >= 35


# ----- the split, as text streams in -------------------------------------------------------------------

def _split(pieces: list[str], splitter: ThoughtSplitter) -> tuple[str, str, str]:
    answer = "".join(splitter.feed(p) for p in pieces) + splitter.finish()
    return splitter.thought, answer, splitter.thought_raw


@pytest.mark.offline
@pytest.mark.parametrize("text", ["<think>\nhmm, a\n</think>\n\nHello there", "  <think>x</think>y",
                                  "no thought <think>at all</think>", "<think>never closes", "<thi", "</think>"])
def test_the_split_is_the_same_wherever_the_stream_is_cut(text: str) -> None:
    whole = _split([text], ThoughtSplitter("<think>", "</think>"))
    for cuts in itertools.combinations(range(1, len(text)), 2):
        pieces = [text[i:j] for i, j in zip((0, *cuts), (*cuts, len(text)))]
        assert _split(pieces, ThoughtSplitter("<think>", "</think>")) == whole, pieces


@pytest.mark.offline
def test_split_outcomes() -> None:
    assert _split(["<think>\nhmm, a\n</think>\n\nHello"], ThoughtSplitter("<think>", "</think>"))[:2] == ("hmm, a",
                                                                                                          "Hello")
    assert _split(["no thought <think>x</think>"], ThoughtSplitter("<think>", "</think>"))[:2] == (
        "x", "no thought ")  # a thought opened again later in the answer is the thought's
    assert _split(["never closes"], ThoughtSplitter("<think>", "</think>", in_thought=True))[:2] == ("never closes", "")
    hidden = f"{HIDDEN_OPEN}<|channel|>{HIDDEN_CLOSE}"
    oss = ThoughtSplitter(hidden + "analysis", hidden + "final", hidden + "final")
    assert _split([hidden, "analysis hm", hidden, "final Hi", f"{HIDDEN_OPEN}<|return|>{HIDDEN_CLOSE}"], oss)[:2] == (
        "hm", "Hi")  # markers of control tokens; a stray control token is left out


# ----- real turns --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, str]:
    """SmolLM2's GGUF with the Qwen3, QwQ and gpt-oss templates."""
    folder = tmp_path_factory.mktemp("reasoning")
    made = {}
    for family in ("qwen3", "qwq", "gpt-oss"):
        made[family] = smollm_with_template(folder / f"{family}.gguf", EXPECTED[family][0])
    return made


QWEN3_THOUGHT = 'root ::= "<think>\\n" [a-z ]{8,40} "\\n</think>\\n\\n" [A-Za-z !]{1,30}'
OSS_THOUGHT = ('root ::= "<|channel|>analysis<|message|>" [a-z ]{8,40} "<|end|><|start|>assistant<|channel|>final'
               '<|message|>" [A-Z] [a-z !]{1,30} "<|return|>"')


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rml_chat", *args], capture_output=True, text=True, timeout=300)


def test_json_has_the_reasoning_beside_the_reply_and_stdout_carries_no_marker(copies) -> None:
    as_json = json.loads(_cli(copies["qwen3"], "-p", "Say hi", "--temp", "0", "--grammar", QWEN3_THOUGHT,
                              "--json").stdout)
    assert as_json["ok"] and as_json["reasoning"] and as_json["reply"] and as_json["reasoning_tokens"] > 3
    assert "<think>" not in as_json["reply"] + as_json["reasoning"]
    plain = _cli(copies["qwen3"], "-p", "Say hi", "--temp", "0", "--grammar", QWEN3_THOUGHT)
    assert plain.stdout == as_json["reply"] + "\n" and as_json["reasoning"] in plain.stderr  # the thought: stderr
    hidden = _cli(copies["qwen3"], "-p", "Say hi", "--temp", "0", "--grammar", QWEN3_THOUGHT, "--hidethinking")
    assert hidden.stdout == plain.stdout and as_json["reasoning"] not in hidden.stderr


def test_gpt_oss_runs_through_analysis_into_final_and_no_stop_cuts_between_them(copies) -> None:
    done = json.loads(_cli(copies["gpt-oss"], "-p", "Say hi", "--temp", "0", "--grammar", OSS_THOUGHT,
                           "--json").stdout)
    assert done["reasoning"] and done["reply"][:1].isupper() and "<|" not in done["reply"] + done["reasoning"]


def test_the_reasoning_budget_closes_the_thought_as_the_template_writes_it_and_the_model_answers(copies) -> None:
    ask = ["-p", "Tell me about the sea.", "--temp", "0", "--think", "on", "--json"]
    free = json.loads(_cli(copies["qwq"], *ask, "-n", "40").stdout)
    assert free["reply"] == "" and free["reasoning"] and free["reasoning_tokens"] == 40  # the prompt opened a thought
    capped = json.loads(_cli(copies["qwq"], *ask, "-n", "60", "--reasoning-budget", "12").stdout)
    closing = len(load_model(copies["qwq"]).tokenizer.encode("</think>", parse_special=True))
    assert capped["reasoning_tokens"] == 12 + closing and capped["reply"]
    none = json.loads(_cli(copies["qwq"], *ask, "-n", "20", "--reasoning-budget", "0").stdout)
    assert none["reasoning"] == "" and none["reply"]


def test_history_drops_the_thought_as_the_template_does_and_only_the_answer_is_evaluated_again(copies, tmp_path) -> None:
    model = load_model(copies["qwen3"])
    session = ChatSession(model, LocalEngine(model.weights, n_ctx=2048, n_threads=2), SessionOptions(Sampling(temp=0.0, seed=0)))
    session.options.constraint = from_grammar(QWEN3_THOUGHT)
    template = ChatTemplate(model.tokenizer.chat_template)
    try:
        for turn, text in enumerate(["Say hi", "Say hello", "Say bye"]):
            before = session.prompt_ids() if session.conversation.messages else []
            result = session.turn(text, lambda _: None, lambda _: None)
            assert result.reasoning and session.conversation.messages[-1].reasoning.strip() == result.reasoning
            messages = [model.reasoning.message(m.content, m.reasoning) if m.reasoning is not None else
                        {"role": m.role, "content": m.content} for m in session.conversation.messages]
            rendered = template.render(messages + [{"role": "user", "content": "next"}], True, bos_token="",
                                       eos_token="<|im_end|>")
            session.conversation.add(Message("user", "next"))
            assert model.tokenizer.decode(session.prompt_ids()) == rendered  # the template's own history
            assert result.reasoning not in rendered  # Qwen3 drops earlier thoughts
            session.conversation.drop_last()
            if turn:  # evaluated: the last answer, the new message and the template's glue, never the history
                answer = len(model.tokenizer.encode(session.conversation.messages[-3].content))
                new = len(model.tokenizer.encode(text))
                assert result.generation.evaluated <= answer + new + 12, (turn, result.generation.evaluated)
                assert before  # (the earlier prompt was there to reuse)
        saved = tmp_path / "chat.json"
        session.conversation.save(saved)
    finally:
        session.engine.close()
    from rml_chat.core.conversation import Conversation

    back = Conversation.load(saved)
    assert [m.reasoning for m in back.messages] == [m.reasoning for m in session.conversation.messages]
    assert back.for_prompt(model.reasoning) == session.conversation.for_prompt(model.reasoning)


@pytest.mark.offline
def test_a_thought_goes_to_the_template_the_way_it_takes_one() -> None:
    inline = Reasoning("<think>", "</think>", history="keep")
    field = Reasoning("<think>", "</think>", field="reasoning_content", history="keep")
    assert inline.message("\n\nHi", "\nhm\n") == {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHi"}
    assert field.message("\n\nHi", "\nhm\n") == {"role": "assistant", "content": "Hi", "reasoning_content": "hm"}
    dropped = Reasoning("<think>", "</think>", history="drop", strips_answer=False)
    assert dropped.message("\n\nHi", "hm") == {"role": "assistant", "content": "\n\nHi"}


def test_the_repl_shows_the_thought_dim_then_the_answer_and_ctrl_c_ends_a_thought(copies, tmp_path) -> None:
    from test_repl import Terminal

    term = Terminal(tmp_path, copies["qwen3"], "--temp", "0", "--grammar", QWEN3_THOUGHT, model=False)
    term.prompt_ready()
    term.ask(b"Say hi", b"thinking)")
    assert term.finish() == 0
    shown = term.output.decode("utf-8", "replace")
    assert "<think>" not in shown and "</think>" not in shown
    (chat,) = (tmp_path / "sessions").glob("*.json")
    reply = json.loads(chat.read_text())["messages"][1]
    thought, answer = reply["reasoning"].strip(), reply["content"].strip()
    assert f"\x1b[2m{thought[0]}" in shown  # dim, token by token
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    assert f"{thought}\r\n\r\n{answer}\r\n" in plain  # the thought, a blank line, the answer
    assert plain.index("Say hi") < plain.index(thought)
    thinking = Terminal(tmp_path, copies["qwq"], "--temp", "0", "-n", "400", "--think", "on", model=False)
    thinking.prompt_ready()
    thinking.send(b"Write a long story.\r")
    start = len(thinking.output)
    thinking.read_until(lambda out: len(out) - start > 200)  # the thought is streaming
    thinking.send(b"\x03")  # the first Ctrl-C ends the thought: the model answers
    thinking.read_until(lambda out: b"stop: " in out[start:] and out.endswith(b"> "))
    thinking.prompt_ready()
    assert b"reply cut by Ctrl-C" not in thinking.output[start:]
    assert thinking.finish() == 0
    (_, second) = sorted((tmp_path / "sessions").glob("*.json"), key=lambda p: p.stat().st_mtime)
    answered = json.loads(second.read_text())["messages"][1]
    assert answered["reasoning"] and answered["content"].strip() and "cut" not in answered


def test_every_reasoning_template_splits_and_its_history_is_the_templates_own() -> None:
    """For every template of the set that writes thoughts: its markers split a reply written with them, and
    a conversation with a thought, handed over as the chat hands it, renders exactly as the template renders
    the same conversation with the thought in it (dropped, kept or trimmed as the template does)."""
    import dataclasses
    import datetime

    import tokenizer
    from tokenizer.chat import ChatEncoder, detect_chat_format, segments_text

    tok, now, seen = tokenizer.load(model_path("smollm2")), datetime.datetime(2026, 12, 1), 0
    for name in _every_template():
        source = (fetch.models_dir() / "templates" / f"{name}.jinja").read_text(encoding="utf-8")
        template = ChatTemplate(source)
        found = derive(template)
        if found is None:
            continue
        seen += 1
        splitter = ThoughtSplitter(found.open, found.close, found.answer_open)
        answer = "".join(splitter.feed(ch) for ch in found.open + "\nlet me see\n" + (found.close_written or found.close)
                         + "The answer.") + splitter.finish()
        assert (splitter.thought, answer) == ("let me see", "The answer."), name
        encoder = ChatEncoder(tok, detect_chat_format(source, tok.vocab, template=source, bos_token="<s>",
                                                      eos_token="</s>").format)
        user, later = {"role": "user", "content": "Hi there"}, {"role": "user", "content": "And now?"}
        ours = segments_text(encoder.format([user, found.message("\n\nHello!", "\nhm, a greeting\n"), later], now=now))
        whole = dataclasses.replace(found, history="keep").message("\n\nHello!", "\nhm, a greeting\n")
        assert ours == template.render([user, whole, later], True, bos_token=encoder.bos_text,
                                       eos_token=encoder.eos_text, now=now), name
    assert seen >= 38
