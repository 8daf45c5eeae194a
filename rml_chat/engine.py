"""llama.cpp as an evaluator and sampler of token ids; it never tokenizes on the chat path.

``Engine.generate`` hands our prompt ids to ``Llama.generate``, which keeps its KV cache and evaluates
only the ids after the longest prefix it already holds (prefix reuse); we compute the same count to
report "prompt tokens evaluated". Tokens are yielded as they are sampled, so a Ctrl-C between two of them
leaves a consistent state (llama-cpp-python trims the KV cache to the common prefix on the next turn).
"""

from __future__ import annotations

import ctypes
import os
import random
import sys
import time
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ModelError


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


class LlamaLog:
    """llama.cpp's log, taken over from llama-cpp-python's callback: its warnings and errors are kept (a
    failed load shows them), and everything is printed only with --verbose. Printing the whole log of a
    load, as llama-cpp-python does when verbose, costs it a third of its load time."""

    _LEVEL_WARN, _LEVEL_ERROR, _LEVEL_CONT = 3, 4, 5  # ggml_log_level (llama-cpp-python's own map is older)

    def __init__(self) -> None:
        import llama_cpp

        self.verbose = False
        self.kept: list[str] = []
        self._last = 0

        @llama_cpp.llama_log_callback
        def callback(level: int, text: bytes, user_data: object) -> None:
            level = self._last if level == self._LEVEL_CONT else level
            self._last = level
            line = text.decode("utf-8", "replace")
            if level in (self._LEVEL_WARN, self._LEVEL_ERROR) and len(self.kept) < 200:
                self.kept.append(line)
            if self.verbose:
                print(line, end="", file=sys.stderr, flush=True)

        self._callback = callback  # kept alive: llama.cpp holds only its address
        llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))

    def failure_reason(self) -> str:
        """llama.cpp's own words for a failed load: its first error lines."""
        lines = [line.strip().split(": ", 1)[-1] for line in self.kept
                 if "error" in line.lower() or "failed" in line.lower()]
        return "; ".join(dict.fromkeys(lines[:2])) if lines else ""


_LOG: list[LlamaLog] = []


def llama_log() -> LlamaLog:
    if not _LOG:
        _LOG.append(LlamaLog())
    return _LOG[0]


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
        import llama_cpp

        threads = n_threads or os.cpu_count() or 1
        self.n_threads, self.n_threads_batch = threads, n_threads_batch or threads
        log = llama_log()
        log.verbose, log.kept = verbose, []
        try:
            self._llm = llama_cpp.Llama(model_path=str(weights), n_ctx=context_size(n_ctx), verbose=verbose,
                                        n_batch=512, n_threads=self.n_threads, n_threads_batch=self.n_threads_batch)
        except (ValueError, RuntimeError, OSError) as err:
            reason = log.failure_reason() or str(err)
            if "failed to allocate" in reason:
                reason = f"not enough memory for the weights and a {n_ctx or 'training'}-token context ({reason})"
            raise ModelError(f"{weights}: llama.cpp could not load the weights: {reason}"
                             + ("" if verbose else " (--verbose shows llama.cpp's log)")) from None
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
                                     ("EOS", tokenizer.eos_id, self._llm.token_eos())):
            if ours is not None and their_id >= 0 and ours != their_id:
                raise ModelError(f"the tokenizer's {name} is token {ours} ({tokenizer.id_to_token(ours)!r}) but the "
                                 f"weights' is {their_id}; use the tokenizer of the same model")

    @property
    def llm(self):  # type: ignore[no-untyped-def]
        """llama-cpp-python's ``Llama`` (for --check's tokenizer comparison and the benchmarks)."""
        return self._llm

    def close(self) -> None:
        self._llm.close()

    def reset(self) -> None:
        """Forget the cached prompt (the next turn evaluates everything)."""
        self._llm.reset()

    def llama_tokenize(self, text: str, special: bool) -> list[int]:
        """llama.cpp's own tokenization — only for --check, which compares ours against it."""
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def cached_ids(self) -> list[int]:
        """The ids whose keys and values llama.cpp's cache holds, in order."""
        return self._llm.input_ids[: self._llm.n_tokens].tolist()

    def set_cached(self, ids: Sequence[int]) -> None:
        """Record that the cache holds exactly ``ids`` (after a shift or a restored state)."""
        self._llm.input_ids[: len(ids)] = ids
        self._llm.n_tokens = len(ids)

    def evaluate(self, ids: Sequence[int], gen: Generation, progress: Progress | None = None) -> None:
        """Evaluate the prompt's ids after the longest prefix the cache holds, in batches, all but the last
        (``generate`` evaluates that one and samples from it). ``progress(done, total, seconds)`` is called
        after each batch. A Ctrl-C between two batches leaves the cache holding what was evaluated."""
        cached = self.cached_ids()
        common = common_prefix(cached, ids)
        common = min(common, len(ids) - 1)  # the last id is evaluated by generate, for its logits
        self._llm.n_tokens = common
        gen.evaluated = len(ids) - common
        todo = list(ids[common:len(ids) - 1])
        step = self._llm.n_batch
        for done in range(0, len(todo), step):
            self._llm.eval(todo[done:done + step])
            if progress is not None:
                progress(min(done + step, len(todo)), len(todo), time.perf_counter() - gen.started)

    def generate(self, ids: Sequence[int], sampling: Sampling, stop_ids: Sequence[int],
                 gen: Generation, progress: Progress | None = None, grammar: object = None) -> Iterator[int]:
        """Yield sampled ids until a stop id (not yielded), max_tokens, or a full context; ``grammar`` (a
        llama-cpp-python ``LlamaGrammar``) constrains them. ``gen`` records counts, times and the stop
        reason; a KeyboardInterrupt marks it "interrupted"."""
        stops = set(stop_ids)
        gen.prompt_tokens = len(ids)
        gen.started = time.perf_counter()
        seed = sampling.seed if sampling.seed >= 0 else random.getrandbits(32)
        self._llm.set_seed(seed)
        budget = self.n_ctx - len(ids)
        if sampling.max_tokens >= 0:
            budget = min(budget, sampling.max_tokens)
        gen.stop_reason = "length" if sampling.max_tokens >= 0 and budget == sampling.max_tokens else "context"
        try:
            if budget <= 0 or not ids:
                return
            self.evaluate(ids, gen, progress)
            for token in self._llm.generate(list(ids), top_k=sampling.top_k, top_p=sampling.top_p,
                                            min_p=sampling.min_p, temp=sampling.temp,
                                            repeat_penalty=sampling.repeat_penalty, grammar=grammar):
                if not gen.record(token, stops):
                    return
                yield token
                if len(gen.tokens) >= budget:
                    return
        except KeyboardInterrupt:
            gen.stop_reason = "interrupted"
            raise
        finally:
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
