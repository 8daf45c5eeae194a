"""Speculative decoding's drafts: tokens guessed ahead from the reply's own history, checked by the model
in one batched evaluation (``local.LocalEngine.generate`` verifies them).

A draft costs one evaluation of several positions instead of one evaluation per token: where the model
goes on as the draft says (a rewrite of code it was shown, a quote, a list that repeats), several tokens
come out of one evaluation. Where it doesn't, the first position still gives the token the model would
have written, so nothing is lost but the evaluation of the rejected positions.

The drafters are llama.cpp's n-gram ones (``common/ngram-map.cpp``, ``common/ngram-mod.cpp``,
``common/speculative.cpp``), with its names and defaults:

- ``ngram-simple``: the last ``size_n`` tokens (the last one just sampled) looked for, latest first, in
  the history before them; the ``size_m`` tokens that followed the match are the draft (no draft where
  fewer than ``size_n`` follow it). A worked example with ``size_n=2, size_m=3``::

      >>> NgramSimple(size_n=2, size_m=3).draft([9, 5, 6, 7, 8, 9, 1, 2, 5], 6)
      [7, 8, 9]

- ``ngram-map-k``: the last ``size_n`` tokens (the key) looked up in a map from each key to where it
  was first stored (the prompt's latest occurrence, then each new one the first time it is seen, as
  llama.cpp's ``key_map`` stores them); the ``size_m`` tokens after it are the draft, but no more than the
  model accepted the last time that key drafted. A key whose draft the model rejected at once drafts no
  more in that reply: a pattern that led it wrong stops costing a batch, one that held keeps its length.
  ``ngram-map-k4v`` drafts only where one of the m-grams that followed the key (up to four kinds) was
  seen at least twice as often as the others together. llama.cpp stores the map in a fixed hash table (a
  collision there is a miss); here it is exact (``NgramMap``).

- ``draft-simple``: a smaller model with the same vocabulary (``-md``) writes the draft greedily,
  ``--spec-draft-n-max`` tokens (3, llama.cpp's default), in a context of its own that follows the chat
  (``DraftModel``); a draft model whose vocabulary differs is refused (``vocabulary_difference``).

- ``ngram-mod``: every ``n_match``-gram of the history maps to the token that followed it (the latest
  wins); from the last ``n_match`` tokens the map is followed up to ``n_max`` steps; a chain shorter than
  ``n_min`` is no draft. Five rounds in a row that accept under a quarter of their draft clear the map,
  as llama.cpp's does. llama.cpp keeps the map in a fixed hash table whose collisions overwrite; here it
  is exact, so a draft here is never one a collision made up.

Every draft is capped by the room left (the reply's budget less one, the context less two, as
llama-server caps it). ``--spec-draft-n-max`` and ``--spec-draft-n-min`` (llama.cpp's sizes of a draft
model's drafts) cap and floor the n-gram drafts too, where given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from .base import common_prefix


@dataclass(frozen=True)
class Speculation:
    """llama.cpp's speculative settings (``common_params_speculative``), its names and defaults;
    ``spec_type`` "none": every token costs one evaluation."""

    spec_type: str = "none"
    draft_n_max: int = -1           # --spec-draft-n-max: a draft's longest (-1: the type's own size)
    draft_n_min: int = 0            # --spec-draft-n-min: a shorter draft is not checked
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

    @property
    def on(self) -> bool:
        return self.spec_type != "none"

    def drafter(self) -> Drafter | None:
        """A fresh drafter for one reply (None: speculation is off)."""
        if self.spec_type in NGRAM_TYPES:
            return NGRAM_TYPES[self.spec_type][0](**self.sizes())
        if self.spec_type == "draft-simple" and self.draft_model is not None:
            return DraftModel(self.draft_model, self.draft_n_max if self.draft_n_max >= 0 else 3)
        return None

    def sizes(self) -> dict[str, int]:
        """The settings the n-gram type takes, by its drafter's names ({} for the other types)."""
        taken = NGRAM_TYPES[self.spec_type][1] if self.spec_type in NGRAM_TYPES else {}
        return {name: getattr(self, setting) for name, setting in taken.items()}

    def cap(self, draft: list[int], room: int) -> list[int]:
        """The draft as checked: at most ``draft_n_max`` and ``room`` tokens, none under ``draft_n_min``."""
        longest = room if self.draft_n_max < 0 else min(self.draft_n_max, room)
        draft = draft[:max(0, longest)]
        return draft if draft and len(draft) >= self.draft_n_min else []

    def describe(self) -> str:
        """One line for /info and --json: the type and the sizes it uses."""
        if self.spec_type == "draft-simple":
            n = self.draft_n_max if self.draft_n_max >= 0 else 3
            return f"draft-simple (a draft model, {n} tokens a draft)" if self.draft_model is not None else \
                "none (draft-simple needs -md FILE)"
        if self.spec_type not in NGRAM_TYPES:
            return "none"
        sizes = ", ".join(f"{name}={value}" for name, value in self.sizes().items())
        bounds = f"; drafts of {self.draft_n_min}-{self.draft_n_max} tokens" if self.draft_n_max >= 0 else \
            f"; drafts of at least {self.draft_n_min} tokens" if self.draft_n_min > 0 else ""
        return f"{self.spec_type} ({sizes}{bounds})"


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


