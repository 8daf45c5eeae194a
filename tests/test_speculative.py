"""Speculative decoding: llama.cpp's n-gram drafts, checked by the model in one batch, and the reply the
model writes without them.

The check samples each drafted position with the whole sampler chain, in order, once per token written,
so the reply is the one written without a draft wherever llama.cpp computes a batch of tokens as it
computes them one at a time. Its CPU kernels don't quite (a logit moves by up to ~1.5 between the two), so
a reply may part from the other at a near tie, as llama-server's do; the tests hold every parting to that
(docs/performance.md measures how often it happens).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from conftest import model_path

from rml_chat.core.model import load_model
from rml_chat.engines.base import Generation, Sampling
from rml_chat.engines.local import LocalEngine
from rml_chat.engines.ngram_drafts import NgramCache, NgramMap, NgramMod, NgramSimple
from rml_chat.engines.speculative import (
    NGRAM_TYPES,
    SPEC_DEFAULT,
    TYPE_ORDER,
    DraftSequence,
    FirstDraft,
    Speculation,
    draft_greedily,
    spec_types,
)

CODE = "\n".join(f"def f{i}(x):\n    return x * {i} + {i * i}" for i in range(12))
PROMPTS = [f"Repeat this code exactly, renaming f3 to g3:\n```python\n{CODE}\n```",
           "List the days of the week, then list them again in the same order.",
           "Write a short story about a cat who counts stars.",
           "What is the capital of France?"]
#: a drafter of each n-gram type, its drafts checked whole (the cut to what pays, which changes only how
#: many positions are checked, has its own tests: test_draft_fit.py)
DRAFTS = [Speculation("ngram-simple", draft_fit=False, draft_n_max=5, ngram_simple_size_n=3, ngram_simple_size_m=8),
          Speculation("ngram-mod", draft_fit=False, draft_n_max=5, ngram_mod_n_match=4, ngram_mod_n_min=1,
                      ngram_mod_n_max=8),
          Speculation("ngram-map-k", draft_fit=False, ngram_map_k_size_n=3, ngram_map_k_size_m=6),
          Speculation("ngram-map-k4v", draft_fit=False, ngram_map_k4v_size_n=2, ngram_map_k4v_size_m=4)]


# ----- the drafters --------------------------------------------------------------------------------------

def test_ngram_simple_drafts_what_followed_the_latest_earlier_match() -> None:
    drafter = NgramSimple(size_n=2, size_m=3)
    history = [0, 1, 2, 3, 4, 5, 1, 2, 7, 8, 9, 6, 6, 6, 1]
    assert drafter.draft(history, 2) == [7, 8, 9]          # (the match at 6 is later than the one at 1)
    assert drafter.draft(history, 5) == []                # "1 5" never occurred
    assert drafter.draft(history[:6], 2) == []            # too short a history: llama.cpp's n + m + 1
    assert drafter.draft([0, 1, 2, 3, 9, 9, 9, 9, 1], 2) == [3, 9, 9]


def test_ngram_simple_indexed_as_the_reply_grows_drafts_what_llama_cpp_backward_scan_finds() -> None:
    """The drafter indexes each n-gram once; llama.cpp scans the history backwards at every token. Over
    replies that repeat and part from what they repeat (a small alphabet, so matches come and go), the two
    draft alike at every token."""
    import random

    def scanned(history: list[int], last: int, n: int, m: int) -> list[int]:  # common_ngram_simple_draft
        length = len(history)
        if length <= n + m + 1:
            return []
        pattern = [*history[length - n + 1:], last]
        for start in range(length - n - 1, 0, -1):
            if history[start:start + n] == pattern:
                after = min(m, length - (start + n))
                return history[start + n:start + n + after] if after >= n else []
        return []

    rng = random.Random(5)
    drafts = 0
    for n, m in ((2, 3), (3, 8), (1, 2)):
        history = [rng.randrange(4) for _ in range(30)]
        drafter = NgramSimple(size_n=n, size_m=m)
        for _ in range(300):
            last = rng.randrange(4)
            expected = scanned(history, last, n, m)
            assert drafter.draft(history, last) == expected
            drafts += bool(expected)
            history.append(last)
    assert drafts > 300  # (most tokens had a match to draft from)


def test_ngram_mod_follows_its_map_and_drafts_no_chain_shorter_than_n_min() -> None:
    history = [5, 1, 2, 3, 4, 1, 2, 3, 4] + [0] * 40
    assert NgramMod(n_match=2, n_min=1, n_max=4).draft(history, 1) == []  # "0 1" was never followed
    looped = [1, 2, 3, 4] * 12
    assert NgramMod(n_match=2, n_min=1, n_max=5).draft(looped, 1) == [2, 3, 4, 1, 2]
    assert NgramMod(n_match=2, n_min=6, n_max=5).draft(looped, 1) == []


def test_ngram_mod_forgets_its_map_after_five_poor_rounds_as_llama_cpp() -> None:
    drafter = NgramMod(n_match=2, n_min=1, n_max=3)
    looped = [1, 2, 3, 4] * 12
    assert drafter.draft(looped, 1)
    for _ in range(5):
        drafter.accepted(4, 0)
    assert drafter.draft(looped[:10], 3) == []  # (the map is empty: the history is read again in chunks of 32)


def test_ngram_map_k_drafts_from_the_first_stored_place_no_more_than_the_key_last_had_accepted() -> None:
    """llama.cpp's ngram-map-k: the prompt's latest place of a key, then a place in the reply only where
    the key had none; a key's draft shrinks to what its last draft had accepted, and one rejected at once
    drafts no more."""
    prompt = [1, 2, 10, 11, 12, 13, 1, 2, 20, 21, 22, 23] + [0] * 6
    drafter = NgramMap(size_n=2, size_m=4)
    assert drafter.draft(prompt, 2) == []  # ("0 2" is no key of the history)
    assert drafter.draft([*prompt, 1], 2) == [20, 21, 22, 23]  # (the later of the prompt's two places)
    drafter.accepted(4, 2)
    reply = [*prompt, 1, 2, 20, 21, 30, 31, 32, 33, 34, 35, 1]
    assert drafter.draft(reply, 2) == [20, 21]  # (the prompt's place stays; two were accepted)
    drafter.accepted(2, 0)
    assert drafter.draft([*reply, 2, 20, 40, 41, 42, 43, 44, 45, 1], 2) == []  # (this key drafts no more)
    assert drafter.draft([*reply, 2, 20, 40, 41, 42, 43, 44, 45, 30], 31) == [32, 33, 34, 35]  # (others do)
    short = NgramMap(size_n=2, size_m=4)
    assert short.draft([7, 8, 9, 0, 0, 0, 0, 0, 0, 0, 7], 8) == []  # (a key at 0 is never stored)


def test_ngram_map_k4v_drafts_where_one_m_gram_followed_the_key_twice_as_often_as_the_others() -> None:
    """llama.cpp's ngram-map-k4v: the m-grams after the key's places up to its stored one are counted (that
    one again at each lookup, as llama.cpp counts it); a draft only where one kind outweighs the others
    two to one, and from the ``min_hits``-th lookup on."""
    prompt = [1, 2, 7, 8, 1, 2, 5, 6, 1, 2, 7, 8, 1, 2, 7, 8] + [0] * 8
    assert NgramMap(2, 2, four_values=True).draft([*prompt, 1], 2) == [7, 8]  # (3 to 1 at its place, 12)
    split = [1, 2, 7, 8, 1, 2, 5, 6, 1, 2, 7, 8, 1, 2, 5, 6] + [0] * 8
    drafter = NgramMap(2, 2, four_values=True)
    assert drafter.draft([*split, 1], 2) == []  # (2 to 2)
    assert drafter.draft([*split, 1, 2, 0, 1], 2) == []  # (its place counted again: 3 to 2)
    assert drafter.draft([*split, 1, 2, 0, 1, 2, 0, 1], 2) == [5, 6]  # (4 to 2)
    waits = NgramMap(2, 2, four_values=True, min_hits=2)
    assert waits.draft([*prompt, 1], 2) == [] and waits.draft([*prompt, 1, 2, 7, 1], 2) == [7, 8]


def test_ngram_cache_counts_each_new_piece_on_its_own_and_drafts_from_the_longest_sure_n_gram() -> None:
    """llama.cpp's ngram-cache: the prompt counted at the first draft; then only what is new since, as a
    piece on its own (a reply written a token at a time adds nothing); the longest n-gram (4 to 1) whose
    most frequent follower passes its size's thresholds gives each token, a tie to the one seen later."""
    assert NgramCache().draft([9, 1, 2, 3, 4, 8, 1, 2, 3, 5, 8], 1) == [2, 3, 5, 8, 1, 2, 3, 5]
    assert NgramCache().draft([1, 2, 3, 1, 2, 4, 0], 1) == [2, 4, 0, 1, 2, 4, 0, 1]  # ((1, 2): 3 and 4, to 4)
    assert NgramCache().draft([5, 6, 5, 7, 0], 5) == []  # ((5,): 6 and 7 once each; a 1-gram needs two thirds)
    assert NgramCache().draft([], 5) == []
    grown, history, last = NgramCache(), [7, 8], 1
    for following in (2, 3, 4, 1, 2, 3):  # (a reply a token at a time: each piece is the one token, nothing counted)
        assert grown.draft(history, last) == []
        history, last = [*history, last], following
    assert grown.draft(history, last) == []
    assert NgramCache().draft(history, last) == [4, 1, 2, 3, 4, 1, 2, 3]  # (the same history, counted at once)


