"""llama.cpp's n-gram drafters (``common/ngram-map.cpp``, ``common/ngram-mod.cpp``,
``common/ngram-cache.cpp``, ``common/speculative.cpp``), with its names and defaults: tokens guessed from
the chat's own history, for speculative decoding (speculative.py).

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

- ``ngram-mod``: every ``n_match``-gram of the history maps to the token that followed it (the latest
  wins); from the last ``n_match`` tokens the map is followed up to ``n_max`` steps; a chain shorter than
  ``n_min`` is no draft. Five rounds in a row that accept under a quarter of their draft clear the map,
  as llama.cpp's does. llama.cpp keeps the map in a fixed hash table whose collisions overwrite; here it
  is exact, so a draft here is never one a collision made up.

- ``ngram-cache`` (llama.cpp's lookup decoding): for each n-gram of 1 to 4 tokens, how often each token
  followed it; up to 8 tokens drafted one by one, each the one that most often followed the longest
  n-gram it was seen after often enough (``NgramCache``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol


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


#: llama.cpp's lookup decoding (``common/ngram-cache.cpp``): the n-gram sizes counted, and for each size
#: (1 to 4) the times a token must have followed the n-gram, and the share of its times, to be drafted
#: (its "lax" thresholds, which it applies to the chat's own n-grams, and its "strict" ones, for a
#: dynamic cache file's), and the size of a static cache file's n-grams
CACHE_SIZES = (1, 2, 3, 4)
CACHE_MIN_SEEN, CACHE_MIN_PERCENT = (2, 2, 1, 1), (66, 50, 50, 50)
CACHE_MIN_SEEN_STRICT, CACHE_MIN_PERCENT_STRICT = (4, 3, 2, 2), (75, 66, 66, 66)
CACHE_STATIC_SIZE = 2
CACHE_DRAFT = 8  # (its n_draft, fixed in llama.cpp's speculative.cpp)


class NgramCache:
    """llama.cpp's ``ngram-cache`` (lookup decoding, ``common_ngram_cache_draft``): for each n-gram of 1 to
    4 tokens, how often each token followed it. Up to ``CACHE_DRAFT`` tokens are drafted one at a time:
    after the history, then the draft so far, the longest n-gram whose most frequent follower was seen
    often enough and in a large enough share of its times (``CACHE_MIN_SEEN``, ``CACHE_MIN_PERCENT``) gives
    the next token; where none does, the draft ends.

    What it counts is what llama.cpp counts: at each draft, the history new since the last one and the
    token just sampled, as a piece on its own (an n-gram that starts before the piece is not counted). So
    the prompt is counted whole at the first draft, a reply written a token at a time adds nothing, and a
    draft the model took adds its own n-grams. Two followers seen equally often (each half the times, the
    one tie that can pass the thresholds) go to the one first seen later, the one llama.cpp's hash map
    lists first. Worked through: after 5, the 1-gram ``(5,)`` gives 6 (seen after it twice) and ``(5, 6)``
    gives 7; ``(5, 6, 7)`` was followed by 8 once and by 9 once, a tie that goes to 9, seen later; then the
    4-gram ``(5, 6, 7, 9)`` gives 5, and so on to 8 tokens::

        >>> NgramCache().draft([5, 6, 7, 8, 5, 6, 7, 9], 5)
        [6, 7, 9, 5, 6, 7, 9, 5]

    llama.cpp's cache files (lookup_cache.py) add two sources, read and never written, as llama-server
    reads them. Where the chat's own n-grams give no token, a ``dynamic`` cache (``-lcd``: n-grams of earlier
    text, 1 to 4 tokens) is asked with stricter thresholds (``CACHE_MIN_SEEN_STRICT``,
    ``CACHE_MIN_PERCENT_STRICT``); then a ``static`` one (``-lcs``: the 2-grams of a text, counted by
    ``llama-lookup-create``) gives the most frequent follower of the last two tokens, seen at least twice
    and at least half its times. The static cache also weighs the other two's choices: a follower it has
    seen after the last two tokens counts a hundred times its static count, the others once.
    """

    def __init__(self, static: LookupCounts | None = None, dynamic: LookupCounts | None = None) -> None:
        self._followers: dict[tuple[int, ...], dict[int, int]] = {}  # n-gram -> token -> times, first seen first
        self._counted = 0  # the history's tokens counted so far (llama.cpp's cache_size)
        self._static, self._dynamic = static, dynamic

    def draft(self, history: Sequence[int], last: int) -> list[int]:
        if self._counted < len(history) + 1:
            piece = [*history[self._counted:], last]
            for size in CACHE_SIZES:
                for i in range(size, len(piece)):
                    followers = self._followers.setdefault(tuple(piece[i - size:i]), {})
                    followers[piece[i]] = followers.get(piece[i], 0) + 1
            self._counted = len(history) + 1
        if len(history) + 1 < CACHE_STATIC_SIZE:
            return []
        tail = [*history[max(0, len(history) - CACHE_SIZES[-1] + 1):], last]  # (the last tokens, then the draft)
        drafted: list[int] = []
        while len(drafted) < CACHE_DRAFT:
            token = self._next(tail)
            if token is None:
                break
            drafted.append(token)
            tail.append(token)
        return drafted

    def _next(self, tail: list[int]) -> int | None:
        """The token drafted after ``tail``: the chat's n-grams, then the dynamic cache's, then the static's."""
        static = (self._static.followers(tuple(tail[-CACHE_STATIC_SIZE:])) if self._static is not None else None) or {}
        token = _most_often(self._followers.get, tail, static, CACHE_MIN_SEEN, CACHE_MIN_PERCENT)
        if token is None and self._dynamic is not None:
            token = _most_often(self._dynamic.followers, tail, static, CACHE_MIN_SEEN_STRICT, CACHE_MIN_PERCENT_STRICT)
        if token is None and static:
            best, times = max(reversed(static.items()), key=lambda item: item[1])  # (a tie: the one listed later)
            total = sum(static.values())
            if total >= CACHE_MIN_SEEN[CACHE_STATIC_SIZE - 1] and \
                    100 * times >= CACHE_MIN_PERCENT[CACHE_STATIC_SIZE - 1] * total:
                token = best
        return token

    def accepted(self, drafted: int, accepted: int) -> None:
        pass