class Drafter(Protocol):
    def draft(self, history: Sequence[int], last: int) -> list[int]:
        """The tokens guessed to follow ``history`` and then ``last`` (the token just sampled)."""
        ...

    def accepted(self, drafted: int, accepted: int) -> None:
        """How many of the last draft's tokens the model wrote."""
        ...


class NgramSimple:
    """llama.cpp's ``ngram-simple`` (``common_ngram_simple_draft``): the latest earlier place where the
    last ``size_n`` tokens occur, and the ``size_m`` tokens after it.

    llama.cpp scans the history backwards at each token, which is cheap in C; a scan in Python costs
    some 200 µs a token in an 8,000-token chat, a seventh of a token on a GPU. So the n-grams are indexed
    as the history grows, each start once (the latest start of each n-gram wins, as the backward scan
    finds it), and a lookup is one dict access whatever the chat's length."""

    def __init__(self, size_n: int, size_m: int):
        self.size_n, self.size_m = size_n, size_m
        self._latest: dict[tuple[int, ...], int] = {}  # n-gram -> its latest start indexed
        self._indexed = 1  # the starts before this are in ``_latest`` (0 is never one: "no match")
        self._history: Sequence[int] = ()  # the list indexed, which the reply appends to

    def draft(self, history: Sequence[int], last: int) -> list[int]:
        n, m, length = self.size_n, self.size_m, len(history)
        if length <= n + m + 1:
            return []
        if history is not self._history or self._indexed > length - n:  # (another history: start again)
            self._latest.clear()
            self._history, self._indexed = history, 1
        for start in range(self._indexed, length - n):  # (the starts the backward scan looks at: up to
            self._latest[tuple(history[start:start + n])] = start  # the one that ends before ``last``'s n-gram)
        self._indexed = length - n
        start = self._latest.get((*history[length - n + 1:], last))
        if start is None:
            return []
        after = min(m, length - (start + n))
        return list(history[start + n:start + n + after]) if after >= n else []

    def accepted(self, drafted: int, accepted: int) -> None:
        pass


@dataclass
class _Value:
    """An m-gram seen after a key (llama.cpp's ``common_ngram_map_value``)."""

    place: int       # where it starts in the history
    seen: int = 0    # how often it followed the key (as counted: see ``NgramMap._count``)
    reach: int = 0   # tokens the last draft from it had accepted (the m-gram's size until then)


@dataclass
class _Key:
    """A key n-gram that drafted (llama.cpp's ``common_ngram_map_key``)."""

    counted_to: int = 0  # its occurrences up to here are counted
    hits: int = 0        # the drafts it was looked up for
    values: list[_Value] = field(default_factory=list)  # at most four m-grams seen after it


#: llama.cpp's limits: the m-grams kept for a key, and the highest count
MAX_VALUES, MAX_COUNT = 4, 16380


