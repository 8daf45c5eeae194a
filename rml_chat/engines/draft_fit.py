"""Drafts cut to what checking them costs here (``--spec-draft-fit``, on by default).

Checking a draft of ``L`` tokens is one evaluation of ``L + 1`` positions. On a GPU that costs about what
one position costs, so a long draft pays even where the model takes little of it. On CPU cores each further
position costs about half a one-position step (SmolLM2 on two cores: 9 ms for one position, 70 ms for 16),
so a drafted position pays only where the model is likely to take it. llama.cpp checks whatever its drafter
guessed, which on a CPU can make a reply slower with drafts than without: ngram-mod drafts 48 to 64 tokens,
and where the model repeats a sentence with a new number in it, it takes a dozen of them.

So each draft is cut to the length ``L`` that is expected to write the most tokens a second::

    rate(L) = (1 + S(1) + ... + S(L)) / (1 + extra * L)

- ``extra``: what one more position adds to a step, as a share of a one-position step, learned from the
  reply's own steps (``StepCosts``; recent steps weigh most, so a machine that gets busy is followed).
- ``S(i)``: the chance that the model takes the draft's first ``i`` tokens, from the drafts checked so far
  (``DraftFit``): for each position, how often a draft reached it and how often the model rejected it
  there, recent drafts weighing most. A position seen rarely leans on the rate over all positions, and
  with nothing seen yet a draft is checked whole, as llama.cpp checks it.
- ``L = 0``, no draft, where no length beats a one-position step (``rate(0) = 1``).

With ``--batch -np`` the lines' drafts share a step, which writes a token for each line anyway: the cost is
a share of that step, and the positions of all the drafts are weighed together (``fitted_lengths``).

The reply is the same either way: the draft is checked as llama.cpp checks it, and a shorter draft only
means more, smaller checks. A worked example, two positions' worth of cost for a draft the model took 3 of
before rejecting it, and another it took whole::

    >>> costs = StepCosts()
    >>> costs.record(1, 0.010); costs.record(9, 0.050)  # a step of one position, then of nine
    >>> round(costs.extra(), 2)  # each further position: half a step
    0.5
    >>> fit = DraftFit(costs)
    >>> fit.length(8)  # nothing seen yet: the whole draft
    8
    >>> fit.record(checked=8, accepted=3)
    >>> fit.length(8)  # the fourth token is likely rejected again
    3
"""

from __future__ import annotations


class StepCosts:
    """What an evaluation of ``k`` positions costs on this machine, as a line: ``one`` second for a step of
    one position, and ``extra()`` of that for each further position. Learned from the steps timed: each
    new one-position step moves ``one`` a tenth of the way, and the further positions' time is a sum in
    which each earlier drafted step counts ``MEMORY`` times less than the next.

    A one-position step makes the drafted steps count ``FORGET`` times less too, and once they weigh less
    than one position the cost is not known any more: the next draft is checked whole and timed again. So
    one slow moment (a first batch, another program's burst) can't stop drafting for good."""

    MEMORY, FORGET = 0.9, 0.95

    def __init__(self) -> None:
        self.one = 0.0          # seconds for a step of one position (0: none timed yet)
        self._further_time = 0.0       # seconds of drafted steps beyond ``one``, decayed
        self._further_positions = 0.0  # their positions beyond the first, decayed

    def record(self, positions: int, seconds: float) -> None:
        """A step of ``positions`` evaluated and its first token sampled in ``seconds``."""
        if positions == 1:
            self.one = seconds if not self.one else self.one + (seconds - self.one) / 10
            self._further_time *= self.FORGET
            self._further_positions *= self.FORGET
        elif self.one:
            self._further_time = self.MEMORY * self._further_time + max(0.0, seconds - self.one)
            self._further_positions = self.MEMORY * self._further_positions + positions - 1

    def extra(self) -> float | None:
        """One more position's cost as a share of a one-position step (None: not timed yet)."""
        if not self.one or self._further_positions < 1:
            return None
        return self._further_time / self._further_positions / self.one


