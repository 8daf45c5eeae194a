"""The merge model: a pre-split word (byte-level) or a "▁"-chunk (SentencePiece) -> its ids.

* ``ByteLevelModel``: the word's UTF-8 bytes spelled as byte tokens, merged by rank (``bpe.merge_ranked``);
  a byte the vocabulary lacks is dropped (llama.cpp) or an unk (HF; ``fuse_unk``: a run of them is one).
* ``SentencePieceModel``: the chunk's characters merged by rank (a merge list) or by score (the tokens'
  scores), and a character that is no token handed to byte fallback (``fallback.ByteFallback``).

Every model answers through ``words``, a word cache whose miss runs ``encode_word``: the steady state of
encode is a regex ``findall`` and C-level dict hits, no Python frame per word. Worked example (GPT-2)::

    encode_word(" world")  ->  "Ġ" "w" "o" "r" "l" "d"  ->  merged by rank  ->  (995,)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cached_property
from itertools import compress, repeat
from typing import Any

from ..spec import ModelKind, TextIndex, TokenizerSpec
from ..speedups import Speedups
from . import bpe
from .byte_alphabet import spell
from .fallback import ByteFallback, byte_token_ids

#: cache entries are dropped wholesale past this many words; longer words are not cached.
CACHE_LIMIT = 200_000
CACHE_MAX_WORD = 256


class WordCache(dict):
    """word -> tuple of ids; a miss runs the merge loop (C-level lookups on hits)."""

    def __init__(self, encode_word: Callable[[str], tuple[int, ...]]):
        super().__init__()
        self.encode_word = encode_word

    def __missing__(self, word: str) -> tuple[int, ...]:
        ids = self.encode_word(word)
        if len(word) <= CACHE_MAX_WORD:
            if len(self) >= CACHE_LIMIT:
                self.clear()
            self[word] = ids
        return ids


class MergeModel(ABC):
    """What both kinds share: the vocabulary's index, the merge table (rank merges), the byte tokens, the
    word cache. ``width`` = vocabulary size + 1 keys the table (``left * width + right``); ``missing`` (=
    the vocabulary size) stands for a unit with no token, which never merges. ``options`` is the spec's
    model part (merges, ignore_merges, the unknown-token rules)."""

    fallback: ByteFallback | None = None  # SentencePiece's byte fallback stage; byte-level BPE has none

    def __init__(self, spec: TokenizerSpec, index: TextIndex, speedups: Speedups):
        self.spec, self.index, self.speedups = spec, index, speedups
        self.options = spec.model
        n = len(spec.vocab.tokens)
        self.width, self.missing = n + 1, n
        self.table = self._merge_table()
        self.byte_tokens = byte_token_ids(spec, index, self.missing)
        self.words = WordCache(self._word_encoder())

    @abstractmethod
    def encode_word(self, word: str) -> tuple[int, ...]:
        """The ids of one word (byte-level) or chunk (SentencePiece): what ``words`` caches."""

    def _word_encoder(self) -> Callable[[str], tuple[int, ...]]:
        """What the word cache runs on a miss (a subclass may pick its loop once, here, not per word)."""
        return self.encode_word

    def _merge_table(self) -> dict[int, int]:
        merges = self.options.merges
        if not merges:
            return {}
        table = self.speedups.merge_table(merges, self.index, self.width, self.spec.vocab.tokens)  # None: not handled
        if table is None:
            table = bpe.build_merge_table(merges, self.index, self.width, self.spec.source, self.spec.vocab.tokens)
        return table

    @cached_property
    def ranked(self) -> Any:
        """The accelerator's rank merger for this table (in C), built on the first word; None: Python only."""
        return self.speedups.ranked_merger(self.table, self.width, self.index)

    def merge_ranked(self, ids: list[int]) -> list[int]:
        """Rank merges, in C where it runs. A unit with no token (``missing``) is in no merge key, so it
        stays where it is, alone: the caller finds it there."""
        native = self.ranked
        merged = native.merge(ids) if native is not None else None
        return bpe.merge_ranked(ids, self.table, self.width) if merged is None else merged