def test_several_types_are_asked_in_llama_cpp_order_until_one_drafts() -> None:
    """--spec-type with several types: llama.cpp's order whatever the order given, "none" anywhere is
    none, and the acceptance goes to the drafter that drafted."""
    assert spec_types("draft-simple,ngram-cache,ngram-simple") == ("ngram-simple", "ngram-cache", "draft-simple")
    assert spec_types("ngram-mod,none") == () and spec_types("ngram-mod,ngram-mod") == ("ngram-mod",)
    with pytest.raises(ValueError):
        spec_types("ngram-mod,eagle")

    class Fixed:
        def __init__(self, draft: list[int]):
            self.fixed, self.told = draft, []

        def draft(self, history, last):  # type: ignore[no-untyped-def]
            return self.fixed

        def accepted(self, drafted: int, accepted: int) -> None:
            self.told.append((drafted, accepted))

    empty, first, second = Fixed([]), Fixed([1, 2]), Fixed([3])
    both = FirstDraft([empty, first, second])
    assert both.draft([0], 0) == [1, 2]
    both.accepted(2, 1)
    assert (empty.told, first.told, second.told) == ([], [(2, 1)], [])
    first.fixed = []
    assert both.draft([0], 0) == [3]
    both.accepted(1, 1)
    assert second.told == [(1, 1)]
    combined = Speculation("ngram-mod,ngram-simple", ngram_simple_size_n=2)
    assert isinstance(combined.drafter(), FirstDraft) and combined.on
    assert combined.describe() == ("ngram-simple (size_n=2, size_m=48), then ngram-mod (n_match=24, n_min=48, "
                                   "n_max=64)")
    assert Speculation("ngram-mod,draft-simple").describe().endswith("then draft-simple (drafts nothing: it needs "
                                                                     "-md FILE)")