class DraftFit:
    """The length each draft of one reply is checked at (see the module's docstring).

    Positions are counted from 1, the draft's first token. ``_reached[i - 1]`` weighs the drafts whose
    position ``i`` was checked (they were that long, and the model took the ``i - 1`` before it);
    ``_rejected[i - 1]`` those the model rejected at ``i``. Each draft offered (checked or not) makes the
    earlier ones count ``MEMORY`` times less, so a reply that moves from copying code to writing prose
    is followed within a few drafts, and a length cut to nothing is tried again. The chance of rejection
    at a position is shrunk towards the rate over all positions by ``PRIOR`` drafts' worth, and that rate
    towards none (with nothing seen, every draft is taken whole)."""

    MEMORY, PRIOR = 0.7, 0.5

    def __init__(self, costs: StepCosts):
        self.costs = costs
        self._reached: list[float] = []
        self._rejected: list[float] = []

    def length(self, offered: int) -> int:
        """How many of the ``offered`` draft's tokens to check: 0 to ``offered``."""
        chances = self.chances(offered)
        extra = self.costs.extra()
        if extra is None or extra <= 0:
            return offered
        return fitted_lengths([chances], extra)[0]

    def chances(self, offered: int) -> list[float]:
        """``S(1)`` to ``S(offered)``: the chance that the model takes the draft's first ``i`` tokens. Asking
        counts as a draft offered (the earlier ones weigh ``MEMORY`` times less)."""
        self._reached = [weight * self.MEMORY for weight in self._reached]
        self._rejected = [weight * self.MEMORY for weight in self._rejected]
        overall = sum(self._rejected) / (sum(self._reached) + self.PRIOR)
        chances, taken = [], 1.0
        for i in range(offered):
            reached, rejected = (self._reached[i], self._rejected[i]) if i < len(self._reached) else (0.0, 0.0)
            taken *= 1 - (rejected + self.PRIOR * overall) / (reached + self.PRIOR)
            chances.append(taken)
        return chances

    def record(self, checked: int, accepted: int) -> None:
        """The model took ``accepted`` of the ``checked`` draft's tokens."""
        grow = min(checked, accepted + 1) - len(self._reached)
        if grow > 0:
            self._reached += [0.0] * grow
            self._rejected += [0.0] * grow
        for i in range(min(checked, accepted + 1)):
            self._reached[i] += 1
        if accepted < checked:
            self._rejected[accepted] += 1


def fitted_lengths(chances: list[list[float]], extra: float, sure: int = 1) -> list[int]:
    """How much of each of several drafts to check in one step, the step that writes the most tokens a
    second; ``chances[k]``: draft ``k``'s ``S(1)``, ``S(2)``, … (``DraftFit.chances``), ``extra``: one more
    position's cost as a share of the step without drafts, which writes ``sure`` tokens (one a reply: one
    for the reply, one for each ``-np`` line in the batch)::

        rate = (sure + the chances of the positions checked) / (1 + extra * the positions checked)

    Positions are taken in the order of their chance, the likeliest first (along a draft its chances
    fall, so each draft keeps a start), as long as the rate grows. One draft, ``sure`` 1, is the module's
    ``rate(L)``. Where four tokens are written anyway, a position must be likelier to pay: the draft
    checked whole alone loses its third position in a step of four lines (at the same ``extra``)::

        >>> fitted_lengths([[0.9, 0.6, 0.3]], 0.1), fitted_lengths([[0.9, 0.6, 0.3], [0.95, 0.9]], 0.1, sure=4)
        ([3], [2, 2])
    """
    ranked = sorted(((chance, k) for k, draft in enumerate(chances) for chance in draft), key=lambda pair: -pair[0])
    lengths, best = [0] * len(chances), [0] * len(chances)
    written, best_rate = float(sure), float(sure)
    for checked, (chance, k) in enumerate(ranked, 1):
        written += chance
        lengths[k] += 1
        rate = written / (1 + extra * checked)
        if rate > best_rate:
            best, best_rate = list(lengths), rate
    return best
