"""Speculative decoding: tokens guessed ahead, checked by the model in one batched evaluation
(``local.LocalEngine.generate`` verifies them).

A draft costs one evaluation of several positions instead of one evaluation per token: where the model
goes on as the draft says (a rewrite of code it was shown, a quote, a list that repeats), several tokens
come out of one evaluation. Where it doesn't, the first position still gives the token the model would
have written, so nothing is lost but the evaluation of the rejected positions.

The types are llama.cpp's (``--spec-type``): its n-gram drafters, which guess from the chat's own history
(ngram_drafts.py), and ``draft-simple``: a smaller model with the same vocabulary (``-md``) writes the draft
greedily, ``--spec-draft-n-max`` tokens (3, llama.cpp's default), in a context of its own that follows the
chat (``DraftModel``), or, under ``-np``, in a sequence of its context for each line, all lines drafted
at once (``draft_greedily``); a draft model whose vocabulary differs is refused (``vocabulary_difference``).
Several types at once (``--spec-type ngram-mod,draft-simple``) are asked in llama.cpp's order until one
drafts (``FirstDraft``).

Every draft is capped by the room left (the reply's budget less one, the context less two, as
llama-server caps it). ``--spec-draft-n-max`` and ``--spec-draft-n-min`` (llama.cpp's sizes of a draft
model's drafts) cap and floor the n-gram drafts too, where given. Then, unless ``--spec-draft-fit off``,
each draft is cut to the length expected to pay on this machine (``draft_fit.py``): what is left is one of
llama.cpp's drafts, or its start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .base import common_prefix
from .ngram_drafts import NGRAM_TYPES, Drafter, NgramCache

if TYPE_CHECKING:
    from .lookup_cache import LookupCache  # (numpy: only where a cache file is read)

__all__ = ["NGRAM_TYPES", "NO_SPECULATION", "SPEC_DEFAULT", "TYPE_ORDER", "DraftModel", "DraftPlace", "DraftSequence",
           "Drafter", "FirstDraft", "Speculation", "WholeContext", "added_types", "checked", "draft_greedily", "spec_types",
           "vocabulary_difference"]


#: llama.cpp's order of preference among the types of one ``--spec-type`` list (``common_speculative_init``):
#: at each step they are asked in this order, and the first that drafts makes the step's draft
TYPE_ORDER = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache", "draft-simple")


def spec_types(value: str) -> tuple[str, ...]:
    """The types a ``--spec-type`` value names (one, or a comma-separated list), in llama.cpp's order;
    "none" anywhere in it is none, as llama.cpp reads it. A name not in ``TYPE_ORDER`` is a ValueError::

        >>> spec_types("draft-simple,ngram-mod"), spec_types("ngram-mod,none")
        (('ngram-mod', 'draft-simple'), ())
    """
    names = value.split(",")
    unknown = [name for name in names if name not in (*TYPE_ORDER, "none")]
    if unknown:
        raise ValueError(f"unknown speculative type {unknown[0]!r}")
    return () if "none" in names else tuple(name for name in TYPE_ORDER if name in names)


def added_types(earlier: str, later: str) -> str:
    """``--spec-type`` given again, or after ``--spec-default``: llama.cpp adds the later value's types to
    the earlier ones (a value with "none" in it adds none, and takes none away)::

        >>> added_types("ngram-mod", "ngram-simple"), added_types("ngram-mod", "none"), added_types("none", "none")
        ('ngram-simple,ngram-mod', 'ngram-mod', 'none')
    """
    both = {*spec_types(earlier), *spec_types(later)}
    return ",".join(name for name in TYPE_ORDER if name in both) or "none"


@dataclass(frozen=True)
class Speculation:
    """llama.cpp's speculative settings (``common_params_speculative``), its names and defaults;
    ``spec_type`` "none": every token costs one evaluation."""

    spec_type: str = "none"         # --spec-type: one type, or several, comma-separated (``spec_types``)
    draft_n_max: int = -1           # --spec-draft-n-max: a draft's longest (-1: the type's own size)
    draft_n_min: int = 0            # --spec-draft-n-min: a shorter draft is not checked
    draft_fit: bool = True          # --spec-draft-fit: each draft cut to what checking it costs (draft_fit.py)
    ngram_simple_size_n: int = 12   # --spec-ngram-simple-size-n: the n-gram looked up
    ngram_simple_size_m: int = 48   # --spec-ngram-simple-size-m: the m-gram after it, drafted
    ngram_map_k_size_n: int = 12    # --spec-ngram-map-k-size-n: the key n-gram looked up
    ngram_map_k_size_m: int = 48    # --spec-ngram-map-k-size-m: the m-gram after it, drafted
    ngram_map_k4v_size_n: int = 12  # --spec-ngram-map-k4v-size-n
    ngram_map_k4v_size_m: int = 48  # --spec-ngram-map-k4v-size-m
    ngram_map_k4v_min_hits: int = 1  # --spec-ngram-map-k4v-min-hits: lookups of a key before it drafts
    ngram_mod_n_match: int = 24     # --spec-ngram-mod-n-match
    ngram_mod_n_min: int = 48       # --spec-ngram-mod-n-min
    ngram_mod_n_max: int = 64       # --spec-ngram-mod-n-max
    draft_model: object = None      # -md: the draft model's llama.cpp context (runtime.LlamaModel), loaded
    lookup_cache_static: LookupCache | None = None   # -lcs: llama.cpp's file of a text's 2-grams, read
    lookup_cache_dynamic: LookupCache | None = None  # -lcd: its file of earlier text's 1- to 4-grams, read

    @property
    def types(self) -> tuple[str, ...]:
        """The types asked for, in llama.cpp's order (none: speculation off)."""
        return spec_types(self.spec_type)

    @property
    def on(self) -> bool:
        return bool(self.types)

    @property
    def draft_model_n_max(self) -> int:
        """The tokens a draft model drafts at a time: ``--spec-draft-n-max``, else llama.cpp's 3."""
        return self.draft_n_max if self.draft_n_max >= 0 else 3

    def drafter(self, model: bool = True) -> Drafter | None:
        """A fresh drafter for one reply (None: speculation is off, or its one type can't draft here);
        without the draft model where not ``model`` (``-np``: parallel.py drafts with it for every line at
        once, where the line's other types drafted nothing)."""
        drafters = [found for found in (self._drafter(spec_type, model) for spec_type in self.types)
                    if found is not None]
        return None if not drafters else drafters[0] if len(drafters) == 1 else FirstDraft(drafters)

    def _drafter(self, spec_type: str, model: bool) -> Drafter | None:
        if spec_type == "ngram-cache":
            return NgramCache(static=self.lookup_cache_static, dynamic=self.lookup_cache_dynamic)
        if spec_type in NGRAM_TYPES:
            return NGRAM_TYPES[spec_type][0](**self.sizes(spec_type))
        if spec_type == "draft-simple" and self.draft_model is not None and model:
            return DraftModel(self.draft_model, self.draft_model_n_max)
        return None

    def sizes(self, spec_type: str) -> dict[str, int]:
        """The settings an n-gram type takes, by its drafter's names ({} for the other types)."""
        taken = NGRAM_TYPES[spec_type][1] if spec_type in NGRAM_TYPES else {}
        return {name: getattr(self, setting) for name, setting in taken.items()}

    def cap(self, draft: list[int], room: int) -> list[int]:
        """The draft as checked: at most ``draft_n_max`` and ``room`` tokens, none under ``draft_n_min``."""
        longest = room if self.draft_n_max < 0 else min(self.draft_n_max, room)
        draft = draft[:max(0, longest)]
        return draft if draft and len(draft) >= self.draft_n_min else []

    def contradiction(self) -> str | None:
        """Bounds under which no draft could ever be checked, said as the flags say them (None: none).
        llama.cpp takes them without a word, and speculates never; here they are a usage line::

            >>> Speculation("ngram-simple", draft_n_max=3, draft_n_min=5).contradiction()
            '--spec-draft-n-min 5 is above --spec-draft-n-max 3: no draft would ever be checked'
        """
        if 0 <= self.draft_n_max < self.draft_n_min:
            return (f"--spec-draft-n-min {self.draft_n_min} is above --spec-draft-n-max {self.draft_n_max}: "
                    "no draft would ever be checked")
        if self.ngram_mod_n_min > self.ngram_mod_n_max:  # (whatever the type: /set spec-type may choose it)
            return (f"--spec-ngram-mod-n-min {self.ngram_mod_n_min} is above --spec-ngram-mod-n-max "
                    f"{self.ngram_mod_n_max}: ngram-mod would never draft")
        return None

    def describe(self) -> str:
        """One line for /info and --json: each type and the sizes it uses, in the order they are asked."""
        if self.types == ("draft-simple",) and self.draft_model is None:
            return "none (draft-simple needs -md FILE)"
        return ", then ".join(map(self._describe, self.types)) or "none"

    def _describe(self, spec_type: str) -> str:
        if spec_type == "draft-simple":
            if self.draft_model is None:
                return "draft-simple (drafts nothing: it needs -md FILE)"
            return f"draft-simple (a draft model, {self.draft_model_n_max} tokens a draft)"
        sizes = ", ".join(f"{name}={value}" for name, value in self.sizes(spec_type).items())
        bounds = f"drafts of {self.draft_n_min}-{self.draft_n_max} tokens" if self.draft_n_max >= 0 else \
            f"drafts of at least {self.draft_n_min} tokens" if self.draft_n_min > 0 else ""
        fit = "" if self.draft_fit else "drafts checked whole"
        files = "; ".join(f"{kind} {cache.describe()}" for kind, cache in
                          (("static", self.lookup_cache_static), ("dynamic", self.lookup_cache_dynamic))
                          if cache is not None and spec_type == "ngram-cache")
        told = "; ".join(part for part in (sizes, bounds, fit, files) if part)
        return f"{spec_type} ({told})" if told else spec_type


