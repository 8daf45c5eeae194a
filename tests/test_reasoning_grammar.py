"""A schema or grammar on a reasoning model shapes the answer alone: the thought stays free (a grammar over
the whole reply would forbid it), and the reasoning budget and the REPL's Ctrl-C end it as they do without
one. The oracle for the grammar is llama.cpp's own grammar sampler, token by token over a vocabulary
(``vocab_only``); the real turns run SmolLM2's weights under copies of its GGUF with reasoning templates."""

from __future__ import annotations

import ctypes
import json
import math
import subprocess
import sys

import llama_cpp
import pytest
from conftest import fetch, model_path, smollm_with_template
from test_reasoning import EXPECTED

from rml_chat.core.gbnf import after_thought, answer_alone
from rml_chat.core.model import load_model
from rml_chat.engines.runtime import schema_to_gbnf
from rml_chat.tools import loop as tool_loop
from tokenizer.chat.reasoning import Reasoning, derive
from tokenizer.chat.template import ChatTemplate

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
QWEN3 = Reasoning("<think>", "</think>", close_written="\n</think>\n\n")
OSS = Reasoning("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>",
                "<|channel|>final<|message|>", field="thinking")


class Grammar:
    """llama.cpp's grammar sampler over SmolLM2's vocabulary: does it let ``text``'s tokens through, one by
    one, and then let the turn end?"""

    def __init__(self) -> None:
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self.model = llama_cpp.llama_model_load_from_file(str(model_path("smollm2")).encode(), params)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.eos = llama_cpp.llama_vocab_eos(self.vocab)

    def _allowed(self, sampler: object, token: int) -> bool:
        data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
        candidates = llama_cpp.llama_token_data_array(data, 1, -1, False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return not math.isinf(data[0].logit)

    def verdict(self, gbnf: str, text: str) -> str:
        """"complete", "unfinished" (every token let through, the end not yet allowed) or "refused"."""
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
        assert sampler, "the grammar does not parse"
        ids = (llama_cpp.llama_token * (len(text) + 8))()
        n = llama_cpp.llama_tokenize(self.vocab, text.encode(), len(text.encode()), ids, len(ids), False, True)
        try:
            for token in ids[:n]:
                if not self._allowed(sampler, token):
                    return "refused"
                llama_cpp.llama_sampler_accept(sampler, token)
            return "complete" if self._allowed(sampler, self.eos) else "unfinished"
        finally:
            llama_cpp.llama_sampler_free(sampler)


@pytest.fixture(scope="module")
def grammar() -> Grammar:
    return Grammar()


@pytest.fixture(scope="module")
def answer() -> str:
    return schema_to_gbnf(json.dumps(SCHEMA))


@pytest.mark.parametrize("text, verdict", [
    ('<think>\nhm, {"a": 2} maybe </thin k>\n</think>\n\n{"a": 1}', "complete"),  # the thought is free text
    ('{"a": 1}', "complete"),                            # a reply without a thought
    ("<think>hm</think>\n\nOne.", "refused"),             # the answer is the schema's
    ('Hm. {"a": 1}', "refused"),                          # free text is a thought's only
    ('<think>x</think> y </think>{"a": 1}', "refused"),   # the first close ends the thought
    ('<think>\nhm, so', "unfinished"),                    # a thought may run on
])
def test_the_thought_is_free_and_the_answer_follows_the_schema(grammar, answer, text, verdict) -> None:
    assert grammar.verdict(after_thought(answer, QWEN3), text) == verdict


@pytest.mark.parametrize("text, verdict", [
    ('hm, let me see.\n</think>\n\n{"a": 1}', "complete"),  # the prompt opened the thought
    ('{"a": 1}', "unfinished"),                             # ... so this is still the thought
    ('hm</think>\n\nOne.', "refused"),
])
def test_a_thought_the_prompt_opened_comes_first(grammar, answer, text, verdict) -> None:
    assert grammar.verdict(after_thought(answer, QWEN3, in_thought=True), text) == verdict


@pytest.mark.parametrize("text, verdict", [
    ('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>{"a": 1}', "complete"),
    ('<|channel|>analysis<|message|>A.<|end|><|start|>assistant<|channel|>commentary<|message|>B.<|end|>'
     '<|start|>assistant<|channel|>final<|message|>{"a": 1}', "complete"),  # another channel between them
    ('<|channel|>final<|message|>{"a": 1}', "complete"),  # no thought: the answer's own opening
    ('{"a": 1}', "refused"),
])
def test_channels_the_answer_opens_after_the_thought_or_alone(grammar, answer, text, verdict) -> None:
    assert grammar.verdict(after_thought(answer, OSS), text) == verdict


def test_a_grammar_that_writes_the_thought_itself_or_a_lazy_one_keeps_the_whole_reply() -> None:
    from rml_chat.engines.base import LazyGrammar

    assert answer_alone('root ::= "yes" | "no"', QWEN3)
    assert not answer_alone('root ::= "<think>" [a-z]+ "</think>" "yes"', QWEN3)
    assert not answer_alone(LazyGrammar('root ::= "x"', ["<tool_call>"]), QWEN3)
    assert not answer_alone('root ::= "yes"', None)


def test_every_reasoning_template_of_the_set_gets_a_grammar_llama_cpp_takes_and_follows(grammar, answer) -> None:
    """Close the category: for each template with markers, the grammar parses in llama.cpp and lets a reply
    written with the template's own markers through, thought and all (the prompt's open thought too)."""
    seen = 0
    for path in sorted((fetch.models_dir() / "templates").glob("*.jinja")):
        found = derive(ChatTemplate(path.read_text(encoding="utf-8")))
        if found is None:
            continue
        seen += 1
        thought = f"hm, so {{\"a\": 2}} {found.close.strip()[:-1]}\n"
        reply = ("" if found.prefilled else found.open) + thought + found.close + '\n\n{"a": 1}'
        assert grammar.verdict(after_thought(answer, found, in_thought=found.prefilled), reply) == "complete", path.stem
        assert grammar.verdict(after_thought(answer, found, in_thought=found.prefilled), reply + "x") == "refused"
    assert seen >= 35


# ----- real turns ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("reasoning-grammar")
    made = {}
    for family in ("qwen3", "qwq"):
        made[family] = smollm_with_template(folder / f"{family}.gguf", EXPECTED[family][0])
    return made


def _cli(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "rml_chat", *args, "--json"], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def test_under_a_schema_the_budget_ends_the_thought_and_the_answer_follows_the_schema(copies) -> None:
    ask = ["-p", "Tell me about the sea.", "--temp", "0", "--think", "on", "-j", json.dumps(SCHEMA)]
    free = _cli(copies["qwq"], *ask, "-n", "40")  # QwQ's prompt opens the thought: the schema waits for its end
    assert free["reasoning_tokens"] == 40 and free["reply"] == "" and free["complete"] is False
    capped = _cli(copies["qwq"], *ask, "-n", "80", "--reasoning-budget", "12")
    closing = len(load_model(copies["qwq"]).tokenizer.encode("</think>", parse_special=True))
    assert capped["reasoning_tokens"] == 12 + closing and capped["reasoning"] == free["reasoning"][:len(capped["reasoning"])]
    assert set(json.loads(capped["reply"])) == {"a"} and capped["complete"] is True and capped["schema_valid"] is True
    none = _cli(copies["qwq"], *ask, "-n", "40", "--reasoning-budget", "0")
    assert none["reasoning"] == "" and json.loads(none["reply"]) and none["schema_valid"] is True


def test_a_model_that_writes_no_thought_answers_by_the_schema(copies) -> None:
    done = _cli(copies["qwen3"], "-p", "A number as JSON.", "--temp", "0", "-n", "40", "-j", json.dumps(SCHEMA))
    assert done["reasoning"] == "" and set(json.loads(done["reply"])) == {"a"} and done["schema_valid"] is True


def test_ctrl_c_ends_a_thought_under_a_schema_and_the_answer_follows_it(copies, tmp_path) -> None:
    from test_repl import Terminal

    term = Terminal(tmp_path, copies["qwq"], "--temp", "0", "-n", "400", "--think", "on", "-j", json.dumps(SCHEMA),
                    model=False)
    term.prompt_ready()
    term.send(b"Write a long story.\r")
    start = len(term.output)
    term.read_until(lambda out: len(out) - start > 200)  # the thought is streaming
    term.send(b"\x03")  # the first Ctrl-C ends the thought: the model answers by the schema
    term.read_until(lambda out: b"stop: " in out[start:] and out.endswith(b"> "))
    term.prompt_ready()
    assert b"reply cut by Ctrl-C" not in term.output[start:]
    assert term.finish() == 0
    (chat,) = (tmp_path / "sessions").glob("*.json")
    answered = json.loads(chat.read_text())["messages"][1]
    assert answered["reasoning"] and set(json.loads(answered["content"])) == {"a"} and "cut" not in answered


def test_an_empty_reply_without_a_schema_names_no_grammar(copies) -> None:
    """A budget that ends the thought where the model has nothing more to say leaves an empty answer; the
    note says so without blaming a grammar there is none of (every turn had a verdict, even unconstrained)."""
    from rml_chat.core.session import ChatSession, SessionOptions
    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine

    model = load_model(copies["qwq"])
    session = ChatSession(model, LocalEngine(model.weights, n_ctx=1024, n_threads=2),
                          SessionOptions(Sampling(temp=0.0, max_tokens=4)))
    try:
        result = session.turn("Hi", lambda _: None, lambda _: None)
    finally:
        session.engine.close()
    assert result.outcome is None
    result.reply, result.generation.stop_reason, result.reasoning_tokens = "", "stop", 0
    assert result.cut_note(1024) == "the reply is empty: the model ended its turn at once"
    result.reasoning_tokens = 7  # a thought that closed, and nothing after it
    assert result.cut_note(1024) == "the reply is empty: the model ended its turn after its thought (7 tokens)"
    result.ended_in_thought = True  # a thought that never closed is no "at once"
    assert result.cut_note(1024) == ("the reply is empty: the model ended its turn inside its thought (7 tokens), "
                                     "which never closed")
    result.generation.stop_reason, result.max_tokens = "length", 4
    assert result.cut_note(1024) == "reply cut at -n 4 tokens inside its thought (7 tokens), with no answer"


# ----- every family of the proof, on real weights -------------------------------------------------------

FAMILIES = ["qwen3", "r1-distill", "ministral", "gpt-oss", "seed-oss", "minimax-m2", "nemotron", "smollm3", "gemma-4",
            "apriel", "cohere2"]


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_splits_a_real_reply_and_ends_a_thought_by_budget(family, tmp_path) -> None:
    """SmolLM2's weights under the family's template. Where the prompt opens the thought, it runs free and
    the budget ends it, the answer under a schema; where the model must open it, a grammar made of the
    template's own markers makes the 135M model write one. Either way the thought and the answer come apart
    and no marker is left in either."""
    from rml_chat.core.gbnf import literal

    name = EXPECTED[family][0]
    copy = smollm_with_template(tmp_path / f"{family}.gguf", name)
    found = derive(ChatTemplate((fetch.models_dir() / "templates" / f"{name}.jinja").read_text(encoding="utf-8")))
    ask = [str(copy), "-p", "Tell me about the sea.", "--temp", "0"]
    if found.prefilled:
        done = _cli(*ask, "-n", "80", "--think", "on", "--reasoning-budget", "10", "-j", json.dumps(SCHEMA))
        close = (found.close_written or found.close).rstrip()
        if found.answer_open and close.endswith(found.answer_open) and close != found.answer_open:
            close = close[:-len(found.answer_open)]  # (Cohere's <|START_TEXT|> after the close: the answer's)
        closing = len(load_model(str(copy)).tokenizer.encode(close, parse_special=True))  # (the space after too)
        assert done["reasoning_tokens"] == 10 + closing and done["schema_valid"] is True, done
    else:
        thought = f'root ::= {literal(found.open)} " " [a-z ]{{8,40}} {literal(found.close_written or found.close)} ' \
                  f'[A-Z] [a-z !]{{1,30}}'
        done = _cli(*ask, "-n", "120", "--grammar", thought)
        assert done["reasoning_tokens"] > 3 and done["reply"][:1].isupper(), done
    assert done["reasoning"].strip() and done["reply"].strip()
    markers = {m.strip() for m in (found.open, found.close, found.answer_open) if m.strip()}
    assert not any(m in done["reply"] or m in done["reasoning"] for m in markers), done


# ----- tools after a thought ----------------------------------------------------------------------------

def test_a_required_call_follows_a_free_thought_and_a_lazy_trigger_inside_a_thought_is_none(copies, tmp_path) -> None:
    """QwQ's prompt opens the thought: under --tool-choice required the thought runs free until the budget
    closes it, then the grammar holds the call; the result goes back and the next turn (a lazy grammar,
    its trigger counting only after the thought's close) thinks again, free, before it answers. The second
    prompt is jinja2's rendering of the same conversation."""
    from test_tools import WEATHER

    from rml_chat.core.session import ChatSession, ReasoningOptions, SessionOptions
    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine
    from rml_chat.tools.functions import load_functions
    from rml_chat.tools.toolbox import Toolbox
    from tokenizer.chat.tool_calls import derive as derive_calls

    functions = tmp_path / "fns.py"
    functions.write_text(WEATHER)
    model = load_model(copies["qwq"])
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2)
    prompts: list[list[int]] = []
    generate = engine.generate
    engine.generate = lambda ids, *a, **k: (prompts.append(list(ids)), generate(ids, *a, **k))[1]
    try:
        session = ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, max_tokens=120, reasoning_budget=10),
                                                            reasoning=ReasoningOptions(thinking=True)))
        template = ChatTemplate(model.tokenizer.chat_template)
        syntax, _ = derive_calls(template, ["<|im_end|>"], thought_close=model.reasoning.close)
        tools = load_functions(str(functions))
        session.options.tools = Toolbox(tools, syntax, choice="required", approve=lambda call: True)
        result = tool_loop.exchange(session, "What is the weather in Paris?", lambda t: None, lambda t: None)
    finally:
        engine.close()
    assert [c.result for c in result.tool_calls] == ["Sunny, 21 C in Paris"]
    user, call, tool, answer = session.conversation.messages
    assert call.reasoning.strip() and call.tool_calls and call.content == ""  # a thought, then the call
    assert tool.role == "tool" and answer.reasoning.strip() and result.reasoning_tokens > 10  # thought again
    messages = session.conversation.for_prompt(model.reasoning)[:3]
    expected = template.render(messages, True, tools=[t.definition() for t in tools], bos_token="<|im_start|>",
                               eos_token="<|im_end|>", thinking=True)
    # four calls: the first turn, its answer after the budget's close; the second turn, and the same after its close
    assert len(prompts) == 4 and model.tokenizer.decode(prompts[2]) == expected


