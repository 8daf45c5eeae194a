"""The engine seam: what the chat asks of whatever evaluates and samples its token ids.

Two engines implement ``Engine``: ``local.LocalEngine`` (llama.cpp in this process, over a GGUF's
weights) and ``server.ServerEngine`` (a llama-server, fed our ids over HTTP). The chat core and the front
ends see only this protocol; neither asks which engine it holds. A capability an engine lacks is said
through the protocol, in words a user can read: ``shift`` answers ``Shifted(-1, why)``, ``save_state``
and ``load_state`` answer why nothing was saved or restored.

The data that crosses the seam is plain: token ids in, token ids out, with ``Generation`` recording what
one call did (counts, times, the stop reason).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

Progress = Callable[[int, int, float], None]  # (done, total, seconds) during a prompt's evaluation


#: llama.cpp's sampler order (common_params_sampling.samplers; sampler_chain.py builds it)
DEFAULT_SAMPLERS = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")
DRY_BREAKERS = ("\n", ":", "\"", "*")  # llama.cpp's default DRY sequence breakers


@dataclass
class Sampling:
    """Sampling settings with llama.cpp's names, meanings and defaults (its ``common_params_sampling``):
    ``temp 0`` is greedy, seed -1 is random, each "off" value leaves its sampler without effect.
    ``sampler_chain.py`` turns them into llama.cpp's chain, in ``samplers``' order."""

    temp: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0          # 1: off
    top_n_sigma: float = -1.0       # -1: off
    xtc_probability: float = 0.0    # 0: off
    xtc_threshold: float = 0.1
    repeat_last_n: int = 64         # the tokens the penalties look back over (0: off)
    repeat_penalty: float = 1.0     # 1: off
    presence_penalty: float = 0.0   # 0: off
    frequency_penalty: float = 0.0  # 0: off
    dry_multiplier: float = 0.0     # 0: off
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64    # 0: off
    dry_sequence_breakers: tuple[str, ...] = DRY_BREAKERS
    dynatemp_range: float = 0.0     # 0: off
    dynatemp_exp: float = 1.0
    mirostat: int = 0               # 0: off, 1: Mirostat, 2: Mirostat 2.0 (top-k, top-p … are then left out)
    mirostat_lr: float = 0.1        # eta
    mirostat_ent: float = 5.0       # tau
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias); -inf: never
    samplers: tuple[str, ...] = DEFAULT_SAMPLERS
    ignore_eos: bool = False        # the model's stop tokens are never sampled (logit bias -inf)
    backend_sampling: bool = False  # -bs: the chain runs in the model's graph, on its device (where every stage can)
    seed: int = -1
    max_tokens: int = -1  # -1: until a stop or the context is full
    reasoning_budget: int = -1  # thought tokens before the chat closes the thought (-1: no limit); engines ignore it
    repeat_guard: int = 256  # rml-chat's own: tokens of one span repeated before the reply is ended (0: off); engines ignore it


#: why a generation ended: a stop id; the user's or the format's stop string; -n; a full context; the repeat
#: guard; Ctrl-C; the thought closed by the budget or the REPL's Ctrl-C (the reply goes on); "" while it runs
StopReason = Literal["", "stop", "stop_string", "length", "context", "repetition", "interrupted", "thought ended"]


RANDOM_SEED = 2**32 - 1  # llama.cpp's seed "random" (LLAMA_DEFAULT_SEED): a seed drawn here is below it


@dataclass
class Generation:
    """What one generate call did; filled in as it runs."""

    prompt_tokens: int = 0
    evaluated: int = 0           # prompt tokens the engine has evaluated so far (the rest was cached)
    to_evaluate: int = 0         # prompt tokens it had to evaluate (``evaluated`` short of it: cut meanwhile)
    tokens: list[int] = field(default_factory=list)
    stop_reason: StopReason = ""
    seed: int = -1               # the seed sampled with (drawn where the setting is -1: the chat draws it a turn)
    started: float = 0.0
    first_token_at: float = 0.0
    finished: float = 0.0
    drafted: int = 0             # speculative decoding: tokens drafted and checked (speculative.py)
    accepted: int = 0            # ... and those of them the model wrote
    on_device: int = 0           # backend sampling: tokens the sampler chain drew in the model's graph

    def begin(self, ids: Sequence[int], n_ctx: int, sampling: Sampling) -> int:
        """Start timing a call for prompt ``ids``: the reply's token budget (the context left, capped by
        ``max_tokens``), and the stop reason should the budget run out first."""
        self.prompt_tokens = len(ids)
        self.started = time.perf_counter()
        budget = n_ctx - len(ids)
        if sampling.max_tokens >= 0:
            budget = min(budget, sampling.max_tokens)
        self.stop_reason = "length" if sampling.max_tokens >= 0 and budget == sampling.max_tokens else "context"
        return budget

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

    def count_prompt_alone(self, prompt_len: int) -> None:
        """Count as evaluated only the first ``prompt_len`` ids of this call's: a call whose ids are the prompt
        and then reply tokens fed back (a thought's close) evaluated those too, and they are no prompt's.

            >>> g = Generation(prompt_tokens=12, evaluated=3, to_evaluate=3)  # 9 cached: 1 of the prompt, 2 fed back
            >>> g.count_prompt_alone(10); (g.evaluated, g.to_evaluate)
            (1, 1)
        """
        common = self.prompt_tokens - self.to_evaluate
        self.to_evaluate = max(0, prompt_len - common)
        self.evaluated = min(self.evaluated, self.to_evaluate)

    def absorb(self, part: Generation) -> None:
        """Fold in a call that continued this reply (after a shift mid-reply; the first call too): its
        counts add up, its tokens follow, its stop reason and end time are the reply's.

            >>> whole, later = Generation(prompt_tokens=9, started=1.0, tokens=[5]), Generation(tokens=[6, 7])
            >>> later.stop_reason, later.finished = "stop", 4.0
            >>> whole.absorb(later); (whole.prompt_tokens, whole.tokens, whole.stop_reason, whole.finished)
            (9, [5, 6, 7], 'stop', 4.0)
        """
        if not self.started:
            self.prompt_tokens, self.started = part.prompt_tokens, part.started
        self.evaluated += part.evaluated
        self.to_evaluate += part.to_evaluate
        self.tokens.extend(part.tokens)
        self.drafted, self.accepted = self.drafted + part.drafted, self.accepted + part.accepted
        self.on_device += part.on_device
        self.stop_reason, self.finished = part.stop_reason, part.finished
        self.first_token_at = self.first_token_at or part.first_token_at

    @property
    def ttft_s(self) -> float:
        return max(self.first_token_at - self.started, 0.0) if self.first_token_at else 0.0

    @property
    def tokens_per_s(self) -> float:
        span = self.finished - self.first_token_at
        return (len(self.tokens) - 1) / span if len(self.tokens) > 1 and span > 0 else 0.0


@dataclass(frozen=True)
class Shifted:
    """What ``Engine.shift`` did: ``kept`` cached tokens moved into place after the common prefix (0:
    nothing worth keeping; -1: this engine can't shift, ``why`` says so)."""

    kept: int
    why: str = ""


class LazyGrammar(str):
    """GBNF that applies from the first of its trigger texts on, the text before it free (llama.cpp's lazy
    grammar sampler; a tool call's opening): ``LazyGrammar(gbnf, ("<tool_call>",))`` is still the GBNF text.
    ``patterns``, where given, say where instead: ECMAScript regexes over the reply so far, the grammar
    starting at their first group (a call's opening only after a thought's close, say); ``ends``: the texts
    a match of theirs ends with, where those are not the triggers (trigger_guard.py watches for them)."""

    triggers: tuple[str, ...]
    patterns: tuple[str, ...]
    ends: tuple[str, ...]

    def __new__(cls, gbnf: str, triggers: Sequence[str], patterns: Sequence[str] = (),
                ends: Sequence[str] = ()) -> LazyGrammar:
        made = super().__new__(cls, gbnf)
        made.triggers, made.patterns, made.ends = tuple(triggers), tuple(patterns), tuple(ends) or tuple(triggers)
        return made


class BegunGrammar(str):
    """GBNF for a reply that began before the call (``--prefill``, ``/continue``): ``written``, the ids of its
    start, which end the prompt. The grammar reads them before it constrains the first token drawn, so the
    reply as a whole follows it: under ``root ::= "{" [a-z]+ "}"`` a reply begun ``{`` goes on ``ab}``, not
    ``{ab}`` again (an eager grammar only: a lazy one waits for its trigger in what is drawn)."""

    written: tuple[int, ...]

    def __new__(cls, gbnf: str, written: Sequence[int]) -> BegunGrammar:
        made = super().__new__(cls, gbnf)
        made.written = tuple(written)
        return made


class StartRefused(Exception):
    """The grammar of a ``BegunGrammar`` refuses the reply's start: ``at``, the index in ``written`` of the
    first id it refuses (nothing is drawn)."""

    def __init__(self, at: int):
        super().__init__(f"the grammar refuses the reply's start at its id {at}")
        self.at = at


def ecma_escaped(text: str) -> str:
    """Text as an ECMAScript regex matching it (std::regex refuses Python's escapes of letters)."""
    return "".join("\\" + ch if ch in "\\^$.|?*+()[]{}/" else ch for ch in text)


def triggers_of(grammar: str | None) -> tuple[str, ...]:
    """A lazy grammar's trigger texts; () for a grammar that applies from the first token."""
    return getattr(grammar, "triggers", ())


def trigger_patterns(grammar: str | None) -> list[str]:
    """A lazy grammar's triggers as llama.cpp's patterns: ECMAScript regexes whose first group is where
    the grammar starts (llama-grammar.cpp searches the reply so far for them)."""
    return list(getattr(grammar, "patterns", ()) or (f"({ecma_escaped(t)})" for t in triggers_of(grammar)))


@runtime_checkable
class Engine(Protocol):
    """Evaluates token ids and samples the reply's, keeping a cache of the prompt so far."""

    n_ctx: int               # the context size, in tokens
    threads: str             # the threads it uses, for /info ("2 (prompt evaluation: 2)", "the server's")
    name: str                # what runs it, for notes ("llama.cpp", "http://host:8080 (model)")
    placement: str           # where the layers went ("CPU only: …", "31/31 layers on the GPU", "the server's")

    def generate(self, ids: Sequence[int], sampling: Sampling, stop_ids: Sequence[int], gen: Generation,
                 progress: Progress | None = None, grammar: str | None = None) -> Iterator[int]:
        """Yield sampled ids for prompt ``ids`` until a stop id (not yielded), ``max_tokens`` or a full
        context; ``grammar`` (GBNF; a ``LazyGrammar`` from its trigger on) constrains them. ``gen`` records
        counts, times, the stop reason; a KeyboardInterrupt marks it "interrupted" and leaves the cache holding what it says."""
        ...

    def cached_ids(self) -> list[int]:
        """The ids whose keys and values the cache holds, in order (as far as this engine knows)."""
        ...

    def reset(self) -> None:
        """Forget the cached prompt: the next call evaluates everything."""
        ...

    def shift(self, ids: Sequence[int]) -> Shifted:
        """Make the cache hold the longest prefix of ``ids`` it can without evaluating: the common prefix,
        then cached tokens that continue ``ids`` moved into place (after old exchanges were dropped)."""
        ...

    def save_state(self, path: Path, weights: Path | None) -> tuple[int, str]:
        """Write the cache's state to ``path``, stamped with the weights it belongs to: (bytes written, "")
        or (0, why not). OSError when the file can't be written."""
        ...

    def load_state(self, path: Path, weights: Path | None) -> tuple[int, str]:
        """Restore a state ``save_state`` wrote: (ids restored, "") or (0, why it was not used)."""
        ...

    def lines(self, n: int) -> list:
        """``n`` engines whose replies are decoded together (``--batch -np N``), each for one line."""
        ...

    def use_prompt_cache(self, cache: object) -> None:
        """Restore the longest prefix a state kept by an earlier run shares with each prompt (an
        ``engines.prompt_cache.PromptCache``; None: off)."""
        ...

    def keep_prompt(self) -> str:
        """Keep the context's state for later runs, where worth it: "" or why it was not kept."""
        ...

    def grammar_problem(self, gbnf: str) -> str:
        """"" when the engine's grammar parser takes ``gbnf``, else its complaint."""
        ...

    def reference_tokenize(self, text: str, special: bool) -> list[int]:
        """The engine's own tokenization of ``text`` (no BOS): only for comparing ours against it."""
        ...

    def check_vocabulary(self, tokenizer: object, source: object) -> None:
        """Raise an AppError when ``tokenizer`` does not fit the weights (size, BOS, EOS)."""
        ...

    def close(self) -> None:
        ...


CTX_STEP = 256  # llama.cpp allocates the context in steps of 256 tokens


def context_size(requested: int) -> int:
    """What llama.cpp will allocate for ``-c requested``: rounded up to a step of 256 (0: the model's own)."""
    return 0 if requested == 0 else max(CTX_STEP, -(-requested // CTX_STEP) * CTX_STEP)


def state_path(conversation_file: Path) -> Path:
    """Where the state of a saved conversation lives: beside it, ``chat.json`` -> ``chat.json.kv`` (here,
    in the seam, so that the chat core's sessions folder names it as the engines do)."""
    return conversation_file.with_name(conversation_file.name + ".kv")


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items (ids, messages) two sequences share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


#: how old a temporary file of an atomic write must be before it counts as left by a killed writer (a write
#: of the largest state takes seconds; nothing holds one for ten minutes)
STALE_WRITE_S = 600
#: an atomic write's temporary file beside its target: ``.`` TARGET ``.`` mkstemp's eight characters ``.tmp``
_TEMPORARY = re.compile(r"\..+\.(?:kv|json)\.[a-z0-9_]{8}\.tmp")
_OUR_STARTS = (b"RMLKV", b"{")  # a state (kv_cache.py), a conversation (conversation.py)


def _left_by_a_killed_write(path: Path) -> bool:
    """Whether ``path`` is the temporary file of one of our atomic writes (its name, and what it starts
    with: a state or a conversation, or nothing yet) that a kill cut short over ``STALE_WRITE_S`` ago."""
    if not _TEMPORARY.fullmatch(path.name):
        return False
    try:
        if not path.is_file() or time.time() - path.stat().st_mtime < STALE_WRITE_S:
            return False
        with open(path, "rb") as handle:
            start = handle.read(5)
    except OSError:
        return False
    return not start or start.startswith(_OUR_STARTS)


def prune_oldest(folder: Path, cap: int, newest: Path | None = None,
                 owns: Callable[[Path], bool] | None = None) -> list[Path]:
    """Delete the oldest ``*.kv`` states of ``folder`` (the sessions', the prompt cache's) until its files
    together are within ``cap`` bytes; ``newest`` (the state just written) goes last, only when it alone is
    over the cap. ``owns``: where the folder may hold others' files (the prompt cache's can be pointed
    anywhere), only the files it says are ours count and go. The temporary files of writes a kill cut short
    go first. The states removed; a file that can't be removed is passed over."""
    try:
        files = [(p, p.stat()) for p in folder.iterdir() if p.is_file() and (owns is None or owns(p))]
        left = [p for p in folder.iterdir() if _left_by_a_killed_write(p)]
    except OSError:
        return []
    for path in left:
        with contextlib.suppress(OSError):
            path.unlink()
    total = sum(st.st_size for _, st in files)
    removed = []
    for path, st in sorted((f for f in files if f[0].suffix == ".kv"), key=lambda f: (f[0] == newest, f[1].st_mtime)):
        if total <= cap:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            total -= st.st_size
            removed.append(path)
    return removed