def checked(draft: list[int], sample: Callable[[int], int]) -> list[int]:
    """What the sampler chain writes over a drafted batch, position by position (``sample(i)``: the token
    at batch position ``i``, the one before the draft first), as it would one token at a time: the draft's
    accepted start, then the token it wrote instead, or the one after the whole draft::

        >>> checked([5, 6, 7], lambda i: [5, 6, 9, 1][i]), checked([5, 6], lambda i: [5, 6, 8][i])
        ([5, 6, 9], [5, 6, 8])
    """
    written = []
    for i in range(len(draft) + 1):
        written.append(sample(i))
        if i == len(draft) or written[-1] != draft[i]:
            break
    return written


#: speculation off, as llama.cpp's default
NO_SPECULATION = Speculation()

#: llama.cpp's --spec-default: ngram-mod with these sizes
SPEC_DEFAULT = Speculation("ngram-mod", ngram_mod_n_match=24, ngram_mod_n_min=48, ngram_mod_n_max=64)


class FirstDraft:
    """Several types at once, as llama.cpp runs them: each drafter asked in turn (``TYPE_ORDER``) until one
    drafts; the model's acceptance goes to the one that drafted. A drafter not asked at a step learns the
    history it missed at its next draft, as llama.cpp's do."""

    def __init__(self, drafters: list[Drafter]):
        self.drafters = drafters
        self._drafted_by: Drafter | None = None

    def draft(self, history: Sequence[int], last: int) -> list[int]:
        self._drafted_by = None
        for drafter in self.drafters:
            drafted = drafter.draft(history, last)
            if drafted:
                self._drafted_by = drafter
                return drafted
        return []

    def accepted(self, drafted: int, accepted: int) -> None:
        if self._drafted_by is not None:
            self._drafted_by.accepted(drafted, accepted)


