"""What a tokenizer is made of, and the checks it must pass before use.

A ``TokenizerSpec`` is plain data in named parts, one per pipeline stage, produced by a loader (GGUF
metadata or a tokenizer.json) or by hand::

    TokenizerSpec(
        vocab=Vocabulary(tokens=["a", "b", "ab"]),            # index = id, plus which ids are special
        model=Model(ModelKind.BYTE_LEVEL, merges=[("a", "b")]),  # how words are spelled and merged
        normalizer=Normalizer(),   # Unicode forms and the space prefix, before the split
        pre_split=PreSplit(),      # regexes that cut text into words
        added=AddedTokens(),       # how added tokens are cut out of the text
        post=PostProcess(),        # what add_special puts around the ids
        decoder=Decoder(),         # what decode does beyond joining token bytes
    )

Every mode is an enum (``SpacePrefix``, ``SplitBehavior``, ``Normalization``, ``LeadingSpace``; a part
takes their values too), and the
merges are one kind of list, ``Merges`` (a plain list of pairs is turned into one).
``validate(spec)`` rejects a spec that cannot tokenize correctly, with a ``TokenizerError`` that says
what is wrong; ``Tokenizer(spec)`` calls it before building any index.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol


class TokenizerError(ValueError):
    """A tokenizer file or spec is unusable; the message says which and why."""


class Unsupported(TokenizerError):
    """The file is well-formed but uses a component we do not implement."""


class TokenType(enum.IntEnum):
    """Token types as GGUF stores them (``tokenizer.ggml.token_type``)."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class ModelKind(enum.Enum):
    """How words are spelled and merged.

    BYTE_LEVEL: GPT-2 byte alphabet, pre-split by regex, merges by rank.
    SENTENCEPIECE: spaces as "▁", whole segment, merges by rank (``merges``)
    or, when ``merges`` is None, by the score of the merged piece.
    """

    BYTE_LEVEL = "byte_level"
    SENTENCEPIECE = "sentencepiece"


class Normalization(str, enum.Enum):
    """A Unicode normalization of each text fragment before it is split (HF normalizers)."""

    NFC = "NFC"
    NFKC = "NFKC"
    NFD = "NFD"
    NFKD = "NFKD"
    LOWERCASE = "lowercase"


class SpacePrefix(enum.Enum):
    """Where a space is put before text, so that a first word is spelled like any other.

    NONE: nowhere. EVERY_FRAGMENT: before every text fragment between special tokens (llama.cpp's
    add_space_prefix, SentencePiece). UNLESS_SPACE: before every fragment that does not start with a
    space (HF Metaspace "always", ByteLevel add_prefix_space). FIRST_UNLESS_SPACE: only before the
    fragment that starts the text, unless it starts with a space (HF Metaspace "first").
    """

    NONE = "none"
    EVERY_FRAGMENT = "every_fragment"
    UNLESS_SPACE = "unless_space"
    FIRST_UNLESS_SPACE = "first_unless_space"


class SplitBehavior(str, enum.Enum):
    """What HF's Split does with a pattern's matches; ISOLATED (each match its own piece) is llama.cpp's way."""

    ISOLATED = "Isolated"
    REMOVED = "Removed"
    MERGED_WITH_PREVIOUS = "MergedWithPrevious"
    MERGED_WITH_NEXT = "MergedWithNext"
    CONTIGUOUS = "Contiguous"


class LeadingSpace(enum.Enum):
    """What decode does with the space at the start of its text.

    STRIP_ADDED: drop the first token's leading space where the encoder adds one (llama.cpp:
    SentencePiece with ``SpacePrefix.EVERY_FRAGMENT``). STRIP: drop the text's first space (HF's Strip
    and Metaspace decoders). KEEP: leave it.
    """

    STRIP_ADDED = "strip_added"
    STRIP = "strip"
    KEEP = "keep"


class TextIndex(Protocol):
    """A vocabulary's ids by text, read as ``dict(zip(tokens, ids))`` is (later duplicates win): that dict
    on the reference path, the accelerator's packed view of its texts (``native.PackedTokens.index()``)."""

    def get(self, text: str, default: Any = None, /) -> Any: ...

    def __getitem__(self, text: str, /) -> int: ...

    def __contains__(self, text: object, /) -> bool: ...

    def __len__(self) -> int: ...


