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
from conftest import fetch, model_path
from test_reasoning import EXPECTED

from rml_chat.core.gbnf import after_thought, answer_alone
from rml_chat.core.model import load_model
from rml_chat.engines.runtime import schema_to_gbnf
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
        target = folder / f"{family}.gguf"
        subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(target),
                        "--chat-template-file", str(fetch.models_dir() / "templates" / f"{EXPECTED[family][0]}.jinja"),
                        "--force"], check=True, capture_output=True)
        made[family] = str(target)
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
    from rml_chat.core.session import ChatSession
    from rml_chat.engines.base import Sampling
    from rml_chat.engines.local import LocalEngine

    model = load_model(copies["qwq"])
    session = ChatSession(model, LocalEngine(model.weights, n_ctx=1024, n_threads=2), Sampling(temp=0.0, max_tokens=4))
    try:
        result = session.turn("Hi", lambda _: None, lambda _: None)
    finally:
        session.engine.close()
    assert result.outcome is None
    result.reply, result.generation.stop_reason = "", "stop"
    assert result.cut_note(1024) == "the reply is empty: the model ended its turn at once"


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
    copy = tmp_path / f"{family}.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(copy),
                    "--chat-template-file", str(fetch.models_dir() / "templates" / f"{name}.jinja"), "--force"],
                   check=True, capture_output=True)
    found = derive(ChatTemplate((fetch.models_dir() / "templates" / f"{name}.jinja").read_text(encoding="utf-8")))
    ask = [str(copy), "-p", "Tell me about the sea.", "--temp", "0"]
    if found.prefilled:
        done = _cli(*ask, "-n", "80", "--think", "on", "--reasoning-budget", "10", "-j", json.dumps(SCHEMA))
        closing = len(load_model(str(copy)).tokenizer.encode((found.close_written or found.close).rstrip(),
                                                             parse_special=True))  # (the space after: the answer's)
        assert done["reasoning_tokens"] == 10 + closing and done["schema_valid"] is True, done
    else:
        thought = f'root ::= {literal(found.open)} " " [a-z ]{{8,40}} {literal(found.close_written or found.close)} ' \
                  f'[A-Z] [a-z !]{{1,30}}'
        done = _cli(*ask, "-n", "120", "--grammar", thought)
        assert done["reasoning_tokens"] > 3 and done["reply"][:1].isupper(), done
    assert done["reasoning"].strip() and done["reply"].strip()
    markers = {m.strip() for m in (found.open, found.close, found.answer_open) if m.strip()}
    assert not any(m in done["reply"] or m in done["reasoning"] for m in markers), done
