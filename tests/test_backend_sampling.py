"""Backend sampling (``-bs``, llama.cpp's experimental ``--backend-sampling``): the sampler chain runs in the
model's graph, on the device that holds the model, and only the drawn id comes back.

On this CPU build the graph runs on the CPU too, so what these tests hold is everything but the speed: the
same chain draws the same ids as without it wherever the stages hand their candidates on in the same order
(greedy, the default chain; llama-server with the same flag is the oracle for every chain:
test_remote.py), drafts are checked as without it, a grammar keeps the draw on the CPU, and each turn
attaches its chain to the context and takes it off again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import model_path, smollm_session
from test_speculative import DRAFTS, PROMPTS, _ids, _run

from rml_chat.core.model import load_model
from rml_chat.engines.base import Sampling
from rml_chat.engines.local import LocalEngine
from rml_chat.engines.speculative import Speculation

#: chains every stage of which the device runs (at these settings), drawn with and without -bs
WHOLE_ON_DEVICE = {"greedy": Sampling(temp=0.0, max_tokens=120), "seeded": Sampling(seed=7, max_tokens=120),
                   "seeded, top-k and min-p": Sampling(seed=1234, top_k=20, min_p=0.1, max_tokens=120)}


def test_the_whole_chain_draws_on_the_device_the_ids_it_draws_on_the_cpu(smollm) -> None:
    """Greedy, seeded and seeded top-k/min-p: every token (the stop id too) drawn in the graph, the same
    reply as the chain run on the CPU; a chain with DRY on stops at DRY, which the device can't run, and
    draws every token here (the same reply again: the stages before it are off)."""
    model, engine = smollm
    ids = _ids(model, PROMPTS[2])
    for name, sampling in WHOLE_ON_DEVICE.items():
        plain, plain_gen, _ = _run(model, engine, ids, sampling, Speculation())
        tokens, gen, _ = _run(model, engine, ids, replace(sampling, backend_sampling=True), Speculation())
        assert (tokens, gen.stop_reason) == (plain, plain_gen.stop_reason) and len(tokens) > 20, name
        assert gen.on_device >= len(tokens) and plain_gen.on_device == 0, name
    dry = Sampling(seed=5, dry_multiplier=0.8, max_tokens=60)
    plain, _, _ = _run(model, engine, ids, dry, Speculation())
    tokens, gen, _ = _run(model, engine, ids, replace(dry, backend_sampling=True), Speculation())
    assert tokens == plain and gen.on_device == 0


def test_a_grammar_keeps_the_draw_here_and_the_next_turn_draws_on_the_device_again(smollm) -> None:
    """llama.cpp refuses a grammar with backend sampling: that turn's chain is not attached, the grammar
    holds; the turns before and after it attach theirs and take it off at the end (five turns in a row
    on one context)."""
    model, engine = smollm
    grammar = 'root ::= "[" item ("," item){2,6} "]"\nitem ::= "\\"day " [1-7] "\\""'
    sampling = Sampling(seed=9, max_tokens=80, backend_sampling=True)
    for turn in range(5):
        if turn % 2:
            tokens, gen, _ = _run(model, engine, _ids(model, "Give me a JSON list of days."), sampling, Speculation(),
                                  grammar)
            days = json.loads(model.tokenizer.decode(tokens))
            assert gen.on_device == 0 and all(day.startswith("day ") for day in days)
        else:
            tokens, gen, _ = _run(model, engine, _ids(model, PROMPTS[3]), sampling, Speculation())
            assert gen.on_device >= len(tokens) > 0


@pytest.mark.whitebox
def test_drafts_are_checked_on_the_device_as_without_it_where_the_context_was_made_for_them() -> None:
    """An engine loaded with drafts on gives a decode several logits per sequence, as llama-server's with a
    speculative type: the chain's draws stay in step over a draft's positions (llama.cpp's transactional
    ``dist``), so each drafter writes the reply written without drafts, every token drawn on the device.
    (Each drafted position is evaluated alone, as in test_speculative.py: its logits are a reply's without
    drafts; the batched check parts at near ties as without -bs.)"""
    model = load_model(str(model_path("smollm2")))
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2, flash_attn="off", speculation=DRAFTS[0])
    engine._check_alone = True
    try:
        accepted = 0
        for prompt in PROMPTS[:2]:
            ids = _ids(model, prompt)
            for name, sampling in WHOLE_ON_DEVICE.items():
                sampling = replace(sampling, backend_sampling=True)
                plain, plain_gen, _ = _run(model, engine, ids, sampling, Speculation())
                for speculation in DRAFTS:
                    tokens, gen, _ = _run(model, engine, ids, sampling, speculation)
                    assert (tokens, gen.stop_reason) == (plain, plain_gen.stop_reason), (prompt, name, speculation)
                    assert gen.on_device >= len(tokens) and plain_gen.on_device >= len(plain)
                    accepted += gen.accepted
        assert accepted > 100
    finally:
        engine.close()


def test_drafts_turned_on_in_a_chat_made_without_them_draw_on_the_cpu() -> None:
    """A context made without drafts gives a sequence one logits per decode (llama-server's limit, which
    lets the penalties run on the device); a draft's check needs more, so a turn that drafts draws here:
    it counts none drawn there."""
    with smollm_session(2048, 80, backend_sampling=True) as session:
        plain = session.turn(PROMPTS[1], lambda text: None, lambda line: None).generation
        assert plain.on_device >= len(plain.tokens) > 0
        assert session.apply("spec_type", "ngram-simple") == ""
        drafted = session.turn(PROMPTS[0], lambda text: None, lambda line: None).generation
        assert drafted.accepted > 0 and drafted.on_device == 0


def test_the_flag_reaches_the_chat_and_each_batch_line_reports_its_draws() -> None:
    """``-bs`` alone means on; ``--json`` counts the tokens drawn on the device for each line of an
    ``-np 3`` batch (a line under a schema draws here: 0); a batch line takes JSON's true and false too;
    a bad value is a usage error."""
    model = str(model_path("smollm2"))
    lines = [{"prompt": "Name a colour.", "seed": 1}, {"prompt": "Name a fruit.", "seed": 2, "backend_sampling": "on"},
             {"prompt": "A colour as JSON.", "schema": {"type": "object", "properties": {"c": {"type": "string"}},
                                                        "required": ["c"]}}]
    done = subprocess.run([sys.executable, "-m", "rml_chat", model, "--batch", "-", "-np", "3", "-n", "12", "-bs"],
                          input="\n".join(map(json.dumps, lines)) + "\n", capture_output=True, text=True, timeout=300)
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert [o["sampling"]["backend_sampling"]["value"] for o in out] == [True] * 3
    booleans = "".join(json.dumps({"prompt": "Hi", "max_tokens": 2, "backend_sampling": value}) + "\n"
                       for value in (False, True, "yes"))  # (JSON's booleans, as on and off)
    said = [json.loads(line) for line in subprocess.run([sys.executable, "-m", "rml_chat", model, "--batch", "-"],
                                                        input=booleans, capture_output=True, text=True,
                                                        timeout=300).stdout.splitlines()]
    assert [line["sampling"]["backend_sampling"]["value"] for line in said[:2]] == [False, True]
    assert said[2]["error"]["message"] == "backend_sampling must be one of on, off, not 'yes'"

    drawn = [o["backend_sampling"]["tokens_drawn_on_device"] for o in out]
    assert drawn[0] >= out[0]["completion_tokens"] > 0 and drawn[1] >= out[1]["completion_tokens"] > 0 and drawn[2] == 0
    single = json.loads(subprocess.run([sys.executable, "-m", "rml_chat", model, "-p", "Hi", "-n", "4", "--temp", "0",
                                        "--json"], capture_output=True, text=True, timeout=300).stdout)
    assert "backend_sampling" not in single and single["sampling"]["backend_sampling"]["value"] is False
    bad = subprocess.run([sys.executable, "-m", "rml_chat", model, "-p", "Hi", "--backend-sampling", "gpu"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--backend-sampling: must be one of on, off, not 'gpu'" in bad.stderr


def test_set_turns_it_on_in_a_chat_and_stats_counts_the_draws(tmp_path) -> None:
    """In a real terminal: /set backend-sampling on, a reply, and /stats says how many of its tokens were
    drawn on the device (all of them, and the stop id); /info lists the setting."""
    import re

    from test_repl import Terminal

    term = Terminal(tmp_path, "--temp", "0", "-n", "12")
    term.prompt_ready()
    term.send(b"/set backend-sampling on\r")
    term.prompt_ready()
    term.ask(b"Name a colour.", b"stop: ")
    start = len(term.output)
    term.send(b"/stats\r")
    term.read_until(lambda out: re.search(rb"drawn on the device: \d+", out[start:]) is not None)
    drawn, tokens = (int(re.search(pattern, term.output[start:]).group(1))
                     for pattern in (rb"drawn on the device: (\d+)", rb"(\d+) tokens? at"))
    term.prompt_ready()
    term.send(b"/info\r")
    term.read_until(lambda out: b"backend-sampling=on" in out[start:])
    term.prompt_ready()
    assert term.finish() == 0
    assert drawn >= tokens > 0