def test_the_settings_offer_every_type_and_each_of_its_sizes() -> None:
    """The flags (core/settings.py) and the drafters (NGRAM_TYPES) are two tables: --spec-type accepts
    every type the engine drafts with, and each size a type takes has its --spec-… row, which the launch
    reads into that field."""
    from rml_chat.core.settings import SETTINGS

    rows = {setting.name: setting for setting in SETTINGS}
    assert rows["spec_type"].parse.allowed == "one of " + ", ".join(("none", *TYPE_ORDER)) + \
        ", or several of them, comma-separated"
    assert set(TYPE_ORDER) == {*NGRAM_TYPES, "draft-simple"}
    for spec_type, (_, sizes) in NGRAM_TYPES.items():
        for field in sizes.values():
            assert rows[f"spec_{field}"].flags[0] == f"--spec-{field.replace('_', '-')}", spec_type
            assert rows[f"spec_{field}"].default == getattr(Speculation(), field), spec_type


def test_a_draft_is_capped_by_the_room_and_the_flags() -> None:
    assert Speculation("ngram-simple").cap([1, 2, 3, 4], room=2) == [1, 2]
    assert Speculation("ngram-simple", draft_n_max=3).cap([1, 2, 3, 4], room=9) == [1, 2, 3]
    assert Speculation("ngram-simple", draft_n_min=5).cap([1, 2, 3, 4], room=9) == []
    assert SPEC_DEFAULT.describe() == "ngram-mod (n_match=24, n_min=48, n_max=64)"


# ----- the reply, with and without drafts ----------------------------------------------------------------

def _ids(model, prompt: str) -> list[int]:  # type: ignore[no-untyped-def]
    return model.encoder.encode(model.encoder.format([{"role": "user", "content": prompt}]))


def _run(model, engine, ids, sampling, speculation, grammar=None):  # type: ignore[no-untyped-def]
    engine.speculation = speculation
    engine.reset()
    gen = Generation()
    tokens = list(engine.generate(ids, sampling, model.stop_ids, gen, grammar=grammar))
    return tokens, gen, engine.cached_ids()


SAMPLINGS = {
    "greedy": Sampling(temp=0.0, max_tokens=160),
    "greedy, penalties": Sampling(temp=0.0, repeat_penalty=1.15, frequency_penalty=0.2, max_tokens=160),
    "seeded": Sampling(seed=7, max_tokens=160),
    "another seed, top-k and min-p": Sampling(seed=1234, top_k=20, min_p=0.1, max_tokens=160),
    "seeded, penalties": Sampling(seed=3, repeat_penalty=1.15, frequency_penalty=0.2, presence_penalty=0.1,
                                  max_tokens=160),
    "seeded, DRY": Sampling(seed=5, dry_multiplier=0.8, max_tokens=160),
    "-n cuts mid-draft": Sampling(temp=0.0, max_tokens=37),
}


@pytest.mark.whitebox
@pytest.mark.parametrize("sampling", list(SAMPLINGS), ids=list(SAMPLINGS))
def test_the_reply_is_the_one_written_without_drafts(smollm, sampling: str) -> None:
    """Every prompt, each drafter: the same tokens, stop reason and cache (the rejected drafts left out of
    it), and drafts were taken. The check here evaluates each drafted position alone (the engine's
    ``_check_alone``), so that its logits are those of a reply without drafts: what is held is everything
    else (the drafts, which are accepted, the sampler chain's draws, penalties, DRY, -n, the stop, the
    cache)."""
    model, engine = smollm
    engine._check_alone = True
    try:
        accepted = 0
        for prompt in PROMPTS:
            ids = _ids(model, prompt)
            plain, plain_gen, plain_cache = _run(model, engine, ids, SAMPLINGS[sampling], Speculation())
            for speculation in DRAFTS:
                tokens, gen, cache = _run(model, engine, ids, SAMPLINGS[sampling], speculation)
                assert (tokens, gen.stop_reason) == (plain, plain_gen.stop_reason), (prompt, speculation)
                assert cache == plain_cache
                accepted += gen.accepted
        assert accepted > (50 if sampling.startswith("greedy") else 0)  # (penalties make repeats, and drafts, rare)
    finally:
        engine._check_alone = False


