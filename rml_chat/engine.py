"""llama.cpp as an evaluator and sampler of token ids; it never tokenizes on the chat path.

``Engine.generate`` hands our prompt ids to ``Llama.generate``, which keeps its KV cache and evaluates
only the ids after the longest prefix it already holds (prefix reuse); we compute the same count to
report "prompt tokens evaluated". Tokens are yielded as they are sampled, so a Ctrl-C between two of them
leaves a consistent state (llama-cpp-python trims the KV cache to the common prefix on the next turn).
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .model import ModelError


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

    SETTABLE = ("temp", "top_k", "top_p", "min_p", "repeat_penalty", "seed", "max_tokens")


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

    @property
    def ttft_s(self) -> float:
        return max(self.first_token_at - self.started, 0.0) if self.first_token_at else 0.0

    @property
    def tokens_per_s(self) -> float:
        span = self.finished - self.first_token_at
        return (len(self.tokens) - 1) / span if len(self.tokens) > 1 and span > 0 else 0.0


@contextlib.contextmanager
def quiet_stderr(enabled: bool = True) -> Iterator[None]:
    """Silence C-level writes to stderr (llama.cpp's loading chatter) while loading."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class Engine:
    """One llama.cpp context over a GGUF's weights."""

    def __init__(self, weights: Path, *, n_ctx: int = 4096, n_threads: int | None = None, verbose: bool = False):
        """Load the weights (llama.cpp's chatter silenced unless verbose); ``n_threads`` None: all cores.
        A file llama.cpp can't load is a ModelError naming it."""
        import llama_cpp

        try:
            with quiet_stderr(not verbose):
                self._llm = llama_cpp.Llama(model_path=str(weights), n_ctx=n_ctx, verbose=verbose, n_batch=512,
                                            n_threads=n_threads or os.cpu_count() or 1)
        except (ValueError, RuntimeError, OSError) as err:
            raise ModelError(f"{weights}: llama.cpp could not load the weights ({err})") from None
        self.n_ctx = self._llm.n_ctx()

    def close(self) -> None:
        self._llm.close()

    def llama_tokenize(self, text: str, special: bool) -> list[int]:
        """llama.cpp's own tokenization — only for --check, which compares ours against it."""
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def reusable_prefix(self, ids: Sequence[int]) -> int:
        """How many leading ids need no evaluation (as ``Llama.generate`` decides: one is replayed
        when the whole prompt is cached, to refresh the logits)."""
        common = 0
        for a, b in zip(self._llm._input_ids, ids):
            if a != b:
                break
            common += 1
        return common - 1 if common == len(ids) and common > 0 else common

    def generate(self, ids: Sequence[int], sampling: Sampling, stop_ids: Sequence[int],
                 gen: Generation) -> Iterator[int]:
        """Yield sampled ids until a stop id (not yielded), max_tokens, or a full context.
        ``gen`` records counts, times and the stop reason; a KeyboardInterrupt marks it "interrupted"."""
        stops = set(stop_ids)
        gen.prompt_tokens = len(ids)
        gen.evaluated = len(ids) - self.reusable_prefix(ids)
        gen.started = time.perf_counter()
        seed = sampling.seed if sampling.seed >= 0 else random.getrandbits(32)
        self._llm.set_seed(seed)
        budget = self.n_ctx - len(ids)
        if sampling.max_tokens >= 0:
            budget = min(budget, sampling.max_tokens)
        gen.stop_reason = "length" if sampling.max_tokens >= 0 and budget == sampling.max_tokens else "context"
        try:
            if budget <= 0:
                return
            for token in self._llm.generate(list(ids), top_k=sampling.top_k, top_p=sampling.top_p,
                                            min_p=sampling.min_p, temp=sampling.temp,
                                            repeat_penalty=sampling.repeat_penalty):
                if not gen.first_token_at:
                    gen.first_token_at = time.perf_counter()
                if token in stops:
                    gen.stop_reason = "stop"
                    return
                gen.tokens.append(token)
                yield token
                if len(gen.tokens) >= budget:
                    return
        except KeyboardInterrupt:
            gen.stop_reason = "interrupted"
            raise
        finally:
            gen.finished = time.perf_counter()
