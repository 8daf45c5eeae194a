"""Structured output and batches with the real SmolLM2, greedy: schemas and grammars through llama.cpp's
grammar sampler, JSONL batches with one model load."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import jsonschema
import pytest
from conftest import model_path, ours
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rml_chat.core.model import load_model
from rml_chat.core.session import ChatSession, SessionOptions
from rml_chat.engines.base import Sampling
from rml_chat.engines.local import LocalEngine
from rml_chat.frontends.batch import _Progress
from rml_chat.frontends.repl import Repl

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "likes": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
          "required": ["name", "age"]}


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "--temp", "0", *args],
                          input=stdin, capture_output=True, timeout=300)


def test_a_schema_reply_parses_validates_and_ends_on_a_stop_id() -> None:
    done = run("-p", "Describe a person called Alice who is 30.", "-j", json.dumps(PERSON), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    jsonschema.validate(json.loads(report["reply"]), PERSON)
    assert (report["ok"], report["complete"], report["schema_valid"], report["stop_reason"]) == (True, True, True,
                                                                                               "stop")


def test_a_schema_from_a_file_and_plain_output(tmp_path) -> None:
    schema = tmp_path / "person.json"
    schema.write_text(json.dumps(PERSON))
    done = run("-p", "A person named Bo, aged 7.", "--json-schema", f"@{schema}")
    assert done.returncode == 0, done.stderr
    jsonschema.validate(json.loads(done.stdout), PERSON)


def test_a_yes_no_grammar_answers_one_of_the_two(tmp_path) -> None:
    for question in ("Is water wet?", "Is the sun cold?", "Do fish swim?"):
        done = run("-p", question, "--grammar", 'root ::= "yes" | "no"')
        assert done.returncode == 0 and done.stdout.decode().strip() in ("yes", "no"), done
    grammar = tmp_path / "yn.gbnf"
    grammar.write_text('root ::= ("yes" | "no") "."\n')
    done = run("-p", "Is water wet?", "--grammar-file", str(grammar))
    assert done.stdout.decode().strip() in ("yes.", "no.")


def test_a_schema_reply_cut_by_n_is_reported_incomplete() -> None:
    done = run("-p", "Describe a person.", "-j", json.dumps(PERSON), "-n", "4", "--json")
    assert done.returncode == 3
    report = json.loads(done.stdout)
    assert (report["ok"], report["complete"], report["stop_reason"]) == (False, False, "length")
    assert done.stderr.decode().strip().endswith("the reply was cut by -n/--max-tokens before a JSON schema was "
                                                 "complete")
    assert run("-p", "Describe a person.", "-j", json.dumps(PERSON), "-n", "4").returncode == 3


@pytest.mark.parametrize(("args", "words"), [
    (["-j", '{"$ref": "https://example.com/s.json"}'], "llama.cpp's converter can't take this schema"),
    (["-j", "[1, 2]"], "a JSON schema is an object"),
    (["-j", "{nope"], "not valid JSON"),
    (["-j", '{"enum": [NaN, 1]}'], "not valid JSON (NaN is no JSON number)"),  # (its reply "NaN" was no JSON)
    (["-j", '{"const": 1e400}'], "not valid JSON (1e400 is past the range of a number here)"),
    (["--grammar", "root ::= undefined-rule"], "the grammar does not parse: Undefined rule identifier"),
    (["--grammar", "root ::= [unclosed"], "the grammar does not parse"),
    (["--grammar", 'root ::= root "a" | "b"'],  # (llama.cpp says these two only to its log: it was "can't parse it")
     "the grammar does not parse: a rule starts with itself (left recursion"),
    (["--grammar", 'answer ::= "a"'], "the grammar does not parse: it has no rule named root"),
    (["--grammar-file", "/no/such.gbnf"], "--grammar-file: /no/such.gbnf: No such file or directory"),
    (["-j", "{}", "--grammar", "root ::= \"x\""], "one constraint at a time"),
    (["--grammar", "root ::= \"x\"", "--mcp", "server"],  # (before, the grammar won: the tools were never called)
     "--grammar and tools: the grammar leaves the model no way to call them, and llama.cpp refuses the two"),
    (["--grammar-file", "g.gbnf", "--functions", "t.py", "--tool-choice", "required"],
     "--grammar-file and tools: the grammar leaves the model no way to call them"),
])
def test_a_schema_or_grammar_llama_cpp_cant_take_is_one_line(args: list[str], words: str) -> None:
    done = run("-p", "x", *args)
    err = done.stderr.decode()
    assert done.returncode == 2 and words in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_ignore_eos_under_a_grammar_ends_the_reply_where_the_grammar_is_complete() -> None:
    """``--ignore-eos`` bars the end, and a complete grammar allows nothing else: llama.cpp's sampler drew
    some token anyway, its grammar threw on accepting it, and the process was killed (exit 134)."""
    done = run("-p", "Is the sky blue?", "-j", '{"type": "boolean"}', "--ignore-eos", "-n", "20", "--json")
    assert done.returncode == 0, done.stderr[-500:]
    report = json.loads(done.stdout)
    assert json.loads(report["reply"]) in (True, False) and report["stop_reason"] == "stop" and report["complete"]
    lines = [json.dumps({"id": n, "prompt": "Yes or no?", "grammar": 'root ::= "yes" | "no"', "ignore_eos": True,
                         "temp": 0.8, "seed": n}) for n in range(3)]
    done = run("--batch", "-", "-np", "2", "-n", "12", stdin="\n".join(lines).encode())
    assert done.returncode == 0, done.stderr[-500:]
    assert [json.loads(line)["reply"] in ("yes", "no") for line in done.stdout.decode().splitlines()] == [True] * 3


def test_logit_biases_that_bar_every_token_the_grammar_allows_are_one_line() -> None:
    (a,) = ours("smollm2").encode("a")
    done = run("-p", "hi", "--grammar", 'root ::= "a"', "-l", f"{a}-inf", "-n", "5")
    assert (done.returncode, done.stderr.decode()) == (2, "rml-chat: usage: -l/--logit-bias: its biases of -inf leave "
                                                       "no token the grammar allows at this point of the reply "
                                                       "(rml-chat --help lists the flags)\n")


def test_a_step_drawn_apart_to_watch_for_a_dead_end_draws_what_llama_cpp_draws(monkeypatch) -> None:
    """Under a grammar, where the biases bar a token the grammar allows (here the end, by --ignore-eos), each
    step is drawn from the candidates in Python (``Sampler.sample_short``); seeded at temperature 0.8, the
    reply is token for token the one ``llama_sampler_sample`` draws with the same chain."""
    from rml_chat.engines.base import Generation
    from rml_chat.engines.llama_sampler import Sampler

    model = load_model(str(model_path("smollm2")))
    engine = LocalEngine(model.weights, n_ctx=512, n_threads=2)
    ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Spell a word."}]))
    sampling = Sampling(temp=0.8, seed=11, max_tokens=24, ignore_eos=True)

    def reply() -> list[int]:
        engine.reset()
        return list(engine.generate(ids, sampling, model.stop_ids, Generation(), grammar='root ::= [a-z ]+'))

    try:
        drawn_apart = reply()
        monkeypatch.setattr(Sampler, "may_run_dry", lambda self: False)  # (never dry: [a-z ]+ can always go on)
        assert reply() == drawn_apart and len(drawn_apart) == 24
    finally:
        engine.close()


def _batch_lines() -> list[str]:
    lines = []
    for i in range(20):
        if i % 7 == 3:
            lines.append("{not json")
        elif i % 7 == 5:
            lines.append(json.dumps({"id": f"q{i}", "prompt": "x", "top_p": 9}))
        elif i % 7 == 6:
            lines.append(json.dumps(f"Say the number {i}."))
        else:
            lines.append(json.dumps({"id": f"q{i}", "prompt": f"Name a country, number {i}.", "max_tokens": 6,
                                     "system": "You answer with one word."}))
    lines[10] = json.dumps({"id": "yn", "prompt": "Is ice cold?", "grammar": 'root ::= "yes" | "no"'})
    lines[11] = json.dumps({"id": "person", "prompt": "A person, Kim, 41.", "schema": PERSON, "max_tokens": 80})
    return lines


def test_a_batch_of_20_lines_some_bad_gives_20_lines_in_order() -> None:
    done = run("--batch", "-", "-n", "16", stdin="\n".join(_batch_lines()).encode() + b"\n")
    out = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert len(out) == 20 and [o["line"] for o in out] == list(range(1, 21))
    bad = [o["line"] for o in out if "error" in o]
    assert bad == [4, 6, 13, 18, 20]
    assert "not JSON" in out[3]["error"]["message"] and "top_p must be a number from 0 to 1" in out[5]["error"]["message"]
    assert out[10]["reply"] in ("yes", "no") and out[10]["complete"] is True
    jsonschema.validate(json.loads(out[11]["reply"]), PERSON)
    assert done.returncode == 1 and b"not: line 4, 6, 13, 18, 20" in done.stderr
    # the shared system prompt is evaluated once: later lines take it from the cache
    shared = [o for o in out if "error" not in o and str(o["id"]).startswith("q")]
    after_another = [o for o, before in zip(out[1:], out) if o in shared and before in shared]
    assert len(after_another) >= 5 and shared[0]["prompt_tokens_reused"] < 5
    assert all(o["prompt_tokens_reused"] >= 10 for o in after_another)  # the system turn, evaluated once
    assert all(o["prompt_tokens_evaluated"] + o["prompt_tokens_reused"] == o["prompt_tokens"] for o in shared)


def test_ctrl_c_stops_a_batch_after_a_complete_line(tmp_path) -> None:
    source = tmp_path / "many.jsonl"
    source.write_text("\n".join(json.dumps(f"Write a long story, part {i}.") for i in range(50)) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "--temp", "0", "-n", "60",
                             "--batch", str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 130 and "Traceback" not in err and "interrupted after" in err
    lines = (first + rest).decode().splitlines()
    assert 1 <= len(lines) < 50 and all(json.loads(line)["line"] == n for n, line in enumerate(lines, 1))


def test_the_batch_progress_line_is_for_terminals_only() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, plain = Tty(), io.StringIO()
    for stream in (tty, plain):
        progress = _Progress(10, stream)
        progress.show(4, 40)
    assert "batch: 4/10 · " in tty.getvalue() and "tok/s" in tty.getvalue() and "s left" in tty.getvalue()
    assert plain.getvalue() == ""


def test_the_repl_takes_a_schema_and_lets_it_go(tmp_path, capsys) -> None:
    model = load_model(str(model_path("smollm2")))
    engine = LocalEngine(model.weights, n_ctx=1024, n_threads=2)
    session = ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, max_tokens=48)))
    schema = json.dumps({"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]})
    try:
        with create_pipe_input() as pipe:
            pipe.send_text(f"/schema {schema}\rName a colour.\r/schema off\r/grammar root ::= foo\r")
            pipe.close()
            assert Repl(session, input=pipe, output=DummyOutput(), history=False,
                        autosave=tmp_path / "a.json").run() == 0
    finally:
        engine.close()
    out = capsys.readouterr().out
    assert "replies follow a JSON schema now" in out and "replies are free text again" in out
    assert "error: /grammar: the grammar does not parse: Undefined rule identifier 'foo'" in out
    reply = session.conversation.messages[1].content
    assert set(json.loads(reply)) == {"colour"}
    assert session.options.constraint is None


def test_batch_needs_no_prompt_flag_and_a_readable_file() -> None:
    assert run("--batch", "/no/such.jsonl").returncode == 1
    done = run("--batch", "-", "-p", "x")
    assert done.returncode == 2 and b"--batch runs the file's prompts" in done.stderr
    assert os.environ.get("RML_CHAT_SESSIONS")  # the conftest keeps autosaves out of the user's folder
