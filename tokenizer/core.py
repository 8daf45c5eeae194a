"""Tokenizer: special-token cutting, encode, decode — one engine for every loader.

Encoding a text (see ``encode``):

1. cut out special tokens (``specials.SpecialCutter``: user-defined always,
   control too when ``parse_special``), longest match first;
2. byte-level BPE: pre-split each fragment (``pretokenizers``), spell each
   piece in the byte alphabet, merge by rank (``bpe``);
   SentencePiece: prefix a space where llama.cpp does, write spaces as "▁",
   merge the fragment (by score or rank), fall back to ``<0xXX>`` byte tokens;
3. ``add_special`` adds BOS/EOS as the spec says.

Performance: every word (byte-level) or "▁"-chunk (SentencePiece) goes
through a dict subclass whose ``__missing__`` runs the merge loop, so the
steady state is ``findall`` + one C-level ``map(cache.__getitem__)`` feeding
``out.extend`` — no Python frame per word. SentencePiece text is cut into chunks at
each "x▁" boundary whose two characters never occur together inside any
token: no merge can cross such a boundary (a merge always yields a vocabulary
token), so chunks tokenize independently and can be cached like words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cached_property, partial
from itertools import compress, repeat
from typing import Any

from .spec import ModelKind, SpacePrefix, TokenizerError, TokenizerSpec, TokenType, validate
from .speedups import Speedups, installed
from .stages import bpe, pretokenizers
from .stages.byte_alphabet import BYTE_TO_CHAR, spell
from .stages.decode import Decoding
from .stages.normalize import normalize
from .stages.specials import ASCII_SPACE, UNICODE_SPACE, SpecialCutter
from .stages.token_bytes import SPECIAL_TYPES as _SPECIAL_TYPES

_CONTROLISH = frozenset({TokenType.CONTROL, TokenType.UNKNOWN})
_SPACE_LEADS = {ModelKind.SENTENCEPIECE: (" ", "\u2581"), ModelKind.BYTE_LEVEL: " "}
_NO_PREFIX, _EVERY_FRAGMENT, _UNLESS_SPACE = SpacePrefix.NONE, SpacePrefix.EVERY_FRAGMENT, SpacePrefix.UNLESS_SPACE
_SURROGATE = re.compile("[\ud800-\udfff]")
#: cache entries are dropped wholesale past this many words; longer words are not cached.
_CACHE_LIMIT = 200_000
_CACHE_MAX_WORD = 256
_CACHE_MAX_FALLBACKS = 4096  # characters whose byte-fallback ids are kept


class _WordCache(dict):
    """word -> tuple of ids; a miss runs the merge loop (C-level lookups on hits)."""

    def __init__(self, encode_word: Callable[[str], tuple[int, ...]]):
        super().__init__()
        self.encode_word = encode_word

    def __missing__(self, word: str) -> tuple[int, ...]:
        ids = self.encode_word(word)
        if len(word) <= _CACHE_MAX_WORD:
            if len(self) >= _CACHE_LIMIT:
                self.clear()
            self[word] = ids
        return ids


class Tokenizer(Decoding):
    """Text <-> token ids for one vocabulary: ``tokenizer.load(path)``, or ``Tokenizer(spec)`` for tables of
    your own (``TokenizerError`` says what is wrong with them).

    ``spec`` is what it was built from, part by part (``tokenizer.spec``: vocabulary, normalizer, pre-split,
    model, added tokens, post-process, decoder), as HF's ``Tokenizer`` shows its pipeline: read it to see
    what a loader read. Treat it as read-only; for a changed tokenizer build a new one from a changed copy,
    ``Tokenizer(dataclasses.replace(tok.spec, ...))``.

    ``speedups``: the accelerator's hooks (``tokenizer.speedups``; None: whatever is installed, and
    ``speedups.REFERENCE`` for the reference path alone): the same ids either way."""

    def __init__(self, spec: TokenizerSpec, speedups: Speedups | None = None):
        validate(spec)
        self.spec = spec
        self._speedups = installed() if speedups is None else speedups
        self.vocab_size = n = len(spec.vocab.tokens)
        self._tokens = spec.vocab.tokens
        self._types: list[int] = list(spec.vocab.types) if spec.vocab.types is not None else [TokenType.NORMAL] * n
        self._vocab = dict(zip(spec.vocab.tokens, range(n)))  # later duplicates win, as in llama.cpp
        self._width = n + 1
        self._missing = n  # sentinel id: a unit with no token (never merges)
        self._merges = self._build_merge_table()
        self._byte_tokens = self._build_byte_tokens()
        self._fallbacks: dict[str, tuple[int, ...]] = {}  # a character with no token -> its ids (_fallback_ids)
        self._pieces: dict[int, bytes] = {}  # token_bytes of single tokens, before the whole table exists
        self._few_cutters: dict[frozenset[str], SpecialCutter] = {}  # split_special(among=...)
        self._unk_alone = () if spec.vocab.unk_id is None else (spec.vocab.unk_id,)
        self._unk_fuses = bool(spec.model.fuse_unk and spec.vocab.unk_id is not None)
        specials = [(spec.vocab.tokens[i], i) for i in compress(range(n), map(_SPECIAL_TYPES.__contains__, self._types))]
        specials += [(spec.vocab.tokens[i], i) for i in sorted(spec.added.byte_ids)]
        self._special_texts = {text: i for text, i in specials if text}
        raw = [(text, i) for text, i in specials if i not in spec.added.normalized_ids]
        self._cut_all = self._cutter(raw)
        self._cut_user = self._cutter([(text, i) for text, i in raw if self._types[i] == TokenType.USER_DEFINED])
        self._cut_normalized = self._cutter([(normalize(text, spec.normalizer.forms), i) for text, i in specials
                                             if i in spec.added.normalized_ids]) if spec.added.normalized_ids else None
        self._as_is = not spec.normalizer.forms and self._cut_normalized is None  # fragments need no normalizing
        # read for every fragment or word-cache miss: kept here, one attribute away (a text of many added
        # tokens has a fragment between each two)
        self._model, self._forms = spec.model, spec.normalizer.forms
        self._space_prefix, self._space_leads = spec.normalizer.space_prefix, _SPACE_LEADS[spec.model.kind]
        self._sentencepiece = spec.model.kind is ModelKind.SENTENCEPIECE
        default_pre = "default" if spec.model.kind is ModelKind.BYTE_LEVEL else "none"
        self._pre = pretokenizers.lookup(spec.pre_split.name or default_pre)[0]
        if spec.pre_split.patterns:
            try:
                split = pretokenizers.compile_split(spec.pre_split.patterns, spec.pre_split.behaviors)
            except (re.error, ValueError, TypeError) as err:
                raise TokenizerError(f"{spec.source}: a pre-split pattern is not a valid regex ({err})") from None
        else:
            split = pretokenizers.splitter_for(self._pre)
        if spec.model.kind is ModelKind.BYTE_LEVEL:
            self._split = split
            self._cache = _WordCache(self._encode_byte_word)
        else:
            no_pre_split = not spec.pre_split.patterns and not self._pre.patterns and not self._pre.fused
            self._split = pretokenizers.sentencepiece_splitter(self._tokens, None if no_pre_split else split)
            encode_chunk = self._encode_ranked_chunk if spec.model.merges else self._encode_scored_chunk
            self._cache = _WordCache(encode_chunk)

    # ----- building -------------------------------------------------------------------

    def _cutter(self, specials: Iterable[tuple[str, int]]) -> SpecialCutter:
        spec = self.spec
        return SpecialCutter(specials, spec.added.lstrip_ids, spec.added.rstrip_ids, spec.added.single_word_ids,
                             UNICODE_SPACE if spec.added.unicode_strip else ASCII_SPACE)

    def _build_merge_table(self) -> dict[int, int]:
        merges, tokens = self.spec.model.merges, self.spec.vocab.tokens
        if not merges:
            return {}
        table = self._speedups.merge_table(merges, self._vocab, self._width, tokens)  # None: not handled
        if table is None:
            table = bpe.build_merge_table(merges, self._vocab, self._width, self.spec.source, tokens)
        return table

    def _build_byte_tokens(self) -> list[int]:
        """Token id for each byte value: its spelling (byte-level) or <0xXX> (SentencePiece)."""
        get, missing = self._vocab.get, self._missing
        if self.spec.model.kind is ModelKind.BYTE_LEVEL:
            return [get(BYTE_TO_CHAR[b], missing) for b in range(256)]
        return [get(f"<0x{b:02X}>", get(chr(b), missing) if b < 0x80 else missing) for b in range(256)]

    # ----- words -------------------------------------------------------------------------

    @cached_property
    def _ranked_table(self) -> Any:
        """The accelerator's rank merger for this table (in C), built on the first word; None: Python only."""
        return self._speedups.ranked_merger(self._merges, self._width, self._vocab)

    def _merge_ranked(self, ids: list[int]) -> list[int]:
        """Rank merges, in C where it runs. A unit with no token (``_missing``) is in no merge key, so it
        stays where it is, alone: the caller finds it there."""
        native = self._ranked_table
        merged = native.merge(ids) if native is not None else None
        return bpe.merge_ranked(ids, self._merges, self._width) if merged is None else merged

    def _encode_byte_word(self, word: str) -> tuple[int, ...]:
        raw = word.encode("utf-8")
        if self._model.ignore_merges:
            whole = self._vocab.get(spell(raw))
            if whole is not None:
                return (whole,)
        byte_tokens = self._byte_tokens
        ids = self._merge_ranked([byte_tokens[b] for b in raw])
        if self._missing in ids:  # a byte the vocabulary lacks: dropped (llama.cpp) or unk (HF)
            unk = self.spec.vocab.unk_id if self._model.unk_for_missing_bytes else None
            ids = [unk if i == self._missing else i for i in ids if i != self._missing or unk is not None]
            if self._model.fuse_unk and unk is not None:  # HF fuse_unk: a run of unks is one
                ids = [i for n, i in enumerate(ids) if i != unk or not n or ids[n - 1] != unk]
        return tuple(ids)

    def _byte_fallback(self, char: str, out: list[int]) -> None:
        """A character with no token: its <0xXX> byte tokens when the vocabulary has every one of them
        (byte fallback), else one unk — none without an unk token; with ``fuse_unk`` an unk right after
        another in the same word is not repeated. HF's rule: "😀" lacking <0xF0> is one unk, not 3 bytes."""
        ids = self._fallbacks.get(char)
        if ids is None:
            if len(self._fallbacks) >= _CACHE_MAX_FALLBACKS:  # bounded, whatever characters come
                self._fallbacks.clear()
            ids = self._fallbacks[char] = self._fallback_ids(char)
        if not (self._unk_fuses and ids is self._unk_alone and out and out[-1] == ids[0]):
            out += ids

    def _fallback_ids(self, char: str) -> tuple[int, ...]:
        if self._model.byte_fallback:
            tokens = tuple(self._byte_tokens[b] for b in char.encode("utf-8"))
            if self._missing not in tokens:
                return tokens
        return self._unk_alone

    @cached_property
    def _scores(self) -> dict[str, float]:
        """Score-based merges in Python: text -> score (later duplicates win), built on first use."""
        return dict(zip(self.spec.vocab.tokens, map(float, self.spec.vocab.scores or [])))

    @cached_property
    def _scored_vocab(self) -> Any:
        """The accelerator's score merger (in C), built on the first chunk; None: Python only."""
        return self._speedups.scored_merger(self._tokens, self.spec.vocab.scores)

    def _encode_scored_chunk(self, chunk: str) -> tuple[int, ...]:
        native = self._scored_vocab
        ids = native.encode(chunk) if native is not None else None
        if ids is None:  # no C loop here, or a chunk too long for it
            get = self._vocab.get  # a piece that is no token is a lone character (a merge always makes a token)
            ids = [get(piece, -1 - ord(piece[0])) for piece in bpe.merge_scored(list(chunk), self._scores)]
        return self._fall_back(ids)

    def _encode_ranked_chunk(self, chunk: str) -> tuple[int, ...]:
        get = self._vocab.get
        if self._model.ignore_merges or (self._pre.newline_runs_whole and not chunk.strip("\n")):
            whole = get(chunk)
            if whole is not None:
                return (whole,)
        native = self._ranked_table
        ids = native.encode(chunk) if native is not None else None
        if ids is None:  # no C loop here, or a chunk too long for it
            missing = self._missing
            units = list(map(get, chunk, repeat(missing)))
            lone = list(compress(chunk, map(missing.__eq__, units)))  # the characters with no token
            ids = bpe.merge_ranked(units, self._merges, self._width)  # (merges units in place)
            if lone:  # a unit with no token never merges: the k-th one left is the k-th character with none
                chars = iter(lone)
                ids = [-1 - ord(next(chars)) if token == missing else token for token in ids]
        return self._fall_back(ids)

    def _fall_back(self, ids: list[int]) -> tuple[int, ...]:
        """A chunk's ids with each character that is no token (``-1 - code point``) replaced by its
        ``_byte_fallback``."""
        if min(ids, default=0) >= 0:
            return tuple(ids)
        out: list[int] = []
        for token in ids:
            if token < 0:
                self._byte_fallback(chr(-1 - token), out)
            else:
                out.append(token)
        return tuple(out)

    # ----- public API ----------------------------------------------------------------------

    @cached_property
    def _affixes(self) -> tuple[list[int], list[int]]:
        """The ids add_special puts before and after the text."""
        spec = self.spec
        prefix = spec.post.prefix if spec.post.prefix is not None else (spec.vocab.bos_id,) if spec.post.add_bos else ()
        suffix = spec.post.suffix if spec.post.suffix is not None else (spec.vocab.eos_id,) if spec.post.add_eos else ()
        return list(prefix), list(suffix)  # type: ignore[arg-type]

    def encode(self, text: str, *, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids for text. Lone surrogates (not valid Unicode) are encoded as U+FFFD."""
        prefix, suffix = self._affixes if add_special else ([], [])
        out = list(prefix)
        try:
            self._encode_into(text, parse_special, out)
        except UnicodeEncodeError:
            del out[len(prefix):]
            self._encode_into(_SURROGATE.sub("\ufffd", text), parse_special, out)
        return out + suffix if suffix else out

    def _encode_into(self, text: str, parse_special: bool, out: list[int]) -> None:
        self._encode_cut(text, self._cut_all if parse_special else self._cut_user, self._cut_normalized, out)

    def _encode_cut(self, text: str, cutter: SpecialCutter, normalized_cutter: SpecialCutter | None,
                    out: list[int]) -> None:
        if self._as_is:  # what _encode_fragment would come to, without its checks for every fragment
            encode_fragment = self._encode_normalized
        else:
            encode_fragment = partial(self._encode_fragment, normalized_cutter=normalized_cutter)
        first = True
        for fragment, token_id in cutter.split(text):
            if token_id is not None:
                out.append(token_id)
            else:
                encode_fragment(fragment, first, out)
            first = False

    def _encode_fragment(self, fragment: str, first: bool, out: list[int],
                         normalized_cutter: SpecialCutter | None = None) -> None:
        """Ids of one text fragment, added to ``out``: text that starts the input (``first``) or follows a
        cut-out special token, and holds no special token. Added tokens matched on normalized text
        (``spec.added.normalized_ids``) are cut here, after the normalizers, by ``normalized_cutter`` (None:
        this tokenizer's own)."""
        if self._forms:
            fragment = normalize(fragment, self._forms)
        cutter = normalized_cutter or self._cut_normalized
        if cutter is None:
            self._encode_normalized(fragment, first, out)
            return
        for piece, token_id in cutter.split(fragment):
            if token_id is not None:
                out.append(token_id)
            else:
                self._encode_normalized(piece, first, out)
            first = False

    def _encode_normalized(self, fragment: str, first: bool, out: list[int]) -> None:
        prefix = self._space_prefix
        if prefix is not _NO_PREFIX:
            if prefix is _EVERY_FRAGMENT:
                fragment = " " + fragment
            # HF: not before a space (Metaspace: nor before a literal "▁", its space)
            elif not fragment.startswith(self._space_leads) and (first or prefix is _UNLESS_SPACE):
                fragment = " " + fragment
        if self._sentencepiece:
            fragment = fragment.replace(" ", "\u2581")
        # Each piece's ids from the word cache, appended in one C-level loop: extend returns None, so
        # any() runs to the end (cheaper than chaining the tuples into a new list, then copying it).
        any(map(out.extend, map(self._cache.__getitem__, self._split(fragment))))

    def special_texts(self) -> dict[str, int]:
        """Every token cut out of text with parse_special (control, user-defined, unknown), by text."""
        return self._special_texts

    def split_special(self, text: str, among: Iterable[str] | None = None) -> list[tuple[str, int | None]]:
        """``text`` cut as ``encode(parse_special=True)`` cuts it: (fragment, None) and (token text, id).
        ``among``: only these special tokens can occur in the text (a cutter of just them is kept; Gemma's
        6,000-token cutter is slow to build)."""
        if among is None:
            return list(self._cut_all.split(text))
        key = frozenset(among)
        cutter = self._few_cutters.get(key)
        if cutter is None:
            cutter = self._few_cutters[key] = self._cutter((t, self._special_texts[t]) for t in key
                                                           if t in self._special_texts and t in self._cut_all.ids)
        return list(cutter.split(text))

    def _literal_encoder(self, protected: Iterable[int]) -> Callable[[str, int | None, int | None], list[int]]:
        """For ``tokenizer.chat`` (the one caller): ``encode(text, after_id, before_id)`` encodes literal text
        (parse_special off: user-defined tokens only) where the ``protected`` ids stay text — a chat message
        must never produce a turn marker, even one the vocabulary calls user-defined — and the spaces next
        to the special tokens around it (``after_id`` before the text, ``before_id`` after it) are removed
        as ``encode(parse_special=True)`` removes them around lstrip/rstrip tokens."""
        keep = frozenset(protected)
        cutter = self._cutter((t, i) for t, i in self._cut_user.ids.items() if i not in keep)
        normalized = None if self._cut_normalized is None else self._cutter(
            (t, i) for t, i in self._cut_normalized.ids.items() if i not in keep)
        strip_between = self._cut_all.strip_between

        def encode(text: str, after_id: int | None = None, before_id: int | None = None) -> list[int]:
            out: list[int] = []
            text = strip_between(text, after_id, before_id)
            if text:
                self._encode_cut(text, cutter, normalized, out)
            return out

        return encode

    def token_type(self, token_id: int) -> TokenType:
        return TokenType(self._types[self._check(token_id)])

    def id_to_token(self, token_id: int) -> str:
        """The token as the vocabulary spells it ("Ġhello", "▁hello", "<|im_end|>")."""
        return self._tokens[self._check(token_id)]

    def token_to_id(self, text: str) -> int | None:
        return self._vocab.get(text)

    @property
    def vocab(self) -> list[str]:
        """Token texts by id (as the vocabulary spells them)."""
        return self._tokens

    @property
    def chat_template(self) -> str | None:
        return self.spec.chat_template

    @property
    def kind(self) -> ModelKind:
        """Byte-level BPE or SentencePiece BPE."""
        return self.spec.model.kind

    @property
    def bos_id(self) -> int | None:
        return self.spec.vocab.bos_id

    @property
    def eos_id(self) -> int | None:
        """The vocabulary's EOS token (``eos_ids`` has every id that ends generation)."""
        return self.spec.vocab.eos_id

    @property
    def add_bos(self) -> bool:
        """Whether the vocabulary asks for BOS before a prompt (GGUF ``add_bos_token``; a tokenizer.json whose
        post-processor adds BOS alone)."""
        return self.spec.post.add_bos

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Every id that ends generation: EOS, EOT, EOM and the extra ones a config names."""
        ids = [self.spec.vocab.eos_id, self.spec.vocab.eot_id, self.spec.vocab.eom_id, *self.spec.vocab.extra_eos_ids]
        return tuple(dict.fromkeys(i for i in ids if i is not None))
