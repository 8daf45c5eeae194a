"""The ``reasoning`` section of scripts/bench_chat.py (not a test): a reasoning model's long chat.

SmolLM2's weights under Qwen3's template (a copy of the GGUF, written with the ``gguf`` package), made to
think by a GBNF grammar: a thought of exactly 600 letters and spaces (about 200 tokens), then an answer
of 121 (about 40 tokens); greedy, 20 turns in an 8,192-token context. (Fixed lengths, as runs of 30
characters: a bounded repetition ``{600,700}`` nests a hundred optional rules, and llama.cpp's grammar
sampler crawls.) Qwen3's template drops earlier thoughts, so each prompt differs from the cache from the
last thought on. Reported:

* per turn from turn 2, the tokens evaluated against the last answer + the new message (+ the template's
  glue): the thought is never evaluated again, nor is the history before it;
* the median time to first token of the last 5 turns over the first 5, and the same for llama.cpp alone
  (llama-cpp-python's ``Llama``, as many threads as ours, its prefix cache on) given each turn's prompt
  ids, to one token: the same tokens evaluated at the same positions, so the growth it shows is llama.cpp's
  own, not ours;
* tokens/s of the same greedy replies with the thought split off as they stream, against the same
  replies read as plain text (the model without reasoning markers), best of --repeat, as a ratio.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rml_chat.core.model import load_model
from rml_chat.core.session import (
    ChatSession,
    SessionOptions,  # noqa: E402
)
from rml_chat.core.structured import from_grammar
from rml_chat.engines.base import Sampling
from rml_chat.engines.local import LocalEngine

THINKING = ("root ::= \"<think>\\n\" " + "run " * 20 + "\"\\n</think>\\n\\n\" [A-Z] " + "run " * 4 + "\".\"\n"
            "run ::= " + "[a-z ] " * 30)
GREEDY = Sampling(temp=0.0, seed=0)
QUESTIONS = [f"Question {i}: what do you know about the number {i * 7}?" for i in range(1, 21)]


def _qwen3_copy(weights: Path, templates: Path, folder: Path) -> Path:
    target = folder / "smollm2-as-qwen3.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(weights), str(target),
                    "--chat-template-file", str(templates / "Qwen-Qwen3-0.6B.jinja"), "--force"],
                   check=True, capture_output=True)
    return target


def _chat(model, turns: list[str], prompts: list[list[int]]) -> list[tuple[float, int, int, int, int, int]]:  # type: ignore[no-untyped-def]
    """(TTFT s, evaluated, last answer's tokens, new message's tokens, thought tokens, reply tokens) per turn;
    each turn's prompt ids go into ``prompts``."""
    session = ChatSession(model, LocalEngine(model.weights, n_ctx=8192), SessionOptions(GREEDY))
    session.options.constraint = from_grammar(THINKING)
    out, last_answer = [], 0
    try:
        for text in turns:
            result = session.turn(text, lambda _: None, lambda _: None)
            prompts.append(list(session.last.prompt_ids))
            out.append((result.generation.ttft_s, result.generation.evaluated, last_answer,
                        len(model.tokenizer.encode(text)), result.reasoning_tokens, len(result.generation.tokens)))
            last_answer = len(model.tokenizer.encode(session.conversation.messages[-1].content))
    finally:
        session.engine.close()
    return out


def _llama_cpp_ttft(weights: str, prompts: list[list[int]]) -> list[float]:
    """llama.cpp alone on the same prompts, in turn, to one greedy token: seconds per turn. Its prefix cache
    keeps each prompt, so every turn evaluates what differs from the last prompt: the last answer, the new
    message and the glue, as ours does (ours also had the thought in its cache, and removed it)."""
    from llama_cpp import Llama

    threads = os.cpu_count() or 1  # ours (LocalEngine's default); Llama's own is half the cores
    llm = Llama(model_path=weights, n_ctx=8192, n_threads=threads, n_threads_batch=threads, verbose=False)
    out = []
    for ids in prompts:
        started = time.perf_counter()
        llm.create_completion(ids, max_tokens=1, temperature=0.0)
        out.append(time.perf_counter() - started)
    return out


def _tokens_per_s(model, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = 0.0
    for _ in range(repeat):
        session = ChatSession(model, LocalEngine(model.weights, n_ctx=2048), SessionOptions(GREEDY))
        session.options.constraint = from_grammar(THINKING)
        try:
            best = max(best, session.turn(QUESTIONS[0], lambda _: None, lambda _: None).generation.tokens_per_s)
        finally:
            session.engine.close()
    return best


def reasoning(weights: Path, templates: Path, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        model = load_model(str(_qwen3_copy(weights, templates, Path(folder))))
        started, prompts = time.perf_counter(), []
        turns = _chat(model, QUESTIONS, prompts)
        spent = time.perf_counter() - started
        theirs = _llama_cpp_ttft(str(model.weights), prompts)
        split = _tokens_per_s(model, repeat)
        plain = _tokens_per_s(dataclasses.replace(model, reasoning=None), repeat)
    over = [evaluated - answer - new for _, evaluated, answer, new, _, _ in turns[1:]]
    thought = statistics.mean(t[4] for t in turns)
    answer_tokens = statistics.mean(t[5] - t[4] for t in turns)
    head, tail = statistics.median(t for t, *_ in turns[:5]), statistics.median(t for t, *_ in turns[-5:])
    print(f"reasoning ({model.name}, 20 greedy turns, thoughts of {thought:.0f} tokens and answers of "
          f"{answer_tokens:.0f} on average, "
          f"{spent:.0f} s): median TTFT first 5 {head * 1000:.0f} ms, last 5 {tail * 1000:.0f} ms, ratio "
          f"{tail / head:.2f}")
    head_l, tail_l = statistics.median(theirs[:5]), statistics.median(theirs[-5:])
    print(f"  llama.cpp alone (Llama, the same prompt ids, to one token): first 5 {head_l * 1000:.0f} ms, last 5 "
          f"{tail_l * 1000:.0f} ms, ratio {tail_l / head_l:.2f}")
    print(f"  evaluated per turn from turn 2, beyond the last answer and the new message (the template's glue): "
          f"max {max(over)}, {over}")
    print(f"  tokens/s with the thought split off: {split:.1f}, read as plain text: {plain:.1f}, ratio "
          f"{split / plain:.3f}")
