"""Tokenizer: the pipeline, one stage object per part of the spec — one engine for every loader.

Encoding a text (``encode``), stage by stage::

    text ─ specials   cut out special tokens              stages/specials.py      SpecialTokens
         ─ normalizer Unicode forms, space prefix, "▁"     stages/normalize.py     FragmentNormalizer
         ─ pre_split  words (byte-level) / "▁"-chunks      stages/pretokenizers.py pre_splitter
         ─ model      each word's ids by merges            stages/merge_model.py   ByteLevelModel | SentencePieceModel
           (fallback) a character with no token            stages/fallback.py      ByteFallback
         ─ post       BOS / EOS around the ids (add_special)
    ids  ─ decoder    the bytes each token stands for      stages/decode.py        Decoder

Worked example, GPT-2: "Hi<|endoftext|> there" with parse_special -> specials: "Hi", (<|endoftext|>,
50256), " there" -> normalizer: unchanged -> pre_split: ["Hi"], [" there"] -> model: [17250], [612] ->
[17250, 50256, 612].

Performance: the model's word cache (a dict whose ``__missing__`` runs the merge loop) makes the steady
state ``findall`` + one C-level ``map(cache.__getitem__)`` feeding ``out.extend``, no Python frame per
word; the stages' hot methods are bound once, here, so each fragment costs one attribute read apiece.
SentencePiece text is cut into chunks at each "x▁" boundary whose two characters never occur together
inside any token: no merge can cross such a boundary (a merge always yields a vocabulary token), so chunks
tokenize independently and can be cached like words.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import cached_property

from .spec import ModelKind, TextIndex, TokenizerSpec, TokenType, validate
from .speedups import Speedups, installed
from .stages.decode import Decoder, StreamDecoder
from .stages.merge_model import merge_model
from .stages.normalize import FragmentNormalizer
from .stages.pretokenizers import pre_splitter
from .stages.specials import SpecialCutter, SpecialTokens

_SURROGATE = re.compile("[\ud800-\udfff]")


def compact(spec: TokenizerSpec, speedups: Speedups) -> tuple[TokenizerSpec, TextIndex]:
    """The spec with its per-token tables in their smallest forms, the same values, and its ids by text
    (later duplicates winning, as in llama.cpp): the texts packed where the accelerator packs them
    (``speedups.packed_tokens``, whose ``index()`` is then the index; else a dict), the types as bytes, the
    scores as an array of doubles. For Gemma 3's 262,144 tokens, 67 MB of lists, floats and a dict become
    11 MB (docs/performance.md, "Memory")."""
    vocab = spec.vocab
    tokens = speedups.packed_tokens(vocab.tokens)
    index = dict(zip(vocab.tokens, range(len(vocab.tokens)))) if tokens is None else tokens.index()
    types, scores = vocab.types, vocab.scores
    try:
        types = types if types is None or type(types) is bytes else bytes(types)
    except (TypeError, ValueError):  # a type past 255: kept as it is
        pass
    try:
        scores = scores if scores is None or type(scores) is array else array("d", scores)
    except (TypeError, OverflowError):
        pass
    if (tokens is None or tokens is vocab.tokens) and types is vocab.types and scores is vocab.scores:
        return spec, index
    return replace(spec, vocab=replace(vocab, tokens=vocab.tokens if tokens is None else tokens, types=types,
                                       scores=scores)), index


class Tokenizer:
    """Text <-> token ids for one vocabulary: ``tokenizer.load(path)``, or ``Tokenizer(spec)`` for tables of
    your own (``TokenizerError`` says what is wrong with them).

    ``spec`` is what it was built from, part by part (``tokenizer.spec``: vocabulary, normalizer, pre-split,
    model, added tokens, post-process, decoder), as HF's ``Tokenizer`` shows its pipeline: read it to see
    what a loader read. Treat it as read-only; for a changed tokenizer build a new one from a changed copy,
    ``Tokenizer(dataclasses.replace(tok.spec, ...))``. The stages built from it are ``specials``,
    ``normalizer``, ``pre_split``, ``model``, ``fallback`` (SentencePiece's; None for byte-level) and
    ``decoder``.

    ``speedups``: the accelerator's hooks (``tokenizer.speedups``; None: whatever is installed, and
    ``speedups.REFERENCE`` for the reference path alone): the same ids either way."""

    def __init__(self, spec: TokenizerSpec, speedups: Speedups | None = None):
        validate(spec)
        speedups = installed() if speedups is None else speedups
        spec, index = compact(spec, speedups)
        self.spec = spec
        self.vocab_size = n = len(spec.vocab.tokens)
        types: Sequence[int] = spec.vocab.types if spec.vocab.types is not None else bytes([TokenType.NORMAL]) * n
        self._index = index
        # the stages, in the order encode runs them
        self.specials = SpecialTokens(spec, types)
        self.normalizer = FragmentNormalizer(spec)
        self.pre_split_row, self.pre_split = pre_splitter(spec)
        self.model = merge_model(spec, index, speedups, self.pre_split_row.newline_runs_whole)
        self.fallback = self.model.fallback  # SentencePiece's byte fallback (None: byte-level)
        self.decoder = Decoder(spec, types)
        # read for every fragment: bound here, one attribute away
        self._plain_fragments = not spec.normalizer.forms and self.specials.normalized is None
        self._spaces, self._words = self.normalizer.spaces, self.model.words.__getitem__

    # ----- encode, stage by stage ---------------------------------------------------------------

    def encode(self, text: str, *, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids for text. Lone surrogates (not valid Unicode) are encoded as U+FFFD."""
        prefix, suffix = self._affixes if add_special else ([], [])
        out = list(prefix)
        specials = self.specials
        self._encode_valid(text, specials.all if parse_special else specials.user, specials.normalized, out)
        return out + suffix if suffix else out

    def _encode_valid(self, text: str, cutter: SpecialCutter, normalized_cutter: SpecialCutter | None,
                      out: list[int]) -> None:
        """``_encode_cut``, each lone surrogate (not valid Unicode: no UTF-8 writes one; a JSON file's
        ``"\\ud800"`` makes one) encoded as U+FFFD. Text is valid nearly always, so the failure is the
        check, not a scan of every text."""
        start = len(out)
        try:
            self._encode_cut(text, cutter, normalized_cutter, out)
        except UnicodeEncodeError:
            del out[start:]
            self._encode_cut(_SURROGATE.sub("\ufffd", text), cutter, normalized_cutter, out)

    def _encode_cut(self, text: str, cutter: SpecialCutter, normalized_cutter: SpecialCutter | None,
                    out: list[int]) -> None:
        """1. specials: cut ``text``; each special token's id goes out as it is, each fragment between on."""
        first = True
        for fragment, token_id in cutter.split(text):
            if token_id is not None:
                out.append(token_id)
            elif self._plain_fragments:  # no forms and no normalized added tokens: straight on
                self._encode_normalized(fragment, first, out)
            else:
                self._encode_fragment(fragment, first, normalized_cutter, out)
            first = False

    def _encode_fragment(self, fragment: str, first: bool, normalized_cutter: SpecialCutter | None,
                         out: list[int]) -> None:
        """2a. normalizer: the Unicode forms, then the added tokens matched on normalized text
        (``spec.added.normalized_ids``) cut out by ``normalized_cutter``."""
        fragment = self.normalizer.apply_forms(fragment)
        if normalized_cutter is None:
            self._encode_normalized(fragment, first, out)
            return
        for piece, token_id in normalized_cutter.split(fragment):
            if token_id is not None:
                out.append(token_id)
            else:
                self._encode_normalized(piece, first, out)
            first = False

    def _encode_normalized(self, fragment: str, first: bool, out: list[int]) -> None:
        """2b. normalizer: spaces (prefix, "▁"); 3. pre_split; 4. model: each piece's ids from the word
        cache, appended in one C-level loop (extend returns None, so any() runs to the end: cheaper than
        chaining the tuples into a new list, then copying it)."""
        any(map(out.extend, map(self._words, self.pre_split(self._spaces(fragment, first)))))

    @cached_property
    def _affixes(self) -> tuple[list[int], list[int]]:
        """5. post: the ids add_special puts before and after the text."""
        post, vocab = self.spec.post, self.spec.vocab
        prefix = post.prefix if post.prefix is not None else (vocab.bos_id,) if post.add_bos else ()
        suffix = post.suffix if post.suffix is not None else (vocab.eos_id,) if post.add_eos else ()
        return list(prefix), list(suffix)  # type: ignore[arg-type]

    # ----- special tokens ------------------------------------------------------------------------

    def special_texts(self) -> dict[str, int]:
        """Every token cut out of text with parse_special (control, user-defined, unknown), by text."""
        return self.specials.texts

    def split_special(self, text: str, among: Iterable[str] | None = None) -> list[tuple[str, int | None]]:
        """``text`` cut as ``encode(parse_special=True)`` cuts it: (fragment, None) and (token text, id).
        ``among``: only these special tokens can occur in the text (a cutter of just them is kept; Gemma's
        6,000-token cutter is slow to build)."""
        return list((self.specials.all if among is None else self.specials.among(among)).split(text))

    def _literal_encoder(self, protected: Iterable[int]) -> Callable[[str, int | None, int | None], list[int]]:
        """For ``tokenizer.chat`` (the one caller): ``encode(text, after_id, before_id)`` encodes literal text
        (parse_special off: user-defined tokens only) where the ``protected`` ids stay text — a chat message
        must never produce a turn marker, even one the vocabulary calls user-defined — and the spaces next
        to the special tokens around it (``after_id`` before the text, ``before_id`` after it) are removed
        as ``encode(parse_special=True)`` removes them around lstrip/rstrip tokens."""
        cutter, normalized = self.specials.literal(frozenset(protected))
        strip_between = self.specials.all.strip_between

        def encode(text: str, after_id: int | None = None, before_id: int | None = None) -> list[int]:
            out: list[int] = []
            text = strip_between(text, after_id, before_id)
            if text:
                self._encode_valid(text, cutter, normalized, out)
            return out

        return encode

    # ----- decode (the decoder stage) -----------------------------------------------------------

    def decode(self, ids: Iterable[int], *, skip_special: bool = False) -> str:
        """Text of the tokens (``Decoder.decode``): invalid UTF-8 replaced by U+FFFD."""
        return self.decoder.decode(ids, skip_special=skip_special)

    def decode_bytes(self, ids: Iterable[int], *, skip_special: bool = False) -> bytes:
        """Concatenated raw bytes of the tokens (control tokens left out with skip_special)."""
        return self.decoder.decode_bytes(ids, skip_special=skip_special)

    def token_bytes(self, token_id: int) -> bytes:
        """Raw bytes one token stands for (a control token: its text)."""
        return self.decoder.token_bytes(token_id)

    def stream(self, *, skip_special: bool = False, continuation: bool = False) -> StreamDecoder:
        """A decoder fed one id at a time (``StreamDecoder``; ``continuation``: see ``Decoder.stream``)."""
        return self.decoder.stream(skip_special=skip_special, continuation=continuation)

    # ----- the vocabulary ------------------------------------------------------------------------

    def token_type(self, token_id: int) -> TokenType:
        return TokenType(self.decoder.types[self.decoder.check(token_id)])

    def id_to_token(self, token_id: int) -> str:
        """The token as the vocabulary spells it ("Ġhello", "▁hello", "<|im_end|>")."""
        return self.spec.vocab.tokens[self.decoder.check(token_id)]

    def token_to_id(self, text: str) -> int | None:
        return self._index.get(text)

    @property
    def vocab(self) -> Sequence[str]:
        """Token texts by id (as the vocabulary spells them)."""
        return self.spec.vocab.tokens

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