@pytest.mark.whitebox
def test_a_reader_that_stops_mid_draft_leaves_the_cache_as_without_drafts(smollm) -> None:
    """The session stops reading a reply (a stop string, the thought budget) wherever it likes; stopped at
    a token of an accepted draft, whose later tokens are already evaluated, the cache drops them."""
    model, engine = smollm
    ids = _ids(model, PROMPTS[0])
    engine._check_alone = True
    try:
        engine.speculation, stopped_at = DRAFTS[0], 0
        engine.reset()
        replies = engine.generate(ids, SAMPLINGS["greedy"], model.stop_ids, Generation())
        for count, _ in enumerate(replies, 1):
            if len(engine.cached_ids()) > len(ids) + count - 1:  # (ahead of the reader: a draft's later tokens)
                stopped_at = count
                break
        replies.close()
        drafted = engine.cached_ids()
        engine.speculation = Speculation()
        engine.reset()
        replies = engine.generate(ids, SAMPLINGS["greedy"], model.stop_ids, Generation())
        for count, _ in enumerate(replies, 1):
            if count == stopped_at:
                break
        replies.close()
        assert stopped_at and drafted == engine.cached_ids() and len(drafted) == len(ids) + stopped_at - 1
    finally:
        engine._check_alone = False


@pytest.mark.whitebox
def test_gemma_3_writes_the_same_reply_with_drafts() -> None:
    """The same on Gemma 3 (a SentencePiece vocabulary of 262k, and another architecture): greedy, seeded,
    and seeded with penalties and DRY, each drafted position checked alone, each drafter on three of the six
    runs."""
    model = load_model(str(model_path("gemma3")))
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2, flash_attn="off")
    engine._check_alone = True
    try:
        accepted = 0
        combos = [(sampling, prompt) for sampling in (SAMPLINGS["greedy"], SAMPLINGS["seeded"],
                                                      replace(SAMPLINGS["seeded, penalties"], dry_multiplier=0.8))
                  for prompt in PROMPTS[:2]]
        for k, (sampling, prompt) in enumerate(combos):
            ids = _ids(model, prompt)
            plain, plain_gen, plain_cache = _run(model, engine, ids, sampling, Speculation())
            for speculation in (DRAFTS[k % len(DRAFTS)], DRAFTS[(k + 2) % len(DRAFTS)]):  # (each type thrice)
                tokens, gen, cache = _run(model, engine, ids, sampling, speculation)
                assert (tokens, gen.stop_reason, cache) == (plain, plain_gen.stop_reason, plain_cache), (prompt, sampling)
                accepted += gen.accepted
        assert accepted > 50
    finally:
        engine.close()


#: each n-gram type with sizes of its own, which llama-server gets as its flags (``server_flags``), its
#: drafts checked whole as llama-server checks them
ON_SERVER = {speculation.spec_type: speculation for speculation in (
    Speculation("ngram-simple", draft_fit=False, ngram_simple_size_n=3, ngram_simple_size_m=8),
    Speculation("ngram-mod", draft_fit=False, ngram_mod_n_match=4, ngram_mod_n_min=1, ngram_mod_n_max=8),
    Speculation("ngram-map-k", draft_fit=False, ngram_map_k_size_n=3, ngram_map_k_size_m=6),
    Speculation("ngram-map-k4v", draft_fit=False, ngram_map_k4v_size_n=2, ngram_map_k4v_size_m=4,
                ngram_map_k4v_min_hits=2),
    Speculation("ngram-cache", draft_fit=False),
    Speculation("ngram-cache,ngram-mod,ngram-simple", draft_fit=False, ngram_simple_size_n=6, ngram_simple_size_m=8,
                ngram_mod_n_match=8, ngram_mod_n_min=4, ngram_mod_n_max=16))}


def server_flags(speculation: Speculation) -> list[str]:
    """llama-server's flags for the same type and sizes: ``--spec-`` and each setting's field name, as the
    settings table names them (no --spec-draft-n-max: llama.cpp caps only a draft model's drafts by it)."""
    settings = [setting for spec_type in speculation.types for setting in NGRAM_TYPES[spec_type][1].values()]
    return ["--spec-type", speculation.spec_type,
            *(flag for field in settings for flag in (f"--spec-{field.replace('_', '-')}", str(getattr(speculation, field))))]


@pytest.mark.server
@pytest.mark.parametrize("spec_type", list(ON_SERVER))
def test_each_ngram_type_drafts_and_writes_what_llama_server_does(smollm, spec_type: str) -> None:
    """llama-server with the same --spec-type (one type, or a list of them) and sizes, on the same model and
    prompt ids, greedy: the same tokens, and as many tokens drafted and accepted (its ``timings``), over
    prompts that draft a lot, a little and not at all. A fresh server for each prompt: its drafters keep
    their state from one request to the next (a reply here drafts from its own history only)."""
    model, engine = smollm
    speculation = ON_SERVER[spec_type]
    accepted = 0
    for prompt in PROMPTS[:3]:
        accepted += _as_on_server(model, engine, _ids(model, prompt), speculation, server_flags(speculation)).accepted
    assert accepted > 20


