"""Drafts cut to what checking them costs (engines/draft_fit.py, ``--spec-draft-fit``): the cut follows the
costs and the model's acceptance, and a reply with cut drafts is the one written without drafts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_speculative import PROMPTS, SAMPLINGS, _ids, _run

from rml_chat.engines.draft_fit import DraftFit, StepCosts, fitted_lengths
from rml_chat.engines.speculative import Speculation


def _costs(extra: float) -> StepCosts:
    """Steps of one position at 10 ms, and of nine at ``1 + 8 * extra`` times that."""
    costs = StepCosts()
    costs.record(1, 0.010)
    costs.record(9, 0.010 * (1 + 8 * extra))
    return costs


def test_step_costs_learn_each_further_position_as_a_share_of_one() -> None:
    costs = StepCosts()
    assert costs.extra() is None
    costs.record(5, 0.030)  # (a drafted step before any one-position step: nothing to compare it with)
    assert costs.extra() is None
    costs.record(1, 0.010)
    costs.record(5, 0.030)
    assert costs.extra() == pytest.approx(0.5)
    for _ in range(60):  # the machine gets busy: drafted steps cost more, and the share follows them
        costs.record(5, 0.050)
    assert costs.extra() == pytest.approx(1.0, rel=0.01)


def test_without_drafted_steps_the_cost_is_forgotten_and_the_next_draft_checked_whole() -> None:
    """A cost so high that nothing is drafted is not kept for good: one-position steps age it until it is
    unknown, and the fit checks the next draft whole, which times it again."""
    costs = StepCosts()
    costs.record(1, 0.010)
    costs.record(9, 0.500)  # (a slow first batch: each further position six steps' worth)
    fit = DraftFit(costs)
    assert fit.length(8) == 0
    steps = 0
    while fit.length(8) == 0:
        costs.record(1, 0.010)
        steps += 1
    assert 20 < steps < 100 and costs.extra() is None and fit.length(8) == 8


def test_with_nothing_seen_or_no_cost_known_a_draft_is_checked_whole() -> None:
    assert DraftFit(StepCosts()).length(48) == 48
    assert DraftFit(_costs(0.5)).length(48) == 48
    fit = DraftFit(StepCosts())
    fit.record(48, 0)
    assert fit.length(48) == 48  # (no cost known: llama.cpp's whole draft)


def test_on_cpu_costs_a_draft_the_model_keeps_rejecting_at_one_place_is_cut_before_it() -> None:
    fit = DraftFit(_costs(0.5))
    fit.length(48)
    fit.record(48, 12)
    lengths = [fit.length(48)]
    assert 0 < lengths[0] <= 12  # (one draft seen: the positions before the rejection are not sure yet)
    fit.record(lengths[0], min(lengths[0], 12))
    for _ in range(20):  # (a cut draft taken whole: nothing learnt past 12, so now and then a longer one)
        lengths.append(fit.length(48))
        fit.record(lengths[-1], min(lengths[-1], 12))
    assert lengths.count(12) >= 15 and max(lengths) < 48


def test_on_gpu_costs_the_same_rejections_cut_less() -> None:
    """A further position at a hundredth of a step: drafts stay longer than what the model took, where
    each extra position is a cheap try that the model goes on further this time."""
    fit = DraftFit(_costs(0.01))
    lengths = []
    for _ in range(8):
        lengths.append(fit.length(48))
        fit.record(lengths[-1], min(lengths[-1], 12))
    assert lengths[0] == 48 and min(lengths) > 12 and lengths[-1] < 48


def test_a_drafter_that_is_always_wrong_stops_drafting_and_tries_again_later() -> None:
    fit = DraftFit(_costs(0.5))
    for _ in range(3):
        fit.length(8)
        fit.record(8, 0)
    assert fit.length(8) == 0
    lengths = [fit.length(8) for _ in range(10)]  # (offered, not checked: the rejections age)
    assert lengths[0] == 0 and 0 < lengths[-1] < 8


def test_a_model_that_takes_every_draft_has_them_checked_whole() -> None:
    fit = DraftFit(_costs(0.5))
    for _ in range(10):
        assert fit.length(64) == 64
        fit.record(64, 64)


class _Cpu(StepCosts):
    """A CPU's costs, fixed (a further position: half a step), whatever the steps here take."""

    def record(self, positions: int, seconds: float) -> None:
        pass

    def extra(self) -> float:
        return 0.5