class NgramMap:
    """llama.cpp's ``ngram-map-k`` and ``ngram-map-k4v`` (``common_ngram_map_draft``): the last ``size_n``
    tokens, the key, looked up where it was first stored; the ``size_m`` tokens after that place are the
    draft, but no more than the model accepted the last time this key drafted.

    Stored places are llama.cpp's: at a reply's first draft the prompt's latest place of each key, then
    each new place only where its key has none yet; a key at position 0, or in the prompt's last
    ``size_n + size_m`` tokens, is never stored. ``ngram-map-k4v`` (``four_values``) also counts the
    m-grams that followed the key's earlier places (up to four of them) and drafts only where one was
    seen at least twice as often as the others together, and once the key was looked up ``min_hits``
    times. A drafter is fresh for each reply (llama-server keeps a slot's across its requests). Worked
    through with ``size_n=1, size_m=3``: the key ``(1,)`` stored at 1 drafts ``[2, 3, 4]``; the model takes
    one of them, and the next draft from that key is one token::

        >>> drafter = NgramMap(size_n=1, size_m=3)
        >>> drafter.draft([5, 1, 2, 3, 4, 0, 0, 0, 0], 1)
        [2, 3, 4]
        >>> drafter.accepted(3, 1)
        >>> drafter.draft([5, 1, 2, 3, 4, 0, 0, 0, 0, 1, 2, 9], 1)
        [2]
    """

    def __init__(self, size_n: int, size_m: int, four_values: bool = False, min_hits: int = 1):
        self.size_n, self.size_m, self.four_values, self.min_hits = size_n, size_m, four_values, min_hits
        self._place: dict[tuple[int, ...], int] = {}  # key n-gram -> where it starts (the first stored stays)
        self._stored_to = 0     # positions up to here are in ``_place`` (llama.cpp's key_map_last_idx)
        self._prompt = -1       # the history's length at the reply's first draft (its size_last_begin)
        self._keys: dict[tuple[int, ...], _Key] = {}
        self._drafted_from: _Value | None = None

    def _new_places(self, limit: int) -> list[int]:
        """The key positions not yet stored, latest first, as llama.cpp scans them: the prompt's (the
        first time), then the reply's."""
        n, m, prompt = self.size_n, self.size_m, self._prompt
        places = list(range(prompt - n - m - 1, self._stored_to, -1)) if prompt > n + m + 1 else []
        return places + list(range(limit, max(prompt, self._stored_to), -1))

    def draft(self, history: Sequence[int], last: int) -> list[int]:
        n, m, length = self.size_n, self.size_m, len(history)
        self._drafted_from = None
        if self._prompt < 0:
            self._prompt = length
        if length < 2 * n + m:
            return []
        key = (*history[length - n + 1:], last)
        limit = length - n - m - 1
        for j in self._new_places(limit):  # (latest first: a key not stored before gets its latest new place,
            self._place.setdefault(tuple(history[j:j + n]), j)  # where llama.cpp's search of them finds it)
        self._stored_to = max(limit, self._stored_to)
        place = self._place.get(key, 0)
        if not place:
            return []
        entry = self._keys.get(key)
        if entry is None:
            entry = self._keys[key] = _Key()
        entry.hits = min(entry.hits + 1, MAX_COUNT)
        if not self.four_values:
            if not entry.values:
                entry.values.append(_Value(place, reach=m))
            chosen = entry.values[0]
        else:
            if entry.hits < self.min_hits:
                return []
            self._count(entry, history, key, place)
            chosen = max(entry.values, key=lambda value: value.seen)  # (the first of equals, as llama.cpp's)
            others = sum(value.seen for value in entry.values) - chosen.seen
            if others > 0 and chosen.seen < 2 * others:
                return []
        self._drafted_from = chosen
        return list(history[place + n:place + n + min(m, chosen.reach)])  # (after the key's place, whichever
        # m-gram was counted most: llama.cpp's)

    def _count(self, entry: _Key, history: Sequence[int], key: tuple[int, ...], place: int) -> None:
        """The m-grams after the key's places from ``counted_to`` to ``place``, both counted (so the place
        itself once a draft, as llama.cpp counts it); a fifth kind is not kept."""
        n, m = self.size_n, self.size_m
        for i in range(entry.counted_to, place + 1):
            if tuple(history[i:i + n]) != key:
                continue
            after = history[i + n:i + n + m]
            value = next((v for v in entry.values if history[v.place:v.place + m] == after), None)
            if value is None and len(entry.values) < MAX_VALUES:
                value = _Value(i + n, reach=m)
                entry.values.append(value)
            if value is not None:
                value.seen = min(value.seen + 1, MAX_COUNT)
        entry.counted_to = place

    def accepted(self, drafted: int, accepted: int) -> None:
        if self._drafted_from is not None:
            self._drafted_from.reach = accepted


