"""llama.cpp in this process as the engine: it evaluates and samples token ids, never tokenizes on the chat path.

``LocalEngine.generate`` evaluates our prompt ids after the longest prefix llama.cpp's cache already holds
(prefix reuse; "prompt tokens evaluated" is that count), then samples. Tokens are yielded as they are
sampled, so a Ctrl-C between two of them leaves a consistent state: the cache holds exactly the ids it
says (``cached_ids``). The C calls themselves are in runtime.py; the plan of a context shift and the
state file's format in kv_cache.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import STOPPED, ModelError
from . import kv_cache
from .base import RANDOM_SEED, Generation, Progress, Sampling, Shifted, common_prefix, context_size
from .bindings import llama_log
from .draft_fit import DraftFit, StepCosts
from .prompt_cache import PromptCache
from .runtime import ContextTooLarge, LlamaModel, LoadError, Sampler, ubatches
from .sampler_chain import stages
from .speculative import NO_SPECULATION, Speculation, checked
from .thread_choice import TURN_WINDOW, ThreadChoice


class LocalEngine:
    """One llama.cpp context over a GGUF's weights (the ``Engine`` protocol of base.py)."""

    name = "llama.cpp"

    def __init__(self, weights: Path, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_threads_batch: int | None = None, verbose: bool = False, gpu: tuple[int, str] = (-1, "layer"),
                 parallel: int = 1, flash_attn: str = "auto", n_batch: int = 2048, n_ubatch: int = 512,
                 speculation: Speculation = NO_SPECULATION):
        """Load the weights (llama.cpp's chatter caught unless verbose). ``n_ctx`` 0: the model's training
        context; ``n_threads`` None: the cores other processes leave free (thread_choice.py);
        ``n_threads_batch`` None: the same as ``n_threads``; ``gpu``:
        the layers to offload (-1: all) and the split mode; ``parallel``: the lines ``lines`` may run
        together; ``flash_attn``, ``n_batch``, ``n_ubatch``: llama.cpp's ``-fa``, ``-b``, ``-ub``;
        ``speculation``: how replies are drafted ahead (speculative.py; ``/set`` may change it). A file
        llama.cpp can't load is a ModelError with llama.cpp's reason."""
        self.speculation = speculation
        self._check_alone = False  # tests: a draft checked one position at a time (the same logits as without it)
        self._step_costs = StepCosts()  # what a step of one and of more positions costs here (draft_fit.py)
        self._threads = ThreadChoice(n_threads)
        self._threads_batch = n_threads_batch
        log = llama_log()
        log.verbose, log.kept = verbose, []
        try:
            self._llama = LlamaModel(weights, n_ctx=context_size(n_ctx), n_batch=n_batch, n_ubatch=n_ubatch,
                                     flash_attn=flash_attn, threads=self._threads, threads_batch=n_threads_batch, gpu=gpu,
                                     n_seq=parallel + 1 if parallel > 1 else 1,
                                     outputs_per_seq=0 if speculation.on else 1)  # (as llama-server: runtime.py)
        except ContextTooLarge as err:
            raise ModelError(f"-c {n_ctx}: {err}") from None
        except (LoadError, OSError) as err:
            reason = log.failure_reason() or str(err)
            if "failed to allocate" in reason:
                reason = f"not enough memory for the weights and a {n_ctx or 'training'}-token context ({reason})"
            raise ModelError(f"{weights}: llama.cpp could not load the weights: {reason}"
                             + ("" if verbose else " (--verbose shows llama.cpp's log)")) from None
        self.n_ctx, self.n_ctx_train = self._llama.n_ctx, self._llama.n_ctx_train
        self.placement = self._llama.placement()
        self.flash_attn = self._llama.flash_attn
        self._weights, self._prompt_cache = weights, None

    @property
    def threads(self) -> str:
        """For /info: "2 (prompt evaluation: 2)", or the automatic choice and what it saw."""
        batch = self._threads_batch or "the same"
        return f"{self._threads.describe()} (prompt evaluation: {batch})"

    def report(self) -> dict[str, object]:
        """For --json: the threads the last decode used and how they were chosen, flash attention (what
        ``auto`` resolved to), the batch sizes and speculative decoding."""
        choice = self._threads
        return {"threads": {"generation": choice.current, "prompt_evaluation": self._threads_batch or choice.current,
                            "chosen": "auto" if choice.auto else "-t" if choice.fixed else "all cores",
                            "cores": len(choice.cpus), "cores_used_by_others": round(choice.taken, 2)},
                "flash_attn": self.flash_attn, "batch_size": self._llama.n_batch, "ubatch_size": self._llama.n_ubatch,
                "speculative": self.speculation.describe() if self._llama.drops_part else
                "none (this model's memory can't drop a rejected draft)"}

    def lines(self, n: int) -> list:
        """``n`` engines that decode together (parallel.py): one context, a sequence each. The context
        was made for them (``parallel``); this engine's own cache is emptied."""
        from .parallel import Decoder, Slot

        self._llama.reset()
        decoder = Decoder(self._llama, n, self.speculation)
        return [Slot(decoder, self) for _ in range(n)]

    def use_prompt_cache(self, cache: PromptCache | None) -> None:
        """Restore the longest prefix a kept state shares with each prompt (prompt_cache.py)."""
        self._prompt_cache = cache

    def keep_prompt(self) -> str:
        """Keep the context's state in the prompt cache where worth it: "" or why it was not kept."""
        cache, llama = self._prompt_cache, self._llama
        if cache is None or not cache.worth_keeping(llama.cached):
            return ""
        try:
            stamp = kv_cache.stamp_of(self._weights, self.n_ctx)
        except OSError:
            return "the weights can't be read: no prompt cache"
        return cache.keep(stamp, llama.cached, llama.state())

    def _restore(self, ids: Sequence[int]) -> None:
        cache, llama = self._prompt_cache, self._llama
        try:
            stamp = kv_cache.stamp_of(self._weights, self.n_ctx)
        except OSError:
            return
        hit = cache.best(stamp, ids, common_prefix(llama.cached, ids)) if cache is not None else None
        if hit is None:
            return
        restored, why = self.load_state(hit.path, self._weights)
        if restored:
            cache.used(hit)
        else:
            cache.say(f"prompt cache: {hit.path.name} passed over: {why}")

    def check_vocabulary(self, tokenizer, source: object) -> None:
        """A tokenizer that does not fit the weights (size, special tokens) is a ModelError now, not a
        wrong reply later."""
        theirs = self._llama.n_vocab
        if theirs != tokenizer.vocab_size:
            raise ModelError(f"the tokenizer ({tokenizer.vocab_size} tokens, from {source}) does not fit the "
                             f"weights ({theirs} tokens); use the tokenizer of the same model")
        for name, ours, their_id in (("BOS", tokenizer.bos_id, self._llama.token_bos()),
                                     ("EOS", tokenizer.eos_id, self._llama.token_eos())):
            if ours is not None and their_id >= 0 and ours != their_id:
                raise ModelError(f"the tokenizer's {name} is token {ours} ({tokenizer.id_to_token(ours)!r}) but the "
                                 f"weights' is {their_id}; use the tokenizer of the same model")

    def close(self) -> None:
        draft = self.speculation.draft_model
        if draft is not None:
            draft.close()  # type: ignore[attr-defined]
        self._llama.close()

    def reset(self) -> None:
        """Forget the cached prompt (the next turn evaluates everything)."""
        self._llama.reset()

    def reference_tokenize(self, text: str, special: bool) -> list[int]:
        """llama.cpp's own tokenization — only for --check, which compares ours against it."""
        return self._llama.tokenize(text.encode("utf-8"), special)

    def cached_ids(self) -> list[int]:
        """The ids whose keys and values llama.cpp's cache holds, in order."""
        return list(self._llama.cached)

    def shift(self, ids: Sequence[int]) -> Shifted:
        """The common prefix kept, then the cached tokens that continue ``ids`` moved back into place
        (kv_cache.plan_shift); the cache's ids stay exactly a prefix of ``ids``."""
        plan = kv_cache.plan_shift(self._llama.cached, ids)
        if plan is None:
            return Shifted(0)
        if not self._llama.can_shift():
            return Shifted(-1, "this model's memory can't shift")
        self._llama.move_back(*plan)
        return Shifted(plan[2])

    def save_state(self, path: Path, weights: Path | None) -> tuple[int, str]:
        """llama.cpp's state, stamped (kv_cache.write_state): (its size in bytes, "")."""
        if weights is None:
            return 0, "no weights file to stamp it with"
        state = self._llama.state()
        kv_cache.write_state(path, state, kv_cache.stamp_of(weights, self.n_ctx), self._llama.cached)
        return len(state), ""

    def load_state(self, path: Path, weights: Path | None) -> tuple[int, str]:
        if weights is None:
            return 0, "no weights file to check it against"
        try:
            expected = kv_cache.stamp_of(weights, self.n_ctx)
        except OSError:
            return 0, "its weights can't be read"
        ids, state, why = kv_cache.read_state(path, expected)
        if why:
            return 0, why
        if not all(0 <= i < self._llama.n_vocab for i in ids):  # (a CRC that holds over ids no vocabulary has)
            return 0, "its state file is damaged"
        if not self._llama.set_state(state, ids):
            return 0, "llama.cpp refused its state"
        return len(ids), ""

    def _checked(self, token: int, draft: list[int], sampler: Sampler, gen: Generation) -> list[int]:
        """A draft checked: ``token`` and the draft evaluated in one batch, then the sampler chain run at
        each position in turn, as it would have run one token at a time, until it samples other than the
        draft. The tokens it sampled (the draft's accepted start, then the one it wrote instead, or the one
        after the whole draft); the cache keeps ``token`` and the accepted start, the rejected rest dropped.
        The chain samples once per token written, as without a draft, so a seeded reply draws the same."""
        llama = self._llama
        base = len(llama.cached)
        started = time.perf_counter()
        if not self._check_alone:
            llama.eval([token, *draft], every=True)

        def alone(i: int) -> int:  # (each position evaluated alone: the logits the model gives without drafts)
            llama.eval([token, *draft][i:i + 1])
            return llama.sample(sampler)

        def batched(i: int) -> int:
            sampled = llama.sample(sampler, i)
            if i == 0:  # (the step's cost: its evaluation, done once the first position's token is read)
                self._step_costs.record(len(draft) + 1, time.perf_counter() - started)
            return sampled

        written = checked(draft, alone if self._check_alone else batched)
        gen.drafted += len(draft)
        gen.accepted += len(written) - 1
        llama.keep(base + len(written))
        return written

    def _fitted(self, offered: list[int], fit: DraftFit | None) -> list[int]:
        """The part of the draft that is checked: its start, as long as pays here (``fit``), and no draft
        where that is shorter than ``--spec-draft-n-min``."""
        if fit is None or not offered:
            return offered
        length = fit.length(len(offered))
        return offered[:length] if length >= max(1, self.speculation.draft_n_min) else []

    def grammar_problem(self, gbnf: str) -> str:
        return self._llama.grammar_problem(gbnf)

    def evaluate(self, ids: Sequence[int], gen: Generation, progress: Progress | None = None) -> None:
        """Evaluate the prompt's ids after the longest prefix the cache holds, as llama-server does: the rest
        in llama.cpp's own micro-batches (``runtime.ubatches``), logits for the last id; where the cache
        holds the whole prompt, its last id again on its own. ``progress(done, total, seconds)`` is called
        after each micro-batch. A Ctrl-C between two of them leaves the cache holding what was evaluated."""
        llama = self._llama
        self._threads.now(TURN_WINDOW)  # what the others did while nobody asked (the user typing, the load)
        if self._prompt_cache is not None:
            self._restore(ids)
        llama.keep(min(common_prefix(llama.cached, ids), len(ids) - 1))
        todo = ids[len(llama.cached):]
        gen.to_evaluate, gen.evaluated = len(todo), 0
        spans = ubatches(len(todo), llama.n_batch, llama.n_ubatch)
        for start, end in spans:
            llama.eval(todo[start:end], logits=end == len(todo))
            gen.evaluated += end - start
            if progress is not None:
                progress(end, len(todo), time.perf_counter() - gen.started)

    def generate(self, ids: Sequence[int], sampling: Sampling, stop_ids: Sequence[int],
                 gen: Generation, progress: Progress | None = None, grammar: str | None = None) -> Iterator[int]:
        """Yield sampled ids until a stop id (not yielded), max_tokens, or a full context; ``grammar`` (GBNF
        text) constrains them. ``gen`` records counts, times and the stop reason; a KeyboardInterrupt marks
        it "interrupted"."""
        stops = set(stop_ids)
        budget = gen.begin(ids, self.n_ctx, sampling)
        seed = sampling.seed if sampling.seed >= 0 else random.randrange(RANDOM_SEED)
        sampler = None
        try:
            if budget <= 0 or not ids:
                return
            llama = self._llama
            drafter = self.speculation.drafter() if llama.drops_part else None
            fit = DraftFit(self._step_costs) if drafter is not None and self.speculation.draft_fit else None
            sampler = llama.sampler(stages(replace(sampling, seed=seed), grammar=grammar is not None,
                                           stop_ids=stop_ids), grammar, history=ids,
                                    on_device=sampling.backend_sampling, drafting=drafter is not None)
            self.evaluate(ids, gen, progress)  # (with the chain on the device, the first token is drawn there too)
            history = list(ids)  # (the drafts' source: the prompt and the reply before ``token``)
            token = llama.sample(sampler)
            while True:
                if not gen.record(token, stops):
                    return
                yield token
                if len(gen.tokens) >= budget:
                    return
                room = min(budget - len(gen.tokens) - 1, self.n_ctx - len(llama.cached) - 2,
                           llama.n_ubatch - 1)  # (the draft and the token before it: one micro-batch)
                offered = self.speculation.cap(drafter.draft(history, token), room) if drafter is not None else []
                draft = self._fitted(offered, fit)
                history.append(token)
                if not draft:
                    started = time.perf_counter()
                    llama.eval([token])
                    token = llama.sample(sampler)
                    if drafter is not None:
                        self._step_costs.record(1, time.perf_counter() - started)
                    continue
                written = self._checked(token, draft, sampler, gen)
                taken = len(written) - 1
                if fit is not None:
                    fit.record(len(draft), taken)
                # (the drafter hears of its whole draft: where the model took all that was checked, it
                # rejected none of it, and a key's length in ngram-map-k is not shortened by the cut)
                drafter.accepted(len(offered), len(offered) if taken == len(draft) else taken)  # type: ignore[union-attr]
                for accepted in written[:-1]:
                    ended = not gen.record(accepted, stops)
                    if ended or len(gen.tokens) >= budget:  # (the cache as it is without a draft: each token
                        llama.keep(len(ids) + len(gen.tokens) - (not ended))  # written before the last, evaluated)
                    if ended:
                        return
                    yield accepted
                    history.append(accepted)
                    if len(gen.tokens) >= budget:
                        return
                token = written[-1]
        except STOPPED:
            gen.stop_reason = "interrupted"
            raise
        except GeneratorExit:  # the reader stopped (a stop string, the reasoning budget): the cache as it is
            self._llama.keep(min(len(self._llama.cached), len(ids) + len(gen.tokens) - 1))  # without a draft
            raise
        finally:
            if sampler is not None:
                gen.on_device = sampler.on_device
                sampler.close()
            gen.finished = time.perf_counter()