class ByteLevelModel(MergeModel):
    def encode_word(self, word: str) -> tuple[int, ...]:
        raw = word.encode("utf-8")
        if self.options.ignore_merges:
            whole = self.index.get(spell(raw))
            if whole is not None:
                return (whole,)
        byte_tokens = self.byte_tokens
        ids = self.merge_ranked([byte_tokens[b] for b in raw])
        if self.missing in ids:  # a byte the vocabulary lacks: dropped (llama.cpp) or unk (HF)
            missing = self.missing
            unk = self.spec.vocab.unk_id if self.options.unk_for_missing_bytes else None
            ids = [unk if i == missing else i for i in ids if i != missing or unk is not None]
            if self.options.fuse_unk and unk is not None:  # HF fuse_unk: a run of unks is one
                ids = [i for n, i in enumerate(ids) if i != unk or not n or ids[n - 1] != unk]
        return tuple(ids)


class SentencePieceModel(MergeModel):
    """Chunks merged by rank (a merge list) or by score; ``newline_runs_whole``: a chunk of newlines only
    is one token where the vocabulary has it (the pre-split row says so)."""

    def __init__(self, spec: TokenizerSpec, index: TextIndex, speedups: Speedups, newline_runs_whole: bool):
        self.newline_runs_whole = newline_runs_whole
        super().__init__(spec, index, speedups)
        self.fallback = ByteFallback(spec, self.byte_tokens, self.missing)

    def encode_word(self, chunk: str) -> tuple[int, ...]:
        return self._word_encoder()(chunk)

    def _word_encoder(self) -> Callable[[str], tuple[int, ...]]:
        return self.encode_ranked if self.options.merges else self.encode_scored

    def encode_ranked(self, chunk: str) -> tuple[int, ...]:
        get = self.index.get
        if self.options.ignore_merges or (self.newline_runs_whole and not chunk.strip("\n")):
            whole = get(chunk)
            if whole is not None:
                return (whole,)
        native = self.ranked
        ids = native.encode(chunk) if native is not None else None
        if ids is None:  # no C loop here, or a chunk too long for it
            missing = self.missing
            units = list(map(get, chunk, repeat(missing)))
            lone = list(compress(chunk, map(missing.__eq__, units)))  # the characters with no token
            ids = bpe.merge_ranked(units, self.table, self.width)  # (merges units in place)
            if lone:  # a unit with no token never merges: the k-th one left is the k-th character with none
                chars = iter(lone)
                ids = [-1 - ord(next(chars)) if token == missing else token for token in ids]
        return self.fallback.fill(ids)

    @cached_property
    def scores(self) -> dict[str, float]:
        """Score-based merges in Python: text -> score (later duplicates win), built on first use."""
        return dict(zip(self.spec.vocab.tokens, map(float, self.spec.vocab.scores or [])))

    @cached_property
    def scored(self) -> Any:
        """The accelerator's score merger (in C), built on the first chunk; None: Python only."""
        return self.speedups.scored_merger(self.spec.vocab.tokens, self.spec.vocab.scores)

    def encode_scored(self, chunk: str) -> tuple[int, ...]:
        native = self.scored
        ids = native.encode(chunk) if native is not None else None
        if ids is None:  # no C loop here, or a chunk too long for it
            get = self.index.get  # a piece that is no token is a lone character (a merge always makes a token)
            scores = self.scores if native is None else native  # the C table's get() is the same prices
            ids = [get(piece, -1 - ord(piece[0])) for piece in bpe.merge_scored(list(chunk), scores)]
        return self.fallback.fill(ids)


def merge_model(spec: TokenizerSpec, index: TextIndex, speedups: Speedups,
                newline_runs_whole: bool = False) -> MergeModel:
    """The model stage for the spec's kind."""
    if spec.model.kind is ModelKind.BYTE_LEVEL:
        return ByteLevelModel(spec, index, speedups)
    return SentencePieceModel(spec, index, speedups, newline_runs_whole)