def test_llama_cpp_holds_a_lazy_trigger_back_inside_a_thought_and_fires_it_outside() -> None:
    """The patterns of ``lazy_after_thought`` in llama.cpp's own regex engine, on a word SmolLM2 writes
    anyway ("Paris"): read as inside a thought (the prompt opened one, no close yet) the word triggers
    nothing and the reply is the free one; read as a reply that opened no thought, it triggers the grammar."""
    from rml_chat.core.gbnf import lazy_after_thought
    from rml_chat.engines.base import Generation, LazyGrammar, Sampling
    from rml_chat.engines.local import LocalEngine

    model = load_model(str(model_path("smollm2")))
    ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Name the capital of France in one sentence."}]))
    held = LazyGrammar('root ::= "Paris (a lazy grammar wrote this)."', ["Paris"])
    engine = LocalEngine(model.weights, n_ctx=1024, n_threads=2)

    def reply(grammar: str | None) -> str:
        return model.tokenizer.decode(list(engine.generate(ids, Sampling(temp=0.0, max_tokens=24), model.stop_ids,
                                                           Generation(), grammar=grammar)))
    try:
        free = reply(None)
        inside = reply(lazy_after_thought(held, QWEN3, in_thought=True))
        outside = reply(lazy_after_thought(held, QWEN3, in_thought=False))
    finally:
        engine.close()
    assert "Paris" in free and inside == free
    assert outside == free[:free.index("Paris")] + "Paris (a lazy grammar wrote this)."