class DraftModel:
    """llama.cpp's ``draft-simple`` for one reply at a time: the draft model's context of its own follows
    the chat and writes ``n_max`` tokens greedily (``draft_greedily``). Its cache keeps them; the next draft
    keeps what the reply accepted."""

    def __init__(self, llama: object, n_max: int):
        self.place, self.n_max = WholeContext(llama), n_max

    def draft(self, history: Sequence[int], last: int) -> list[int]:
        return draft_greedily(self.place.llama, [(self.place, [*history, last])], self.n_max)[0]

    def accepted(self, drafted: int, accepted: int) -> None:
        pass


class WholeContext:
    """A draft model's context, all of it for one chat (sequence 0), as ``draft_greedily`` asks of a
    chat's place in it: ``seq``, ``cached``, ``keep`` and ``n_ctx``."""

    seq = 0

    def __init__(self, llama: object):
        self.llama, self.n_ctx = llama, llama.n_ctx  # type: ignore[attr-defined]

    @property
    def cached(self) -> list[int]:
        return self.llama.cached  # type: ignore[attr-defined]

    def keep(self, n: int) -> None:
        self.llama.keep(n)  # type: ignore[attr-defined]
        self.llama.seq_drop(0, len(self.cached))  # type: ignore[attr-defined]  (nothing stale after, as eval)


class DraftSequence:
    """One ``-np`` line's place in a draft model's context: its sequence ``seq`` (the line's own id in the
    model's context, 1 to ``slots``). The lines share the context's cells, a ``slots``-th each, so a line
    whose chat outgrows its share drafts no more; a new line on the sequence starts it afresh."""

    def __init__(self, llama: object, seq: int, slots: int):
        self.llama, self.seq = llama, seq
        self.n_ctx = llama.n_ctx // slots  # type: ignore[attr-defined]
        self.cached: list[int] = []
        llama.seq_drop(seq)  # type: ignore[attr-defined]  (what the sequence's last line left)

    def keep(self, n: int) -> None:
        if n < len(self.cached):
            n = n if self.llama.drops_part else 0  # type: ignore[attr-defined]
            self.llama.seq_drop(self.seq, n)  # type: ignore[attr-defined]
            del self.cached[n:]


