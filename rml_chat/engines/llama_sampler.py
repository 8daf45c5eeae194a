"""llama.cpp's sampler chain, built: one ``llama_sampler_init_*`` call for each stage sampler_chain.py
lists, the samplers that look back handed the prompt first, run on the CPU or attached to a context.

``build`` makes the chain ``common_sampler_init`` makes for the same settings. ``Sampler.attach`` hands it
to a context (``llama_set_sampler``, llama.cpp's backend sampling, ``-bs``): each decode then runs the chain
in the model's graph, on the device that holds the model, as far as its stages can run there, and
``llama_sampler_sample`` returns the id drawn there (or finishes the draw here from the candidates the
device's stages left). Example (not run: it needs a model)::

    sampler = build(lib, vocab, n_vocab, stages(Sampling(seed=7)), None, history=prompt_ids)
    sampler.attach(ctx, 0)    # optional: the chain runs in the graph of sequence 0
    ...                       # llama_decode, then llama_sampler_sample(sampler.chain, ctx, -1)
    sampler.close()           # off the context first, then freed
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from types import ModuleType

from ..errors import UsageError
from .base import trigger_patterns
from .candidates import Candidates, allowed
from .sampler_chain import Stage
from .trigger_guard import TriggerGuard


def build(lib: ModuleType, vocab: object, n_vocab: int, chain: Sequence[Stage], grammar: str | None,
          history: Sequence[int] = (), window: int | None = None) -> Sampler:
    """The chain for ``chain``'s stages (seeds resolved), its grammar stage from ``grammar`` (GBNF text; lazy
    where it carries triggers). The penalties and DRY accept the prompt's last ids first, ``history``, as
    llama-server and llama-cli accept the prompt into their chain: a word of the prompt counts as repeated.

    ``window``: the most ids one chain ever sees (the context's size: a chain serves one call, which ends
    with a full context). The penalties and DRY look back no further, whatever their ``last_n``; llama.cpp
    allocates a ring of ``last_n`` ids up front, and ``--dry-penalty-last-n 2147483647`` took 17 GB."""
    made = Sampler(lib)
    for stage in chain:
        if window is not None and stage.name in ("penalties", "dry") and stage.get("last_n") > window:
            stage = Stage(stage.name, tuple((k, window if k == "last_n" else v) for k, v in stage.settings))
        sampler = _stage(lib, vocab, n_vocab, stage, grammar)
        if stage.name == "grammar":
            made.grammar = sampler
        elif stage.name == "logit_bias":
            made.barred = tuple(token for token, bias in stage.get("biases") if bias == -math.inf)
        if stage.name in ("penalties", "dry") and stage.get("last_n") > 0:
            for token in history[-stage.get("last_n"):]:
                lib.llama_sampler_accept(sampler, token)
        made.add(sampler)
    return made


def _stage(lib: ModuleType, vocab: object, n_vocab: int, stage: Stage, grammar: str | None) -> object:
    get = stage.get
    name = stage.name
    if name == "grammar":
        patterns = [p.encode("utf-8") for p in trigger_patterns(grammar)]
        if patterns:
            return lib.llama_sampler_init_grammar_lazy_patterns(
                vocab, grammar.encode("utf-8"), b"root", (ctypes.c_char_p * len(patterns))(*patterns),
                len(patterns), None, 0)
        return lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
    if name == "logit_bias":
        biases = get("biases")
        table = (lib.llama_logit_bias * len(biases))(*(lib.llama_logit_bias(t, b) for t, b in biases))
        return lib.llama_sampler_init_logit_bias(n_vocab, len(biases), table)
    if name == "penalties":
        return lib.llama_sampler_init_penalties(n_vocab, get("last_n"), get("repeat"), get("frequency"),
                                                get("presence"))
    if name == "dry":
        breakers = [b.encode("utf-8") for b in get("breakers")]
        return lib.llama_sampler_init_dry(vocab, get("multiplier"), get("base"), get("allowed_length"),
                                          get("last_n"), (ctypes.c_char_p * len(breakers))(*breakers), len(breakers))
    if name == "temperature":
        settings = dict(stage.settings)
        return lib.llama_sampler_init_temp_ext(settings["t"], settings.get("range", 0.0), settings.get("exponent", 1.0))
    if name == "xtc":
        return lib.llama_sampler_init_xtc(get("probability"), get("threshold"), 0, get("seed"))
    if name == "mirostat":
        return lib.llama_sampler_init_mirostat(n_vocab, get("seed"), get("tau"), get("eta"), 100)
    if name == "mirostat_v2":
        return lib.llama_sampler_init_mirostat_v2(get("seed"), get("tau"), get("eta"))
    if name == "top_n_sigma":
        return lib.llama_sampler_init_top_n_sigma(get("n"))
    if name == "top_k":
        return lib.llama_sampler_init_top_k(get("k"))
    if name in ("typ_p", "top_p", "min_p"):  # (min_keep 0, as common_sampler_init passes it)
        init = {"typ_p": lib.llama_sampler_init_typical, "top_p": lib.llama_sampler_init_top_p,
                "min_p": lib.llama_sampler_init_min_p}[name]
        return init(get("p"), 0)
    return lib.llama_sampler_init_dist(get("seed"))  # (the last stage of every chain without Mirostat)


class Sampler:
    """A llama.cpp sampler chain (freed by ``close``); ``guard``: its lazy grammar's trigger, watched;
    ``attached``: the context and sequence it runs on the device for (``LlamaModel.sampler``), and
    ``on_device`` the tokens it drew there."""

    def __init__(self, lib: ModuleType) -> None:
        self._lib = lib
        self.chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        self.guard: TriggerGuard | None = None
        self.grammar: object | None = None  # (its grammar stage, owned by the chain)
        self.barred: tuple[int, ...] = ()  # the ids its logit biases make impossible (-l ID-inf, --ignore-eos)
        self.candidates: Candidates | None = None  # (for the steps drawn here, not by llama_sampler_sample)
        self.attached: tuple[object, int] | None = None
        self.on_device = 0

    def add(self, sampler: object) -> None:
        self._lib.llama_sampler_chain_add(self.chain, sampler)

    def may_run_dry(self) -> bool:
        """Whether the grammar and the barred ids may leave no token at this step: the grammar allows one of
        those ids (its end, once it is complete, where ``--ignore-eos`` bars the end). Elsewhere some other
        token is allowed, and ``llama_sampler_sample`` draws, as llama.cpp does."""
        return self.grammar is not None and bool(self.barred) and bool(allowed(self._lib, self.grammar, self.barred))

    def sample_short(self, logits: object, vocab: object, n_vocab: int) -> int:
        """A step where the grammar allows ids the logit biases bar (``may_run_dry``), drawn here from
        ``logits`` (a C pointer to the position's). Where the two leave no token, ``llama_sampler_sample``
        accepted one the grammar refuses, and llama.cpp's grammar threw across the C API (``std::terminate``,
        a crash). There, a grammar that allows its end (complete, where ``--ignore-eos`` bars the end) ends
        the reply with that end's id, not accepted; one that allows nothing the biases leave is a
        UsageError. Elsewhere the token is the one ``llama_sampler_sample`` would draw: the same chain
        applied to the same candidates, then accepted."""
        lib = self._lib
        if self.candidates is None:
            self.candidates = Candidates(lib, n_vocab)
        token, logit = self.candidates.apply(self.chain, logits)
        if logit != -math.inf:
            lib.llama_sampler_accept(self.chain, token)
            if self.guard is not None:
                self.guard.accepted(token)
            return token
        ends = [t for t in allowed(lib, self.grammar, self.barred) if lib.llama_vocab_is_eog(vocab, t)]
        if ends:
            return ends[0]
        raise UsageError("-l/--logit-bias: its biases of -inf leave no token the grammar allows at this point "
                         "of the reply")

    def read(self, written: Sequence[int]) -> int:
        """The grammar stage reads ``written``, a reply's start drawn by no sampler (``BegunGrammar``): each id
        tried with ``llama_sampler_apply`` before it is accepted (accepting one the grammar refuses throws
        across the C API). The index of the first it refuses, where it stops; -1 when it took them all."""
        for at, token in enumerate(written):
            if not allowed(self._lib, self.grammar, [token]):
                return at
            self._lib.llama_sampler_accept(self.grammar, token)
        return -1

    def attach(self, ctx: object, seq: int) -> None:
        """Run the chain in ``ctx``'s graph for sequence ``seq``: its stages up to the first the device
        can't run (at its settings: llama.cpp asks each), the rest here."""
        if self._lib.llama_set_sampler(ctx, seq, self.chain):
            self.attached = (ctx, seq)

    def close(self) -> None:
        if self.attached is not None:  # (before the chain is freed: the context holds it until then)
            self._lib.llama_set_sampler(*self.attached, None)
            self.attached = None
        if self.chain:
            self._lib.llama_sampler_free(self.chain)
            self.chain = None
        if self.guard is not None:
            self.guard.close()
