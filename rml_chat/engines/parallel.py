"""Parallel sequences (``--batch -np N``): N replies decoded together, one ``llama_decode`` a step, under
different sequence ids of one context, as llama-server's slots are.

Each line still runs through its own chat session (its turn: formatting, stop strings, thoughts, the
verdict on a schema); what is shared is the engine. ``Decoder`` owns the llama.cpp context and runs in
its own thread; each session holds a ``Slot`` (the ``Engine`` protocol) whose ``generate`` hands the prompt
to the decoder and yields the ids sampled for it. A step gathers, for every sequence, its next token (or
a piece of its prompt) into one batch, decodes it, and samples each sequence that has logits with its own
sampler chain (its settings, seed and grammar)::

    seq 0   [system prompt]                       evaluated once, copied to each line (llama_memory_seq_cp)
    seq 1   [system prompt][line 1 ...] -> token   \\
    seq 2   [system prompt][line 2 ...] -> token    } one batch a step
    seq 3   [system prompt][line 3 ...] -> token   /

With an n-gram ``--spec-type`` on, a line whose history offers a draft puts the draft after its token in
the same batch and is sampled position by position as a single reply is (``LocalEngine._checked``); its
rejected cells are dropped at once. A draft model (``-md``) has a context with a sequence for each line too
(``speculative.DraftSequence``), and drafts for all the lines that want one at once, one batch of the draft
model a drafted position (``speculative.draft_greedily``), before the step's batch. Unless
``--spec-draft-fit off``, the step's drafts are then cut together to what pays beside the tokens the lines
write anyway (``draft_fit.fitted_lengths``), what a drafted position costs timed from the decoder's steps.

When a line is done its cells are dropped and the next line starts there. The shared prefix (seq 0) is
the common prefix of the first two prompts, when 16 tokens or more. Sequences share every cell of the
context (``kv_unified``); each line may use (n_ctx - the shared prefix) / N of it.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from .base import RANDOM_SEED, Generation, Progress, Sampling, Shifted, common_prefix
from .draft_fit import DraftFit, StepCosts, fitted_lengths
from .runtime import LlamaModel, Sampler
from .sampler_chain import stages
from .speculative import NO_SPECULATION, Drafter, DraftSequence, Speculation, checked, draft_greedily

SHARED_AT_LEAST = 16
_DONE = object()


@dataclass
class _Stream:
    prompt: list[int]
    sampling: Sampling
    stops: set[int]
    grammar: str | None
    gen: Generation
    out: queue.Queue = field(default_factory=queue.Queue)
    cancelled: bool = False
    seq: int = 0
    pending: list[int] = field(default_factory=list)  # prompt ids not evaluated yet
    position: int = 0
    budget: int = 0
    sampler: Sampler | None = None
    last: int | None = None  # the id sampled last, to decode next
    drafter: Drafter | None = None  # its n-gram types' (the draft model's drafts: ``Decoder._drafts``)
    draft_place: DraftSequence | None = None  # its sequence in the draft model's context (-md)
    drafted_by_model: bool = False  # whether the draft model made the step's draft
    offered: int = 0  # the length of the step's draft before the cut to what pays
    fit: DraftFit | None = None  # what its drafts' tokens were taken, for the cut (--spec-draft-fit)
    history: list[int] = field(default_factory=list)  # the drafts' source: the prompt, the reply before ``last``

    @property
    def drafting(self) -> bool:
        """Whether the line drafts (its n-gram types, or the draft model)."""
        return self.drafter is not None or self.draft_place is not None


class Decoder:
    """The context's owner: streams in, one batch a step, ids out (module docstring)."""

    def __init__(self, llama: LlamaModel, slots: int, speculation: Speculation = NO_SPECULATION):
        self.llama, self.slots = llama, slots
        self.speculation = speculation if llama.drops_part else NO_SPECULATION
        if getattr(speculation.draft_model, "n_seq", 1) <= slots:  # (a draft model drafts for the lines only
            self.speculation = replace(self.speculation, draft_model=None)  # with a sequence for each: launch.py)
        self._incoming: queue.Queue = queue.Queue()
        self._active: list[_Stream] = []
        self._free = list(range(1, slots + 1))
        self._shared: list[int] = []   # the ids seq 0 holds
        self._previous: list[int] | None = None
        self._step_costs = StepCosts()  # a step of the lines' tokens, and each drafted position beside them
        self.n_ctx = llama.n_ctx
        self._thread = threading.Thread(target=self._run, name="decoder", daemon=True)
        self._thread.start()

    def submit(self, stream: _Stream) -> None:
        self._incoming.put(stream)

    def _run(self) -> None:
        while True:
            stream = None
            if not self._active or (self._free and not self._incoming.empty()):
                try:
                    stream = self._incoming.get(timeout=None if not self._active else 0)
                except queue.Empty:
                    stream = None
            try:
                if stream is not None:
                    self._start(stream)
                    stream = None
                    continue
                self._step()
            except Exception as err:  # every waiting line hears of it, none hangs
                for waiting in [*self._active, *([stream] if stream is not None else [])]:
                    waiting.out.put(err)
                self._active.clear()

    def _start(self, stream: _Stream) -> None:
        if not self._free:
            self._incoming.put(stream)
            return
        prompt = stream.prompt
        if not self._shared and self._previous is not None:
            shared = common_prefix(self._previous, prompt[:-1])
            if shared >= SHARED_AT_LEAST:
                self._evaluate_shared(prompt[:shared])
        self._previous = prompt
        shared = min(common_prefix(self._shared, prompt), len(prompt) - 1)
        stream.seq = self._free.pop(0)
        if shared:
            self.llama.seq_copy(0, stream.seq, shared)
        stream.pending, stream.position = prompt[shared:], shared
        room = (self.n_ctx - len(self._shared)) // self.slots - len(stream.pending)
        stream.budget = stream.gen.begin(prompt, shared + room + len(stream.pending), stream.sampling)
        stream.gen.to_evaluate = len(stream.pending)
        s = stream.sampling
        seed = s.seed if s.seed >= 0 else random.randrange(RANDOM_SEED)
        stream.drafter, stream.history = self.speculation.drafter(model=False), list(prompt)
        model = self.speculation.draft_model
        if model is not None and "draft-simple" in self.speculation.types:
            stream.draft_place = DraftSequence(model, stream.seq, self.slots)
        if stream.drafting and self.speculation.draft_fit:
            stream.fit = DraftFit(self._step_costs)
        stream.sampler = self.llama.sampler(stages(replace(s, seed=seed), grammar=stream.grammar is not None,
                                                   stop_ids=sorted(stream.stops)), stream.grammar,
                                            history=prompt, seq=stream.seq, on_device=s.backend_sampling,
                                            drafting=stream.drafting)
        if stream.budget <= 0:
            self._finish(stream)
            return
        self._active.append(stream)

    def _evaluate_shared(self, ids: list[int]) -> None:
        for start in range(0, len(ids), self.llama.n_batch):
            chunk = ids[start:start + self.llama.n_batch]
            self.llama.decode_seqs(chunk, range(start, start + len(chunk)), [0] * len(chunk), [False] * len(chunk))
        self._shared = list(ids)

    def _step(self) -> None:
        tokens, positions, seqs, logits = [], [], [], []
        owners: list[tuple[_Stream, int, list[int]]] = []  # (a stream to sample, its first logits' index, its draft)
        room = self.llama.n_batch
        drafts = self._fitted(self._drafts())
        prompt_rows = False
        for stream in list(self._active):
            if stream.cancelled:
                self._finish(stream)
                continue
            draft: list[int] = []
            if stream.last is not None:
                draft = self.speculation.cap(drafts.get(stream.seq, []), room - 1)
                take = [stream.last, *draft]
            else:
                take = stream.pending[:max(room - 1, 1)] if room > 0 else []
                stream.pending = stream.pending[len(take):]
                stream.gen.evaluated += len(take)
                prompt_rows = prompt_rows or bool(take)
            if not take or room < len(take):
                continue
            room -= len(take)
            if stream.last is not None and stream.drafting:
                stream.history.append(stream.last)
            wants = stream.last is not None or not stream.pending
            for i, token in enumerate(take):
                tokens.append(token)
                positions.append(stream.position + i)
                seqs.append(stream.seq)
                logits.append(wants and i >= len(take) - 1 - len(draft))
            stream.position += len(take)
            if wants:
                owners.append((stream, len(tokens) - 1 - len(draft), draft))
        if not tokens:
            return
        started = time.perf_counter()
        self.llama.decode_seqs(tokens, positions, seqs, logits)
        for stream, index, draft in owners:
            self._written(stream, self._checked(stream, index, draft))
        if not prompt_rows and any(stream.fit is not None for stream, _, _ in owners):  # (a prompt's rows: no
            self._step_costs.record(1 + sum(len(draft) for _, _, draft in owners),  # step of the lines alone)
                                    time.perf_counter() - started)

    def _drafts(self) -> dict[int, list[int]]:
        """Each line's draft for this step, by its sequence: its n-gram types' (``stream.drafter``), else,
        with a draft model, the model's, drafted for all such lines at once (``draft_greedily``); capped by
        the line's budget, one micro-batch and the flags (``Speculation.cap``)."""
        drafts: dict[int, list[int]] = {}
        wanting: list[_Stream] = []
        for stream in self._active:
            if stream.last is None or stream.cancelled:
                continue
            if stream.drafter is not None:
                drafts[stream.seq] = stream.drafter.draft(stream.history, stream.last)
            stream.drafted_by_model = stream.draft_place is not None and not drafts.get(stream.seq)
            if stream.drafted_by_model:
                wanting.append(stream)
        if wanting:
            made = draft_greedily(self.speculation.draft_model,
                                  [(stream.draft_place, [*stream.history, stream.last]) for stream in wanting],  # type: ignore[misc]
                                  self.speculation.draft_model_n_max)
            drafts.update((stream.seq, draft) for stream, draft in zip(wanting, made))
        for stream in self._active:
            if stream.seq in drafts:
                drafts[stream.seq] = self.speculation.cap(drafts[stream.seq], min(
                    stream.budget - len(stream.gen.tokens) - 1, self.llama.n_ubatch - 1))
                stream.offered = len(drafts[stream.seq])
        return drafts

    def _fitted(self, drafts: dict[int, list[int]]) -> dict[int, list[int]]:
        """The drafts cut to what pays in this step's batch (``draft_fit.fitted_lengths``: each line's
        chances, and what a drafted position costs beside a step of the lines' tokens, each of which is
        written anyway); as drafted where the cut is off or no cost is known yet, and none where the cut
        leaves less than ``--spec-draft-n-min``."""
        fitting = [stream for stream in self._active if stream.fit is not None and drafts.get(stream.seq)]
        # (asked even where no cost is known yet: asking ages a line's earlier drafts, as DraftFit.length does)
        chances = [stream.fit.chances(len(drafts[stream.seq])) for stream in fitting]  # type: ignore[union-attr]
        extra = self._step_costs.extra()
        if not fitting or extra is None or extra <= 0:
            return drafts
        sure = sum(stream.last is not None and not stream.cancelled for stream in self._active)
        shortest = max(1, self.speculation.draft_n_min)
        for stream, length in zip(fitting, fitted_lengths(chances, extra, sure)):
            drafts[stream.seq] = drafts[stream.seq][:length] if length >= shortest else []
        return drafts

    def _checked(self, stream: _Stream, index: int, draft: list[int]) -> list[int]:
        """The ids sampled for a stream from the batch, its logits from ``index`` on: one, or with a draft,
        the draft's accepted start and the id after it, the rejected rest dropped from its cells."""
        written = checked(draft, lambda i: self.llama.sample(stream.sampler, index + i))  # type: ignore[arg-type]
        if draft:
            taken = len(written) - 1
            stream.gen.drafted += len(draft)
            stream.gen.accepted += taken
            if stream.fit is not None:
                stream.fit.record(len(draft), taken)
            if not stream.drafted_by_model:  # (the drafter hears of its whole draft, as a reply's does: local.py)
                stream.drafter.accepted(stream.offered, stream.offered if taken == len(draft) else taken)  # type: ignore[union-attr]
            stream.position -= len(draft) + 1 - len(written)
            if len(written) <= len(draft):
                self.llama.seq_drop(stream.seq, stream.position)
        return written

    def _written(self, stream: _Stream, written: list[int]) -> None:
        """The ids sampled for a stream handed to its reader until a stop id or its budget ends it; the last
        one is decoded next (the others, an accepted draft, are decoded already)."""
        for n, token in enumerate(written, 1):
            if not stream.gen.record(token, stream.stops):
                self._finish(stream)
                return
            stream.out.put(token)
            if len(stream.gen.tokens) >= stream.budget:
                self._finish(stream)
                return
            if n < len(written):
                stream.history.append(token)
        stream.last = written[-1]

    def _finish(self, stream: _Stream) -> None:
        if stream in self._active:
            self._active.remove(stream)
        if stream.sampler is not None:
            stream.gen.on_device = stream.sampler.on_device
            stream.sampler.close()
            stream.sampler = None
        if stream.seq:
            self.llama.seq_drop(stream.seq)
            self._free.append(stream.seq)
            stream.seq = 0
        stream.out.put(_DONE)