class Merges(Sequence[tuple[str, str]]):
    """The one kind of merge list a spec holds: (left, right) token texts in rank order, read as pairs or
    as two columns, ``lefts`` and ``rights`` (what ``bpe.build_merge_table`` reads).

    ``MergePairs`` holds the columns. The accelerator's kinds (a merge list still in a file's bytes, one
    rebuilt from a cached table) make them on first use, and ``table`` may answer with the merge table
    itself, faster; the base answers None: not handled, build it from the columns."""

    lefts: list[str]
    rights: list[str]

    def table(self, vocab: TextIndex, width: int, tokens: Sequence[str]) -> dict[int, int] | None:
        return None

    def __len__(self) -> int:
        return len(self.lefts)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return list(zip(self.lefts[index], self.rights[index]))
        return self.lefts[index], self.rights[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)


class MergePairs(Merges):
    """Merges held as their two columns. ``MergePairs.of([("a", "b"), ("ab", "c")])`` -> lefts [a, ab],
    rights [b, c]."""

    __slots__ = ("lefts", "rights")

    def __init__(self, lefts: list[str], rights: list[str]):
        self.lefts, self.rights = lefts, rights

    @classmethod
    def of(cls, pairs: Sequence[Any]) -> MergePairs:
        if isinstance(pairs, MergePairs):
            return pairs
        # itemgetter maps: faster than zip(*pairs) over 10^5 pairs; a pair of the wrong size is a TypeError
        try:
            return cls(list(map(itemgetter(0), pairs)), list(map(itemgetter(1), pairs)))
        except (IndexError, KeyError, TypeError):
            raise TypeError("merges must be (left, right) pairs") from None


@dataclass
class Vocabulary:
    """The tokens (index = id; byte-level ones spelled in the byte alphabet), their types (None: all
    NORMAL), their scores (score-based SentencePiece), and which ids play a special part. Loaders give
    lists; a ``Tokenizer`` keeps them packed (``core.compact``): the same values, a fifth of the memory."""

    tokens: Sequence[str]
    types: Sequence[int] | None = None
    scores: Sequence[float] | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    eot_id: int | None = None
    eom_id: int | None = None
    unk_id: int | None = None
    pad_id: int | None = None
    #: more ids that end generation (llama.cpp's end-of-generation set, generation_config.json's eos ids).
    extra_eos_ids: tuple[int, ...] = ()


@dataclass
class Normalizer:
    forms: tuple[Normalization, ...] = ()
    space_prefix: SpacePrefix = SpacePrefix.NONE

    def __post_init__(self) -> None:  # the enums' values are accepted too: Normalizer(("NFC",), "unless_space")
        self.forms = tuple(map(Normalization, self.forms))
        self.space_prefix = SpacePrefix(self.space_prefix)


@dataclass
class PreSplit:
    """``name``: a row of ``pretokenizers.PRE_SPLITS`` (llama.cpp's ``tokenizer.ggml.pre``); empty means the
    kind's own default: "default" for byte-level, "none" (no pre-split) for SentencePiece. ``patterns``:
    explicit regexes (HF's dialect) overriding the name's, each with ``behaviors``' (behavior, invert)."""

    name: str = ""
    patterns: tuple[str, ...] | None = None
    behaviors: tuple[tuple[SplitBehavior, bool], ...] | None = None

    def __post_init__(self) -> None:
        if self.behaviors is not None:
            self.behaviors = tuple((SplitBehavior(behavior), bool(invert)) for behavior, invert in self.behaviors)


@dataclass
class Model:
    """How words are merged. ``merges``: (left, right) pairs in rank order, as ``Merges`` (a list of pairs
    given here becomes ``MergePairs``), or None for score-based SentencePiece."""

    kind: ModelKind
    merges: Sequence[tuple[str, str]] | None = None
    #: a word that is a token is that token, unmerged (llama.cpp's ignore_merges, HF's option).
    ignore_merges: bool = False
    #: a character with no token becomes its UTF-8 bytes' <0xXX> tokens (SentencePiece).
    byte_fallback: bool = True
    #: byte-level: a byte the vocabulary lacks becomes unk_id (HF) instead of being dropped (llama.cpp).
    unk_for_missing_bytes: bool = False
    #: consecutive unknown characters (bytes, byte-level) of one word give one unk (HF BPE ``fuse_unk``).
    fuse_unk: bool = False

    def __post_init__(self) -> None:
        self.kind = ModelKind(self.kind)
        if self.merges is not None and not isinstance(self.merges, Merges):
            self.merges = MergePairs.of(self.merges)