def _as_on_server(model, engine, ids: list[int], speculation: Speculation, flags: list[str]) -> Generation:  # type: ignore[no-untyped-def]
    """Our greedy reply to ``ids`` with ``speculation``, checked against a fresh llama-server's with ``flags``
    (its drafters keep their state from one request to the next): the same tokens, and as many drafted and
    accepted (its ``timings``); our reply's counts."""
    import cluster  # (scripts/, on the path: conftest puts it there)

    tokens, gen, _ = _run(model, engine, ids, SAMPLINGS["greedy"], speculation)
    served = cluster.start(model.weights, workers=0, ctx=2048, threads=2, extra=[*flags, "-fa", "off"])
    try:
        data = served.greedy(ids, SAMPLINGS["greedy"].max_tokens)
    finally:
        served.stop()
    timings = data["timings"]
    assert tokens == [t for t in data["tokens"] if t not in model.stop_ids]
    assert (gen.drafted, gen.accepted) == (timings.get("draft_n", 0), timings.get("draft_n_accepted", 0))
    return gen


def test_a_batched_check_parts_from_the_reply_only_where_the_kernels_do(smollm) -> None:
    """The check as it runs (one batch): llama.cpp's CPU kernels give a batch's logits a little otherwise
    than one token's, so a reply may part from the one written without drafts, at a near tie, as
    llama-server's do. It parts nowhere before a draft was checked, and most greedy replies not at all."""
    model, engine = smollm
    same = runs = 0
    for prompt in PROMPTS:
        ids = _ids(model, prompt)
        plain, _, _ = _run(model, engine, ids, SAMPLINGS["greedy"], Speculation())
        for speculation in DRAFTS:
            tokens, gen, _ = _run(model, engine, ids, SAMPLINGS["greedy"], speculation)
            runs, same = runs + 1, same + (tokens == plain)
            assert gen.drafted > 0 or tokens == plain
    assert same >= runs // 2, (same, runs)


def test_a_grammar_holds_under_drafts(smollm) -> None:
    model, engine = smollm
    grammar = 'root ::= "[" item ("," item){5,30} "]"\nitem ::= "\\"day " [1-7] "\\""'
    ids = _ids(model, "Give me a JSON list of days.")
    for sampling in (Sampling(temp=0.0, max_tokens=300), Sampling(seed=9, max_tokens=300)):
        plain, plain_gen, _ = _run(model, engine, ids, sampling, Speculation(), grammar)
        for speculation in DRAFTS:
            tokens, gen, _ = _run(model, engine, ids, sampling, speculation, grammar)
            assert gen.accepted > 0 and json.loads(model.tokenizer.decode(tokens))  # (whole, and held to it)
            tokens, gen, _ = _run(model, engine, ids, sampling, replace(speculation, draft_fit=True), grammar)
            assert json.loads(model.tokenizer.decode(tokens))  # (the drafts cut to what pays here)
        assert json.loads(model.tokenizer.decode(plain))


@pytest.mark.whitebox
def test_a_model_whose_memory_cannot_drop_a_draft_is_not_drafted_for() -> None:
    """(Recurrent and hybrid models: their state holds every token read; here the flag's report.)"""
    model = load_model(str(model_path("smollm2")))
    engine = LocalEngine(model.weights, n_ctx=512, n_threads=2, speculation=SPEC_DEFAULT)
    try:
        assert engine._llama.drops_part
        assert engine.report()["speculative"] == SPEC_DEFAULT.describe()
    finally:
        engine.close()


# ----- a whole turn: stops, the reasoning budget, tool calls ----------------------------------------------

CITY_WEATHER = '''
def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"Sunny, 21 C in {city}"
'''


@pytest.fixture(scope="module")
def qwq(tmp_path_factory) -> str:
    """SmolLM2 under QwQ's template: its prompt opens a thought, and it writes Qwen's tool calls."""
    from conftest import smollm_with_template

    return smollm_with_template(tmp_path_factory.mktemp("speculative") / "qwq.gguf", "Qwen-QwQ-32B")


def _turn(path: str, speculation: Speculation, message: str, sampling: Sampling, tmp_path, *,
          stop_strings: tuple[str, ...] = (), think: bool | None = None, tools: bool = False):  # type: ignore[no-untyped-def]
    """One exchange through the session and the tool loop, each drafted position checked alone: the
    messages it recorded, each step's stop reason, the drafts, the ids the cache holds after it, and the
    thought's tokens."""
    from rml_chat.core.session import ChatSession, ReasoningOptions, SessionOptions
    from rml_chat.tools import loop as tool_loop
    from rml_chat.tools.functions import load_functions
    from rml_chat.tools.toolbox import Toolbox
    from tokenizer.chat.template import ChatTemplate
    from tokenizer.chat.tool_calls import derive as derive_calls

    model = load_model(path)
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2, flash_attn="off", speculation=speculation)
    engine._check_alone = True
    try:
        session = ChatSession(model, engine, SessionOptions(sampling, ReasoningOptions(thinking=think),
                                                            stop_strings=stop_strings))
        if tools:
            (tmp_path / "weather.py").write_text(CITY_WEATHER)
            syntax, _ = derive_calls(ChatTemplate(model.tokenizer.chat_template), ["<|im_end|>"],
                                     thought_close=model.reasoning.close)
            session.options.tools = Toolbox(load_functions(str(tmp_path / "weather.py")), syntax, choice="required",
                                            approve=lambda call: True)
        result = tool_loop.exchange(session, message, lambda text: None, lambda line: None)
        steps = result.steps or [result.generation]
        return (session.conversation.messages, [step.stop_reason for step in steps],
                sum(step.drafted for step in steps), sum(step.accepted for step in steps), engine.cached_ids(),
                result.reasoning_tokens)
    finally:
        engine.close()