class Slot:
    """One line's engine: the ``Engine`` protocol over the shared decoder (no cache of its own to keep,
    shift or save: a line's cells are dropped when it is done)."""

    name = "llama.cpp (parallel)"

    def __init__(self, decoder: Decoder, engine: object):
        self._decoder, self._engine = decoder, engine
        self.n_ctx = decoder.n_ctx
        self.placement = getattr(engine, "placement", "")
        self.flash_attn = getattr(engine, "flash_attn", "")

    @property
    def threads(self) -> str:
        return getattr(self._engine, "threads", "")

    def report(self) -> dict[str, object]:
        report = getattr(self._engine, "report", None)
        return report() if report is not None else {}

    def generate(self, ids: Sequence[int], sampling: Sampling, stop_ids: Sequence[int], gen: Generation,
                 progress: Progress | None = None, grammar: str | None = None) -> Iterator[int]:
        stream = _Stream(list(ids), sampling, set(stop_ids), grammar, gen)
        self._decoder.submit(stream)
        try:
            while (item := stream.out.get()) is not _DONE:
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            stream.cancelled = True  # a stop string or the caller's break: the decoder drops the line
            gen.finished = time.perf_counter()

    def cached_ids(self) -> list[int]:
        return []

    def reset(self) -> None:
        pass

    def shift(self, ids: Sequence[int]) -> Shifted:
        return Shifted(-1, "a parallel line keeps no cache of its own")

    def save_state(self, path, weights) -> tuple[int, str]:  # type: ignore[no-untyped-def]
        return 0, "a parallel line keeps no state of its own"

    def load_state(self, path, weights) -> tuple[int, str]:  # type: ignore[no-untyped-def]
        return 0, "a parallel line keeps no state of its own"

    def use_prompt_cache(self, cache: object) -> None:
        pass

    def keep_prompt(self) -> str:
        return ""

    def grammar_problem(self, gbnf: str) -> str:
        return self._engine.grammar_problem(gbnf)  # type: ignore[attr-defined]

    def reference_tokenize(self, text: str, special: bool) -> list[int]:
        return self._engine.reference_tokenize(text, special)  # type: ignore[attr-defined]

    def check_vocabulary(self, tokenizer: object, source: object) -> None:
        pass

    def close(self) -> None:
        pass