@dataclass
class AddedTokens:
    """How special and added tokens are cut out of the text (which ones: their types)."""

    #: ids whose surrounding spaces are stripped when the token is cut out (llama.cpp attrs, HF lstrip/rstrip).
    lstrip_ids: frozenset[int] = field(default_factory=frozenset)
    rstrip_ids: frozenset[int] = field(default_factory=frozenset)
    #: lstrip/rstrip take Unicode White_Space (HF) instead of C isspace() (llama.cpp).
    unicode_strip: bool = False
    #: cut only where they stand alone: no word character (HF's \w) just before or after.
    single_word_ids: frozenset[int] = field(default_factory=frozenset)
    #: user-defined tokens matched on the normalized text (HF ``normalized: true``): cut after the
    #: normalizers ran, against their own normalized text; all others are cut from the raw text first.
    normalized_ids: frozenset[int] = field(default_factory=frozenset)
    #: byte tokens (type BYTE) that a tokenizer.json also lists as added tokens; HF cuts their text
    #: "<0xE5>" out of the input, so they are cut like control tokens.
    byte_ids: frozenset[int] = field(default_factory=frozenset)


@dataclass
class PostProcess:
    """What ``add_special`` puts around the ids: BOS / EOS as add_bos / add_eos say, or, when an HF
    TemplateProcessing adds more ("<s> <extra> $A </s>"), ``prefix`` and ``suffix``."""

    add_bos: bool = False
    add_eos: bool = False
    prefix: tuple[int, ...] | None = None
    suffix: tuple[int, ...] | None = None


@dataclass
class Decoder:
    leading_space: LeadingSpace = LeadingSpace.STRIP_ADDED
    #: decode as HF's ByteFallback decoder does (a tokenizer.json that has one): see ``Tokenizer.decode``.
    byte_fallback: bool = False

    def __post_init__(self) -> None:
        self.leading_space = LeadingSpace(self.leading_space)


@dataclass
class TokenizerSpec:
    """Everything needed to encode and decode, part by part (see the module's docstring)."""

    vocab: Vocabulary
    model: Model
    normalizer: Normalizer = field(default_factory=Normalizer)
    pre_split: PreSplit = field(default_factory=PreSplit)
    added: AddedTokens = field(default_factory=AddedTokens)
    post: PostProcess = field(default_factory=PostProcess)
    decoder: Decoder = field(default_factory=Decoder)
    #: where the spec came from, for error messages ("model.gguf", "tokenizer.json").
    source: str = "<spec>"
    #: the model's Jinja chat template, if its file carries one (never run; chat formats are detected from it).
    chat_template: str | None = None


def _fail(spec: TokenizerSpec, message: str) -> TokenizerError:
    return TokenizerError(f"{spec.source}: {message}")


_SPECIAL_FIELDS = ("bos_id", "eos_id", "eot_id", "eom_id", "unk_id", "pad_id")


def validate(spec: TokenizerSpec) -> None:
    """Raise TokenizerError if the spec cannot be used. Checks, in order:

    an empty vocabulary; a types list of the wrong length; a score-based
    SentencePiece spec without one score per token; special ids out of range;
    add_bos without a BOS id (add_eos without EOS). A merge whose halves or
    result are not in the vocabulary is rejected by ``Tokenizer(spec)``.
    """
    vocab, post = spec.vocab, spec.post
    n = len(vocab.tokens)
    if n == 0:
        raise _fail(spec, "the vocabulary is empty")
    if vocab.types is not None and len(vocab.types) != n:
        raise _fail(spec, f"token types list has {len(vocab.types)} entries for {n} tokens")
    if spec.model.kind is ModelKind.SENTENCEPIECE and spec.model.merges is None:
        if vocab.scores is None or len(vocab.scores) != n:
            have = "no scores" if vocab.scores is None else f"{len(vocab.scores)} scores"
            raise _fail(spec, f"score-based SentencePiece needs one score per token: {have} for {n} tokens")
    for name in _SPECIAL_FIELDS:
        value = getattr(vocab, name)
        if value is not None and not 0 <= value < n:
            raise _fail(spec, f"special token {name}={value} is out of range (vocabulary has {n} tokens)")
    for value in (*vocab.extra_eos_ids, *(post.prefix or ()), *(post.suffix or ())):
        if not 0 <= value < n:
            raise _fail(spec, f"special token id {value} is out of range (vocabulary has {n} tokens)")
    if post.add_bos and vocab.bos_id is None:
        raise _fail(spec, "add_bos is set but there is no BOS token id")
    if post.add_eos and vocab.eos_id is None:
        raise _fail(spec, "add_eos is set but there is no EOS token id")
    # Merges are checked while the merge table is built (core.Tokenizer), at no extra pass.