@pytest.mark.whitebox
def test_cut_drafts_write_the_reply_written_without_drafts_and_check_fewer_positions(smollm) -> None:
    """The engine's loop with a CPU's costs: the same tokens, stop reason and cache as without drafts (each
    drafted position checked alone, as in test_speculative.py), fewer positions checked than with the
    drafts whole, and a larger share of them taken."""
    model, engine = smollm
    engine._check_alone, kept = True, engine._step_costs
    engine._step_costs = _Cpu()
    whole = fitted = (0, 0)
    try:
        for prompt in PROMPTS[:3]:  # (a rewrite, a list and a story: drafts of 2-gram matches, often wrong)
            ids = _ids(model, prompt)
            plain, plain_gen, plain_cache = _run(model, engine, ids, SAMPLINGS["greedy"], Speculation())
            for draft_fit in (False, True):
                speculation = Speculation("ngram-simple", draft_fit=draft_fit, ngram_simple_size_n=2)
                tokens, gen, cache = _run(model, engine, ids, SAMPLINGS["greedy"], speculation)
                assert (tokens, gen.stop_reason, cache) == (plain, plain_gen.stop_reason, plain_cache), prompt
                counts = (gen.drafted, gen.accepted)
                if draft_fit:
                    fitted = (fitted[0] + counts[0], fitted[1] + counts[1])
                else:
                    whole = (whole[0] + counts[0], whole[1] + counts[1])
    finally:
        engine._check_alone, engine._step_costs = False, kept
    assert whole[1] > 20 and fitted[1] > 0, (whole, fitted)
    assert fitted[0] < whole[0] and fitted[1] / fitted[0] > whole[1] / whole[0], (whole, fitted)


def test_several_drafts_in_one_step_keep_their_likeliest_positions_while_the_step_writes_more_a_second() -> None:
    assert fitted_lengths([[0.9, 0.8]], 0.0) == [2]  # (a position that costs nothing always pays)
    assert fitted_lengths([[1.0, 1.0, 1.0]], 0.5, sure=8) == [0]  # (8 tokens a step: 1 for half a step's cost loses)
    assert fitted_lengths([[0.99, 0.2], [0.9, 0.85, 0.1]], 0.1, sure=2) == [1, 2]
    # the more lines a step writes anyway, the likelier a position must be to pay
    lengths = [sum(fitted_lengths([[0.95, 0.9, 0.8, 0.6, 0.4]], 0.1, sure=sure)) for sure in (1, 2, 4, 8)]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] > lengths[-1], lengths


def test_parallel_lines_cut_their_drafts_to_what_pays_beside_the_other_lines() -> None:
    """``--batch -np 3`` with 2-gram keys (drafts often wrong): with the cut, each step weighs each line's
    positions against the tokens the batch writes anyway; fewer positions are checked than with the drafts
    whole, a larger share of them is taken, and every line answers."""
    lines = "\n".join(json.dumps({"id": i, "prompt": prompt}) for i, prompt in enumerate(PROMPTS)) + "\n"

    def run(*flags: str) -> list[dict]:
        done = subprocess.run([sys.executable, "-m", "rml_chat", "--batch", "-", "-np", "3", "--temp", "0", "-n", "100",
                               "--prompt-cache", "off", "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2",
                               *flags], input=lines, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    counts = {}
    for fit in ("on", "off"):
        out = run("--spec-draft-fit", fit)
        assert [o["id"] for o in out] == list(range(len(PROMPTS))) and all(o["reply"] for o in out)
        counts[fit] = (sum(o["speculative"]["drafted"] for o in out), sum(o["speculative"]["accepted"] for o in out))
    (cut, cut_taken), (whole, whole_taken) = counts["on"], counts["off"]
    assert whole_taken > 20 and cut_taken > 0, counts
    assert cut < whole and cut_taken / cut > whole_taken / whole, counts