def test_the_thought_before_a_call_goes_to_the_template_which_keeps_it_after_the_last_question(copies) -> None:
    """Qwen3 keeps the thoughts of the messages after the last user message (its template reads
    ``reasoning_content`` there): a call's thought is handed over, so the next prompt is what the template
    writes for the conversation llama-server would hand it, thought and all, and the cache holding the
    model's thought and call stays a prefix of it."""
    from rml_chat.core.conversation import Conversation
    from tokenizer.chat.tool_calls import ToolCall, render_calls, tool_message

    model = load_model(copies["qwen3"])
    call = ToolCall("get_weather", {"city": "Paris"}, "call00001")
    conversation = Conversation(None, [{"role": "user", "content": "Weather in Paris?"},
                                       {"role": "assistant", "content": "", "reasoning": "\nI should look it up.\n",
                                        "tool_calls": render_calls([call])}, tool_message(call, "Sunny")])
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    ours = model.tokenizer.decode(model.encoder.encode(model.encoder.format(conversation.for_prompt(model.reasoning),
                                                                            tools=tools)))
    handed = [m.as_dict() for m in conversation.messages]
    handed[1]["reasoning_content"] = handed[1].pop("reasoning").strip()  # as llama-server hands a parsed reply
    theirs = ChatTemplate(model.tokenizer.chat_template).render(handed, True, tools=tools, bos_token="",
                                                                 eos_token="<|im_end|>")
    assert ours == theirs and "<think>\nI should look it up.\n</think>\n\n<tool_call>" in ours