@pytest.mark.whitebox
def test_a_turn_cut_by_a_stop_string_or_the_thought_budget_or_calling_a_tool_is_the_same_with_drafts(qwq, tmp_path) -> None:
    """A whole turn, each way the session ends or splits a reply, with drafts and without: the same messages
    (content, thought, calls, results), the same stop reasons, and the same cache afterwards (a reply the
    session stopped reading leaves no drafted token in it)."""
    greedy = Sampling(temp=0.0, max_tokens=200)
    cases = {
        "a stop string": (str(model_path("smollm2")), PROMPTS[0], greedy, {"stop_strings": ("f7",)}),
        "the reasoning budget": (qwq, PROMPTS[1], replace(greedy, reasoning_budget=24), {"think": True}),
        "a tool call, then the answer": (qwq, "What is the weather in Paris and in Rome? Repeat the answers.",
                                         Sampling(seed=11, max_tokens=120), {"tools": True}),
    }
    drafted = 0
    for name, (path, message, sampling, how) in cases.items():
        plain = _turn(path, Speculation(), message, sampling, tmp_path, **how)
        for speculation in DRAFTS:
            with_drafts = _turn(path, speculation, message, sampling, tmp_path, **how)
            assert (with_drafts[:2], with_drafts[4:]) == (plain[:2], plain[4:]), (name, speculation)
            drafted += with_drafts[3]
        if name == "a stop string":
            assert plain[1] == ["stop_string"] and "f7" not in plain[0][-1].content
        elif name == "the reasoning budget":
            closing = len(load_model(qwq).tokenizer.encode("</think>", parse_special=True))
            assert plain[0][-1].reasoning and plain[5] == 24 + closing  # (left alone, the thought runs longer)
        else:
            assert plain[0][1].tool_calls and plain[0][2].role == "tool"
    assert drafted > 20


# ----- the chat ------------------------------------------------------------------------------------------

def test_json_reports_the_drafts_and_the_reply_is_the_same(tmp_path) -> None:
    prompt = PROMPTS[0]

    def ask(*flags: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "rml_chat", "-p", prompt, "--temp", "0", "-n", "120",
                               "-fa", "off", "--prompt-cache", "off", "--json", *flags],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    plain = ask()
    drafted = ask("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-draft-n-max", "5")
    assert plain["speculative"] == {"type": "none", "drafted": 0, "accepted": 0}
    assert drafted["reply"][:40] == plain["reply"][:40]
    assert drafted["speculative"]["type"] == "ngram-simple (size_n=3, size_m=48; drafts of 0-5 tokens)"
    assert 0 < drafted["speculative"]["accepted"] <= drafted["speculative"]["drafted"]
    default = ask("--spec-default")
    assert default["speculative"]["type"].startswith("ngram-mod (n_match=24, n_min=48, n_max=64")


def test_parallel_lines_draft_too_and_part_from_the_undrafted_replies_only_where_the_kernels_do() -> None:
    """``--batch -np``: each line drafts from its own history, in the step's one batch, or by a draft model
    with a sequence for each line; the replies are the undrafted ones but where a batch's logits part at a
    near tie (as in ``test_a_batched_check_parts...``), and a line under a schema still follows it."""
    schema = {"type": "object", "properties": {"days": {"type": "array", "items": {"type": "string"}, "maxItems": 7}},
              "required": ["days"]}
    lines = [{"id": i, "prompt": prompt} for i, prompt in enumerate(PROMPTS)]
    lines.append({"id": "schema", "prompt": "The days of the week as JSON.", "schema": schema, "max_tokens": 120})

    def run(*flags: str) -> tuple[list[dict], str]:
        done = subprocess.run([sys.executable, "-m", "rml_chat", "--batch", "-", "-np", "3", "--temp", "0", "-n", "100",
                               "-fa", "off", "--prompt-cache", "off", *flags], input="\n".join(map(json.dumps, lines)),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()], done.stderr

    plain, _ = run()
    # (checked whole: the cut to what pays, timed from the steps, moves the batches' make-up from run to run,
    # and with it where a near tie parts; it has its own test in test_draft_fit.py)
    drafted, _ = run("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-draft-n-max", "5",
                     "--spec-draft-fit", "off")
    assert [o["id"] for o in drafted] == [line["id"] for line in lines]
    assert all(o["speculative"]["drafted"] >= o["speculative"]["accepted"] for o in drafted)
    assert drafted[0]["speculative"]["accepted"] > 20 and plain[0]["speculative"]["drafted"] == 0
    assert sum(d["reply"] == p["reply"] for d, p in zip(drafted, plain)) >= len(lines) // 2
    assert all(d["reply"][:24] == p["reply"][:24] for d, p in zip(drafted, plain))
    assert set(json.loads(drafted[-1]["reply"])) == {"days"}
    with_model, said = run("-md", str(model_path("smollm2")))  # (the model drafting for itself: all taken but at ties)
    assert "Traceback" not in said and [o["id"] for o in with_model] == [line["id"] for line in lines]
    assert all(o["speculative"]["drafted"] > 0 for o in with_model)
    assert sum(o["speculative"]["accepted"] for o in with_model) >= 0.8 * sum(o["speculative"]["drafted"] for o in with_model)
    # (its drafts start at a reply's second token, and which lines share a step, so the batch's numerics, moves
    # from run to run: a near tie may part a reply early)
    assert sum(d["reply"] == p["reply"] for d, p in zip(with_model, plain)) >= len(lines) // 2
    assert set(json.loads(with_model[-1]["reply"])) == {"days"}


