"""llama.cpp as an evaluator and sampler of token ids; it never tokenizes on the chat path.

``Engine.generate`` evaluates our prompt ids after the longest prefix llama.cpp's cache already holds
(prefix reuse; "prompt tokens evaluated" is that count), then samples. Tokens are yielded as they are
sampled, so a Ctrl-C between two of them leaves a consistent state: the cache holds exactly the ids it
says (``cached_ids``). The C calls themselves are in runtime.py.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ModelError
from .runtime import LlamaModel, LoadError, llama_log


@dataclass
class Sampling:
    """Sampling settings with llama.cpp's names and defaults (``temp 0`` is greedy; seed -1 is random)."""

    temp: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    seed: int = -1
    max_tokens: int = -1  # -1: until a stop or the context is full


@dataclass
class Generation:
    """What one generate call did; filled in as it runs."""

    prompt_tokens: int = 0
    evaluated: int = 0           # prompt tokens llama.cpp actually evaluated (the rest was cached)
    tokens: list[int] = field(default_factory=list)
    stop_reason: str = ""        # "stop" | "stop_string" | "length" | "context" | "interrupted"
    started: float = 0.0
    first_token_at: float = 0.0
    finished: float = 0.0

    def record(self, token: int, stops: Container[int]) -> bool:
        """Note a sampled token (the first one's time too): False for a stop id (stop reason "stop"), which
        is not kept; else True, the token kept."""
        if not self.first_token_at:
            self.first_token_at = time.perf_counter()
        if token in stops:
            self.stop_reason = "stop"
            return False
        self.tokens.append(token)
        return True

    @property
    def ttft_s(self) -> float:
        return max(self.first_token_at - self.started, 0.0) if self.first_token_at else 0.0

    @property
    def tokens_per_s(self) -> float:
        span = self.finished - self.first_token_at
        return (len(self.tokens) - 1) / span if len(self.tokens) > 1 and span > 0 else 0.0


CTX_STEP = 256  # llama.cpp allocates the context in steps of 256 tokens


def context_size(requested: int) -> int:
    """What llama.cpp will allocate for ``-c requested``: rounded up to a step of 256 (0: the model's own)."""
    return 0 if requested == 0 else max(CTX_STEP, -(-requested // CTX_STEP) * CTX_STEP)


class Engine:
    """One llama.cpp context over a GGUF's weights."""

    remote = False  # (RemoteEngine: llama-server over HTTP)

    def __init__(self, weights: Path, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_threads_batch: int | None = None, verbose: bool = False):
        """Load the weights (llama.cpp's chatter caught unless verbose). ``n_ctx`` 0: the model's training
        context; ``n_threads`` None: all cores; ``n_threads_batch`` None: the same as ``n_threads``. A file
        llama.cpp can't load is a ModelError with llama.cpp's reason."""
        threads = n_threads or os.cpu_count() or 1
        self.n_threads, self.n_threads_batch = threads, n_threads_batch or threads
        log = llama_log()
        log.verbose, log.kept = verbose, []
        try:
            self._llama = LlamaModel(weights, n_ctx=context_size(n_ctx), n_batch=512, n_threads=self.n_threads,
                                     n_threads_batch=self.n_threads_batch)
        except (LoadError, OSError) as err:
            reason = log.failure_reason() or str(err)
            if "failed to allocate" in reason:
                reason = f"not enough memory for the weights and a {n_ctx or 'training'}-token context ({reason})"
            raise ModelError(f"{weights}: llama.cpp could not load the weights: {reason}"
                             + ("" if verbose else " (--verbose shows llama.cpp's log)")) from None
        self.n_ctx = self._llama.n_ctx

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

    @property
    def ctx(self) -> object:
        """llama.cpp's context (a ``llama_context *``), for the memory and state calls of kv_cache.py."""
        return self._llama.ctx

    @property
    def vocab(self) -> object:
        """llama.cpp's vocabulary (a ``llama_vocab *``), for the grammar check of structured.py."""
        return self._llama.vocab

    def close(self) -> None:
        self._llama.close()

    def reset(self) -> None:
        """Forget the cached prompt (the next turn evaluates everything)."""
        self._llama.reset()

    def llama_tokenize(self, text: str, special: bool) -> list[int]:
        """llama.cpp's own tokenization — only for --check, which compares ours against it."""
        return self._llama.tokenize(text.encode("utf-8"), special)

    def cached_ids(self) -> list[int]:
        """The ids whose keys and values llama.cpp's cache holds, in order."""
        return list(self._llama.cached)

    def set_cached(self, ids: Sequence[int]) -> None:
        """Record that the cache holds exactly ``ids`` (after a shift or a restored state)."""
        self._llama.cached = list(ids)

    def evaluate(self, ids: Sequence[int], gen: Generation, progress: Progress | None = None) -> None:
        """Evaluate the prompt's ids after the longest prefix the cache holds, in batches, all but the last
        (``generate`` decodes that one on its own, as llama-cpp-python and llama-server do, and samples
        from it). ``progress(done, total, seconds)`` is called after each batch. A Ctrl-C between two
        batches leaves the cache holding what was evaluated."""
        llama = self._llama
        llama.keep(min(common_prefix(llama.cached, ids), len(ids) - 1))
        common = len(llama.cached)
        gen.evaluated = len(ids) - common
        todo = ids[common:len(ids) - 1]
        step = llama.n_batch
        for done in range(0, len(todo), step):
            llama.eval(todo[done:done + step])
            if progress is not None:
                progress(min(done + step, len(todo)), len(todo), time.perf_counter() - gen.started)

    def generate(self, ids: Sequence[int], sampling: Sampling, stop_ids: Sequence[int],
                 gen: Generation, progress: Progress | None = None, grammar: str | None = None) -> Iterator[int]:
        """Yield sampled ids until a stop id (not yielded), max_tokens, or a full context; ``grammar`` (GBNF
        text) constrains them. ``gen`` records counts, times and the stop reason; a KeyboardInterrupt marks
        it "interrupted"."""
        stops = set(stop_ids)
        gen.prompt_tokens = len(ids)
        gen.started = time.perf_counter()
        seed = sampling.seed if sampling.seed >= 0 else random.getrandbits(32)
        budget = self.n_ctx - len(ids)
        if sampling.max_tokens >= 0:
            budget = min(budget, sampling.max_tokens)
        gen.stop_reason = "length" if sampling.max_tokens >= 0 and budget == sampling.max_tokens else "context"
        sampler = None
        try:
            if budget <= 0 or not ids:
                return
            self.evaluate(ids, gen, progress)
            llama = self._llama
            sampler = llama.sampler(temp=sampling.temp, top_k=sampling.top_k, top_p=sampling.top_p,
                                    min_p=sampling.min_p, repeat_penalty=sampling.repeat_penalty, seed=seed,
                                    grammar=grammar)
            llama.eval(ids[-1:])
            while True:
                token = llama.sample(sampler)
                if not gen.record(token, stops):
                    return
                yield token
                if len(gen.tokens) >= budget:
                    return
                llama.eval([token])
        except KeyboardInterrupt:
            gen.stop_reason = "interrupted"
            raise
        finally:
            if sampler is not None:
                sampler.close()
            gen.finished = time.perf_counter()


Progress = Callable[[int, int, float], None]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids two sequences share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