class DraftPlace(Protocol):
    """A chat's place in a draft model's context: ``WholeContext`` or ``DraftSequence``."""

    seq: int
    n_ctx: int

    @property
    def cached(self) -> list[int]: ...

    def keep(self, n: int) -> None: ...


def draft_greedily(llama: object, chats: Sequence[tuple[DraftPlace, list[int]]], n_max: int) -> list[list[int]]:
    """A draft model's drafts of ``n_max`` greedy tokens for each chat (its place in the model's context,
    and its ids: the history, then the token just sampled), all chats at once, as llama-server drafts for
    its slots (``common_speculative_impl_draft_simple::draft``): one batch for each drafted position.

    First each chat's place follows its ids: the ids it holds that the chat still starts with are kept
    (the last id is always evaluated again: its logits give the draft's first token), and the rest are
    evaluated, the chats' rows sharing micro-batches. Then each drafted token is evaluated for the next::

        chat A  [kept][new ids][last A] -> a1   [a1] -> a2   [a2] -> a3
        chat B  [kept][last B]          -> b1   [b1] -> b2   [b2] -> b3
                the catch-up, shared batches    one batch    one batch

    So three chats drafting three tokens each cost three evaluations (of three rows), not nine. A chat too
    long for its place (its ids and the draft past ``n_ctx``) drafts nothing.
    """
    drafts: list[list[int]] = [[] for _ in chats]
    rows: list[tuple[int, int, bool]] = []  # (the chat's index, a token, whether its logits draft)
    for k, (place, ids) in enumerate(chats):
        place.keep(min(common_prefix(place.cached, ids), len(ids) - 1))
        if len(ids) + n_max < place.n_ctx:
            todo = ids[len(place.cached):]
            rows += [(k, token, i == len(todo) - 1) for i, token in enumerate(todo)]
    step = llama.n_ubatch  # type: ignore[attr-defined]
    for start in range(0, len(rows), step):
        _evaluated(llama, chats, rows[start:start + step], drafts)
    for _ in range(n_max - 1):
        rows = [(k, draft[-1], True) for k, draft in enumerate(drafts) if draft]
        if not rows:
            break
        _evaluated(llama, chats, rows, drafts)
    return drafts


def _evaluated(llama: object, chats: Sequence[tuple[DraftPlace, list[int]]], rows: list[tuple[int, int, bool]],
               drafts: list[list[int]]) -> None:
    """One decode of ``rows``, each token after its chat's cached ids (a chat's rows in order); a row with
    logits adds their most likely token to its chat's draft."""
    import numpy as np

    positions, seqs = [], []
    for k, token, _ in rows:
        place = chats[k][0]
        positions.append(len(place.cached))
        seqs.append(place.seq)
        place.cached.append(token)
    llama.decode_seqs([token for _, token, _ in rows], positions, seqs, [wants for _, _, wants in rows])  # type: ignore[attr-defined]
    for i, (k, _, wants) in enumerate(rows):
        if wants:
            drafts[k].append(int(np.argmax(llama.logits(i))))  # type: ignore[attr-defined]


def vocabulary_difference(target: object, draft: object) -> str:
    """Why a draft model can't draft for the target, as llama.cpp checks it (``common_speculative_are_
    compatible``), on the two tokenizers we built: the same BOS and EOS, sizes within 128, and the same
    token text from id 5 on; "" when it can."""
    if (target.add_bos, target.bos_id) != (draft.add_bos, draft.bos_id):  # type: ignore[attr-defined]
        return f"its BOS is {draft.bos_id} where the model's is {target.bos_id}"  # type: ignore[attr-defined]
    if target.eos_id != draft.eos_id:  # type: ignore[attr-defined]
        return f"its EOS is {draft.eos_id} where the model's is {target.eos_id}"  # type: ignore[attr-defined]
    ours, theirs = target.vocab, draft.vocab  # type: ignore[attr-defined]
    if abs(len(ours) - len(theirs)) > 128:
        return f"its vocabulary has {len(theirs)} tokens where the model's has {len(ours)}"
    for i in range(5, min(len(ours), len(theirs))):
        if ours[i] != theirs[i]:
            return f"its token {i} is {theirs[i]!r} where the model's is {ours[i]!r}"
    return ""