def test_bad_speculation_flags_are_one_line_usage_errors() -> None:
    for flags, said in ((["--spec-type", "eagle"], "--spec-type: must be one of"),
                        (["--spec-ngram-simple-size-n", "0"], "--spec-ngram-simple-size-n: must be"),
                        # (bounds that leave nothing to check: llama.cpp takes them, and never speculates)
                        (["--spec-type", "ngram-simple", "--spec-draft-n-min", "5", "--spec-draft-n-max", "3"],
                         "--spec-draft-n-min 5 is above --spec-draft-n-max 3: no draft would ever be checked"),
                        (["--spec-default", "--spec-ngram-mod-n-max", "16"],
                         "--spec-ngram-mod-n-min 48 is above --spec-ngram-mod-n-max 16: ngram-mod would never")):
        done = subprocess.run([sys.executable, "-m", "rml_chat", "-p", "hi", *flags], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_set_spec_type_switches_drafts_in_a_chat_and_a_turn_reports_them() -> None:
    """``/set spec-type`` (the session's ``apply``), then a turn that repeats the prompt's text: the turn's
    generation counts its drafts; /info's value names the type and its sizes (each type's, for a list)."""
    from conftest import smollm_session

    with smollm_session(2048, 120) as session:
        assert session.setting("spec_type") == "none"
        assert session.apply("spec_type", "ngram-simple") == ""
        assert session.setting("spec_type") == "ngram-simple (size_n=12, size_m=48)"
        result = session.turn(PROMPTS[0], lambda text: None, lambda line: None)
        assert result.generation.drafted > 0 and result.generation.accepted > 0
        assert session.apply("spec_type", "ngram-mod,ngram-cache") == ""
        assert session.setting("spec_type") == "ngram-mod (n_match=24, n_min=48, n_max=64), then ngram-cache"
        assert session.apply("spec_type", "none") == ""
        assert session.turn("Again, please.", lambda text: None, lambda line: None).generation.drafted == 0


def test_a_draft_fits_one_micro_batch() -> None:
    """``-ub 2``: a draft of one token beside the token before it, whatever the drafter offers."""
    model = load_model(str(model_path("smollm2")))
    engine = LocalEngine(model.weights, n_ctx=1024, n_threads=2, n_batch=2, n_ubatch=2,
                         speculation=Speculation("ngram-simple", ngram_simple_size_n=3))
    try:
        gen = Generation()
        tokens = list(engine.generate(_ids(model, PROMPTS[0]), Sampling(temp=0.0, max_tokens=80), model.stop_ids, gen))
        assert len(tokens) == 80 and 0 < gen.accepted <= gen.drafted
    finally:
        engine.close()


# ----- a draft model -------------------------------------------------------------------------------------

class _NextIdModel:
    """A stand-in for a draft model's context, as ``draft_greedily`` uses one: each row's logits make the
    id after the row's token the likeliest; every decode and every drop is recorded."""

    n_ctx, n_ubatch, n_vocab, drops_part = 64, 8, 100, True

    def __init__(self) -> None:
        self.decodes: list[list[tuple[int, int, int, bool]]] = []  # (token, position, sequence, logits) rows
        self.drops: list[tuple[int, int]] = []

    def decode_seqs(self, tokens, positions, seqs, logits) -> None:  # type: ignore[no-untyped-def]
        self.decodes.append(list(zip(tokens, positions, seqs, logits)))

    def logits(self, index: int):  # type: ignore[no-untyped-def]
        import numpy as np

        row = np.zeros(self.n_vocab)
        row[(self.decodes[-1][index][0] + 1) % self.n_vocab] = 1.0
        return row

    def seq_drop(self, seq: int, start: int = -1) -> None:
        self.drops.append((seq, start))


def test_a_draft_model_drafts_for_every_line_at_once_one_batch_a_drafted_position() -> None:
    """``-np``: the lines' catch-up shares micro-batches (logits at each line's last id only), then each
    drafted position is one decode with a row for each line; a line's next draft keeps what it accepted."""
    model = _NextIdModel()
    a, b, c = (DraftSequence(model, seq, 2) for seq in (1, 2, 3))  # (32 cells each)
    history_a, history_b = list(range(1, 11)), [50, 51]
    assert draft_greedily(model, [(a, history_a), (b, history_b), (c, list(range(30)))], 3) == [
        [11, 12, 13], [52, 53, 54], []]  # (c: 30 ids and a draft of 3 outgrow its 32 cells)
    assert [len(rows) for rows in model.decodes] == [8, 4, 2, 2]
    assert [(token, position, seq) for rows in model.decodes[:2] for token, position, seq, wants in rows if wants] == [
        (10, 9, 1), (51, 1, 2)]
    assert model.decodes[2:] == [[(11, 10, 1, True), (52, 2, 2, True)], [(12, 11, 1, True), (53, 3, 2, True)]]
    assert a.cached == [*history_a, 11, 12] and c.cached == []
    # a took its draft's first token and then wrote 20; b took none and wrote 60
    model.decodes.clear()
    assert draft_greedily(model, [(a, [*history_a, 11, 20]), (b, [*history_b, 60])], 2) == [[21, 22], [61, 62]]
    assert (1, 11) in model.drops and (2, 2) in model.drops
    assert model.decodes == [[(20, 11, 1, True), (60, 2, 2, True)], [(21, 12, 1, True), (61, 3, 2, True)]]


@pytest.mark.whitebox
def test_a_model_drafting_for_itself_is_accepted_whole_and_the_reply_is_the_same(smollm) -> None:
    """``draft-simple`` with SmolLM2 as its own draft model (llama.cpp's check of the overhead): every
    drafted token accepted, and, each position checked alone, the reply without drafts."""
    from rml_chat.engines.runtime import LlamaModel
    from rml_chat.engines.thread_choice import ThreadChoice

    model, engine = smollm
    draft = LlamaModel(model.weights, n_ctx=engine.n_ctx, n_batch=512, threads=ThreadChoice(2), threads_batch=None,
                       gpu=(0, "layer"), flash_attn="off")
    engine._check_alone = True
    try:
        for prompt in PROMPTS[:2]:
            ids = _ids(model, prompt)
            plain, _, _ = _run(model, engine, ids, SAMPLINGS["greedy"], Speculation())
            tokens, gen, _ = _run(model, engine, ids, SAMPLINGS["greedy"],
                                  Speculation("draft-simple", draft_fit=False, draft_model=draft))
            assert tokens == plain and gen.drafted > 0 and gen.accepted == gen.drafted
    finally:
        engine._check_alone = False
        draft.close()


def test_a_draft_model_with_another_vocabulary_is_refused_in_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "-p", "hi", "-md", str(model_path("gemma3"))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"rml-chat: model: -md {model_path('gemma3')}: this draft model can't draft for SmolLM2-135M-Instruct.Q4_1: "
        "its BOS is 2 where the model's is 1"], done.stderr


