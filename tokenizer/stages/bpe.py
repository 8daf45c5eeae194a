"""The merge loop: turn one pre-split word into token ids.

Two ways to pick the next merge, as the vocabularies define them:

* by rank (``merges`` lists pairs in priority order): the adjacent pair with
  the lowest rank merges first, leftmost on ties;
* by score (SentencePiece as stored in GGUF, no merge list): any adjacent pair
  whose concatenation is a token may merge, highest score first, leftmost on
  ties.

Worked example (rank): vocabulary a b c ab abc, merges "a b" (rank 0) and
"ab c" (rank 1). "abcab" starts as a|b|c|a|b; the lowest rank pair is (a, b)
at 0 and at 3 -> leftmost first: ab|c|a|b, then (a, b) again: ab|c|ab, then
(ab, c) rank 1: abc|ab. Result [abc, ab].

Performance notes (the hot path is a cache hit in core.py; this runs on misses):

* Pair lookups use one int key ``left * width + right`` (width = vocab size + 1)
  and one int value ``rank * width + merged_id``: a single dict probe gives both
  the priority and the result, and ``min`` over values orders by rank.
* Score-based SentencePiece merges on strings: a pair merges when the
  concatenation is a token. (An id-keyed pair table filled on demand was tried:
  on a first pass it costs more to fill than it saves.)
* Short words (the vast majority) keep one list of pair priorities: each merge
  is a C-level ``min`` + ``index`` and two new dict probes for the pairs that
  touch the merged symbol — O(n) per merge, all of it in C but the two probes.
  Long words switch to a heap over a linked list, O(n log n), so a 1 MB "word"
  with no split point stays linear-ish.
* ``width - 1`` (= vocab size) is a sentinel id for a unit that is not in the
  vocabulary: it appears in no merge key, so it never merges.
* The short-word loops have C twins in the optional accelerator (``accel/native.py``); ``core`` uses them
  where they run. The loops here stay the definition, take long words, and run where C does not
  (tests/test_accel_native.py holds the two to the same ids). A big merge list's table can likewise come
  from ``accel/bulk.py``; ``build_merge_table`` here is the definition of that table.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import add, mul
from typing import Any

from ..spec import MergePairs, Merges, TextIndex, TokenizerError

#: words longer than this use the heap-based loop.
SHORT_WORD = 128
#: the value of a pair that does not merge.
NONE = 1 << 62
#: the score of a pair that is not a token (score-based merges take the highest score first).
_NO_TOKEN = float("-inf")


def split_pairs(texts: list[str] | list[bytes]) -> MergePairs | None:
    """Merge texts "left right" (str, or UTF-8 bytes decoded with surrogate escapes) as columns, when each
    holds exactly one space and not first — where llama.cpp's and HF's rules agree; else None.

    One join, one decode and one split do it: "Ġ t", "h e" -> "Ġ t h e" -> [Ġ, t, h, e] -> lefts [Ġ, h],
    rights [t, e]. That every text has a space and that the joined text has 2n-1 of them proves that
    each has exactly one, so halves and texts line up."""
    if not texts:
        return MergePairs([], [])
    space: Any = b" " if isinstance(texts[0], bytes) else " "
    joined = space.join(texts)
    # every text has a space, not first (str.find / bytes.find > 0), and there are n in all
    if joined.count(space) != 2 * len(texts) - 1 or min(map(type(texts[0]).find, texts, repeat(space))) < 1:
        return None
    halves = (joined.decode("utf-8", "surrogateescape") if space == b" " else joined).split(" ")
    return MergePairs(halves[0::2], halves[1::2])


def build_merge_table(merges: Merges, vocab: TextIndex, width: int,
                      source: str, tokens: Sequence[str] = ()) -> dict[int, int]:
    """Merge table: key left*width+right -> rank*width+merged (width: vocabulary size + 1).

    Built with C-level maps, no Python loop per merge; a half or result missing from the vocabulary is a
    KeyError, turned into a TokenizerError naming the merge. When a pair is listed twice, its first
    (best) rank wins, as in llama.cpp.

    Most vocabularies list merge r's result at id ``first + r`` (GPT-2: "Ġ t" -> 256, "Ġ a" -> 257,
    ...; Qwen2, SmolLM2, StarCoder too; not Llama 3, whose 280k merges make 128k tokens). When
    ``tokens`` shows that layout (one C-level list comparison; and no text listed twice, which would
    make the index answer the later id), the results need no lookup and the values are a ``range``.
    """
    if not merges:
        return {}
    lefts, rights = merges.lefts, merges.rights
    try:  # a half that is no token, or no string at all (a tokenizer.json's [1, 2]), fails in here
        merged = list(map(add, lefts, rights))  # operator's functions: no slot-wrapper call
        first = vocab.get(merged[0], -1) if len(vocab) == len(tokens) else -1
        in_order = first >= 0 and tokens[first:first + len(merged)] == merged
        left_ids = list(map(vocab.__getitem__, lefts))
        right_ids = list(map(vocab.__getitem__, rights))
        merged_ids = range(first, first + len(merged)) if in_order else list(map(vocab.__getitem__, merged))
    except (KeyError, TypeError):
        problem = _first_bad_merge(lefts, rights, vocab)
        if problem is None:
            raise
        raise TokenizerError(f"{source}: {problem}") from None
    keys = list(map(add, map(mul, left_ids, repeat(width)), right_ids))
    if in_order:  # rank * width + first + rank
        values: Sequence[int] = range(first, first + len(merged) * (width + 1), width + 1)
    else:
        values = list(map(add, range(0, len(merged_ids) * width, width), merged_ids))
    return dict(zip(reversed(keys), reversed(values)))  # reversed: a repeated pair's first rank is written last


def _first_bad_merge(lefts: Sequence[Any], rights: Sequence[Any], vocab: TextIndex) -> str | None:
    """What is wrong with the first merge whose halves are not strings or whose halves or result are
    not in the vocabulary."""
    for rank, (left, right) in enumerate(zip(lefts, rights)):
        if type(left) is not str or type(right) is not str:
            return f"merge #{rank} ({left!r} {right!r}): its halves must be strings"
        for part, what in ((left, "left half"), (right, "right half"), (left + right, "result")):
            if part not in vocab:
                return f"merge #{rank} ({left!r} {right!r}): {what} {part!r} is not in the vocabulary"
    return None


def merge_ranked(ids: list[int], merges: dict[int, int], width: int) -> list[int]:
    """Apply rank-ordered merges to a list of symbol ids (modified and returned)."""
    if len(ids) > SHORT_WORD:
        return _merge_heap(ids, lambda a, b: _ranked_pair(merges, width, a, b))
    get = merges.get
    values = [get(a * width + b, NONE) for a, b in zip(ids, ids[1:])]
    while values:
        best = min(values)
        if best == NONE:
            break
        at = values.index(best)
        merged = best % width
        ids[at] = merged
        del ids[at + 1]
        del values[at]
        if at:  # only the two pairs that touch the merged symbol change
            values[at - 1] = get(ids[at - 1] * width + merged, NONE)
        if at < len(values):
            values[at] = get(merged * width + ids[at + 1], NONE)
    return ids


def _ranked_pair(merges: dict[int, int], width: int, a: int, b: int) -> tuple[int, int] | None:
    value = merges.get(a * width + b)
    return None if value is None else (value, value % width)


def merge_scored(symbols: list[str], scores: dict[str, float]) -> list[str]:
    """Apply score-based merges (SentencePiece BPE) to a list of symbol strings.

    ``scores`` maps every token's text to its score, so that one C-level ``dict.get`` with a default
    prices a pair (the highest merges first, leftmost on ties; a pair that is no token scores ``-inf``).
    Example with scores {"ab": 3, "bc": 5, "abc": 1}: a|b|c -> a|bc (5) -> abc.
    """
    if len(symbols) > SHORT_WORD:
        return _merge_heap(symbols, lambda a, b: _scored_pair(scores, a, b))
    get = scores.get
    values = list(map(get, map(add, symbols, symbols[1:]), repeat(_NO_TOKEN)))
    while values:
        best = max(values)
        if best == _NO_TOKEN:
            break
        at = values.index(best)
        merged = symbols[at] + symbols[at + 1]
        symbols[at] = merged
        del symbols[at + 1]
        del values[at]
        if at:
            values[at - 1] = get(symbols[at - 1] + merged, _NO_TOKEN)
        if at < len(values):
            values[at] = get(merged + symbols[at + 1], _NO_TOKEN)
    return symbols


def _scored_pair(scores: dict[str, float], a: str, b: str) -> tuple[float, str] | None:
    value = scores.get(a + b)
    return None if value is None else (-value, a + b)  # the heap pops the lowest: negate


def _merge_heap(symbols: list[Any], pair: Callable[[Any, Any], tuple[Any, Any] | None]) -> list[Any]:
    """Heap-driven merge loop over a linked list, for long words.

    ``pair(a, b)`` returns (priority, merged symbol) or None; lower priority
    merges first, then lower position. A popped entry is stale when its left
    symbol is gone or the pair at that place no longer gives the same result.
    """
    n = len(symbols)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    alive = [True] * n
    heap = []
    for i in range(n - 1):
        found = pair(symbols[i], symbols[i + 1])
        if found is not None:
            heap.append((found[0], i, found[1]))
    heapq.heapify(heap)
    while heap:
        priority, i, merged = heapq.heappop(heap)
        j = nxt[i]
        if not alive[i] or j >= n or pair(symbols[i], symbols[j]) != (priority, merged):
            continue
        symbols[i] = merged
        alive[j] = False
        nxt[i] = nxt[j]
        if nxt[j] < n:
            prv[nxt[j]] = i
        p = prv[i]
        if p >= 0:
            found = pair(symbols[p], merged)
            if found is not None:
                heapq.heappush(heap, (found[0], p, found[1]))
        q = nxt[i]
        if q < n:
            found = pair(merged, symbols[q])
            if found is not None:
                heapq.heappush(heap, (found[0], i, found[1]))
    return [s for s, keep in zip(symbols, alive) if keep]