class NgramMod:
    """llama.cpp's ``ngram-mod``: n-gram -> next token, followed from the last ``n_match`` tokens."""

    def __init__(self, n_match: int, n_min: int, n_max: int):
        self.n_match, self.n_min, self.n_max = n_match, n_min, n_max
        self._next: dict[tuple[int, ...], int] = {}
        self._added = 0  # the history's n-grams in the map so far: those starting before this index
        self._low = 0    # rounds in a row that accepted under a quarter of their draft

    def draft(self, history: Sequence[int], last: int) -> list[int]:
        n = self.n_match
        if len(history) < n:
            return []
        if self._added + 32 < len(history):  # (new n-grams added in chunks, as llama.cpp does)
            for i in range(self._added, len(history) - n):
                self._next[tuple(history[i:i + n])] = history[i + n]
            self._added = len(history) - n
        window = [*history[len(history) - n + 1:], last]
        drafted: list[int] = []
        for _ in range(self.n_max):
            token = self._next.get(tuple(window[-n:]))
            if token is None:
                break
            drafted.append(token)
            window.append(token)
        return drafted if len(drafted) >= self.n_min else []

    def accepted(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        self._low = self._low + 1 if accepted / drafted < 0.25 else 0
        if self._low >= 5:
            self._next.clear()
            self._added, self._low = 0, 0


#: the n-gram types (llama.cpp's names): the drafter each makes, and the settings it takes, by the drafter's
#: argument -> the ``Speculation`` field (whose flag is ``--spec-`` and the field's name, as llama.cpp's)
NGRAM_TYPES: dict[str, tuple[Callable[..., Drafter], dict[str, str]]] = {
    "ngram-simple": (NgramSimple, {"size_n": "ngram_simple_size_n", "size_m": "ngram_simple_size_m"}),
    "ngram-map-k": (NgramMap, {"size_n": "ngram_map_k_size_n", "size_m": "ngram_map_k_size_m"}),
    "ngram-map-k4v": (partial(NgramMap, four_values=True),
                      {"size_n": "ngram_map_k4v_size_n", "size_m": "ngram_map_k4v_size_m",
                       "min_hits": "ngram_map_k4v_min_hits"}),
    "ngram-mod": (NgramMod, {"n_match": "ngram_mod_n_match", "n_min": "ngram_mod_n_min", "n_max": "ngram_mod_n_max"}),
}


class DraftModel:
    """llama.cpp's ``draft-simple``: the draft model's own context follows the chat (the ids it holds that
    the history still starts with are kept, the rest evaluated), then it writes ``n_max`` tokens greedily,
    each evaluated for the next. Its cache keeps them; the next draft keeps what the reply accepted."""

    def __init__(self, llama: object, n_max: int):
        self.llama, self.n_max = llama, n_max

    def draft(self, history: Sequence[int], last: int) -> list[int]:
        import numpy as np

        llama = self.llama
        ids = [*history, last]
        # (the last id is evaluated again: its logits are the draft's start)
        llama.keep(min(common_prefix(llama.cached, ids), len(ids) - 1))
        if len(ids) + self.n_max >= llama.n_ctx:
            return []
        todo = ids[len(llama.cached):]
        for start in range(0, len(todo), llama.n_ubatch):
            llama.eval(todo[start:start + llama.n_ubatch])
        drafted: list[int] = []
        for _ in range(self.n_max):
            token = int(np.argmax(llama.logits()))
            drafted.append(token)
            if len(drafted) < self.n_max:
                llama.eval([token])
        return drafted

    def accepted(self, drafted: int, accepted: int) -> None:
        pass


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