def test_a_draft_model_drafts_in_a_chat(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "-p", PROMPTS[0], "--temp", "0", "-n", "40", "--json",
                           "--prompt-cache", "off", "-md", str(model_path("smollm2"))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["speculative"]
    assert report["type"] == "draft-simple (a draft model, 3 tokens a draft)" and report["accepted"] > 0


def test_ctrl_c_cuts_a_drafted_reply_and_the_chat_goes_on(tmp_path) -> None:
    """In a real terminal with drafts on: Ctrl-C mid-reply keeps what was shown, marked cut; the stats line
    counts the drafts; the next message is answered."""
    from test_repl import Terminal

    saved = tmp_path / "cut.json"
    code = "\n".join(f"def f{i}(x):\n    return x * {i} + {i * i}" for i in range(60))
    term = Terminal(tmp_path, "--temp", "0", "-n", "3000", "-c", "4096", "--spec-type", "ngram-simple",
                    "--spec-ngram-simple-size-n", "3")
    term.prompt_ready()
    start = len(term.output)
    term.send(b"\x1b[200~Repeat this code exactly:\n```python\n" + code.encode() + b"\n```\x1b[201~\r")  # pasted
    # the prompt evaluated (the line was taken), the reply streaming, and the terminal back in cooked mode,
    # where Ctrl-C is a signal again
    term.read_until(lambda out: re.search(rb"evaluating the prompt: (\d+)/\1 tokens", out[start:]) is not None)
    accepted = len(term.output)
    time.sleep(0.8)
    term.read_until(lambda out: len(out) - accepted > 300)
    term.send(b"\x03")
    term.read_until(lambda out: b"reply cut by Ctrl-C" in out)
    term.prompt_ready()
    term.send(b"/stats\r")
    term.read_until(lambda out: re.search(rb"drafts: \d+/\d+ accepted", out[accepted:]) is not None)
    term.prompt_ready()
    term.ask(b"Say hi.", b"stop: stop")
    term.send(f"/save {saved}\r".encode())
    term.read_until(lambda out: b"saved 4 messages" in out)
    term.prompt_ready()
    assert term.finish() == 0
    messages = json.loads(saved.read_text())["messages"]
    assert messages[1]["cut"] is True and len(messages[1]["content"]) > 100
    assert messages[3]["role"] == "assistant" and messages[3]["content"] and "cut" not in messages[3]