class LookupCounts(Protocol):
    def followers(self, ngram: tuple[int, ...]) -> dict[int, int] | None:
        """The tokens that followed ``ngram`` and their counts, first seen first (None: never seen)."""
        ...


def _most_often(followers_of: Callable[[tuple[int, ...]], dict[int, int] | None], tail: list[int],
                static: dict[int, int], min_seen: tuple[int, ...], min_percent: tuple[int, ...]) -> int | None:
    """llama.cpp's ``try_draft``: from the longest n-gram of ``tail`` down, its most frequent follower (each
    count times a hundred times its count in ``static``, where the static cache has it), where that
    follower was seen often enough and in a large enough share of the n-gram's times."""
    for size in reversed(CACHE_SIZES):
        followers = followers_of(tuple(tail[-size:])) if len(tail) >= size else None
        if not followers:
            continue
        best, times, weight = None, 0, 0
        for token, seen in reversed(followers.items()):  # (a tie: the one first seen later)
            token_weight = 100 * static[token] if token in static else 1
            if seen * token_weight > times * weight:
                best, times, weight = token, seen, token_weight
        total = sum(followers.values())
        if total >= min_seen[size - 1] and 100 * times >= min_percent[size - 1] * total:
            return best
    return None


#: the n-gram types (llama.cpp's names): the drafter each makes, and the settings it takes, by the drafter's
#: argument -> the ``Speculation`` field (whose flag is ``--spec-`` and the field's name, as llama.cpp's)
NGRAM_TYPES: dict[str, tuple[Callable[..., Drafter], dict[str, str]]] = {
    "ngram-simple": (NgramSimple, {"size_n": "ngram_simple_size_n", "size_m": "ngram_simple_size_m"}),
    "ngram-map-k": (NgramMap, {"size_n": "ngram_map_k_size_n", "size_m": "ngram_map_k_size_m"}),
    "ngram-map-k4v": (partial(NgramMap, four_values=True),
                      {"size_n": "ngram_map_k4v_size_n", "size_m": "ngram_map_k4v_size_m",
                       "min_hits": "ngram_map_k4v_min_hits"}),
    "ngram-mod": (NgramMod, {"n_match": "ngram_mod_n_match", "n_min": "ngram_mod_n_min", "n_max": "ngram_mod_n_max"}),
    "ngram-cache": (NgramCache, {}),
}
