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
import tempfile
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


CTX_STEP = 256  # llama.cpp allocates the context in steps of 256 tokens


@contextlib.contextmanager
def captured_output(enabled: bool = True) -> Iterator[list[str]]:
    """Catch C-level writes to stdout and stderr (llama.cpp's loading log) in a temporary file; the
    yielded list receives its lines afterwards, so a failed load can show llama.cpp's own reason."""
    lines: list[str] = []
    if not enabled:
        yield lines
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            log.seek(0)
            lines += log.read(1 << 20).decode("utf-8", "replace").splitlines()


def _quiet_llama(verbose: bool) -> None:
    """After loading, llama.cpp logs (and llama-cpp-python prints timings) only with --verbose."""
    from llama_cpp import _logger

    _logger.set_verbose(verbose)


def load_failure_reason(lines: list[str]) -> str:
    """llama.cpp's own words for a failed load: its last error lines, shortest first-hand."""
    errors = [line.split(": ", 1)[-1].strip() for line in lines if "error" in line.lower() or "failed" in line.lower()]
    return "; ".join(dict.fromkeys(errors[:2])) if errors else "no reason given"


def context_size(requested: int) -> int:
    """What llama.cpp will allocate for ``-c requested``: rounded up to a step of 256 (0: the model's own)."""
    return 0 if requested == 0 else max(CTX_STEP, -(-requested // CTX_STEP) * CTX_STEP)


class Engine:
    """One llama.cpp context over a GGUF's weights."""

    def __init__(self, weights: Path, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_threads_batch: int | None = None, verbose: bool = False):
        """Load the weights (llama.cpp's chatter caught unless verbose). ``n_ctx`` 0: the model's training
        context; ``n_threads`` None: all cores; ``n_threads_batch`` None: the same as ``n_threads``. A file
        llama.cpp can't load is a ModelError with llama.cpp's reason."""
        import llama_cpp

        threads = n_threads or os.cpu_count() or 1
        self.n_threads, self.n_threads_batch = threads, n_threads_batch or threads
        self.requested_ctx = n_ctx
        try:
            # llama.cpp logs only when verbose: it logs into our temporary file, which we show on failure
            with captured_output(not verbose) as log:
                self._llm = llama_cpp.Llama(model_path=str(weights), n_ctx=context_size(n_ctx), verbose=True,
                                            n_batch=512, n_threads=self.n_threads,
                                            n_threads_batch=self.n_threads_batch)
        except (ValueError, RuntimeError, OSError) as err:
            reason = load_failure_reason(log) if log else str(err)
            if "failed to allocate" in reason:
                reason = f"not enough memory for the weights and a {n_ctx or 'training'}-token context ({reason})"
            raise ModelError(f"{weights}: llama.cpp could not load the weights: {reason}"
                             + ("" if verbose else " (--verbose shows llama.cpp's log)")) from None
        finally:
            _quiet_llama(verbose)
        self._llm.verbose = verbose
        # llama-cpp-python's token buffer has the size asked for; never plan past it or past llama.cpp's
        self.n_ctx = min(self._llm.n_ctx(), len(self._llm.input_ids))

    def check_vocabulary(self, tokenizer, source: object) -> None:
        """A tokenizer that does not fit the weights (size, special tokens) is a ModelError now, not a
        wrong reply later."""
        theirs = self._llm.n_vocab()
        if theirs != tokenizer.vocab_size:
            raise ModelError(f"the tokenizer ({tokenizer.vocab_size} tokens, from {source}) does not fit the "
                             f"weights ({theirs} tokens); use the tokenizer of the same model")
        for name, ours, their_id in (("BOS", tokenizer.bos_id, self._llm.token_bos()),
                                     ("EOS", tokenizer.spec.eos_id, self._llm.token_eos())):
            if ours is not None and their_id >= 0 and ours != their_id:
                raise ModelError(f"the tokenizer's {name} is token {ours} ({tokenizer.id_to_token(ours)!r}) but the "
                                 f"weights' is {their_id}; use the tokenizer of the same model")

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
