"""What a tokenizer is made of, and the checks it must pass before use.

A ``TokenizerSpec`` is plain data, produced by a loader (GGUF metadata or a
tokenizer.json) or by hand in tests. ``validate(spec)`` rejects a spec that
cannot tokenize correctly, with a ``TokenizerError`` that says what is wrong;
``Tokenizer(spec)`` calls it before building any index.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field


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


@dataclass
class TokenizerSpec:
    """Everything needed to encode and decode.

    tokens: token strings, index = id (byte-level ones spelled in the byte alphabet).
    types: one TokenType per token (None: all NORMAL).
    merges: (left, right) token strings in rank order (a list, ``bpe.MergePairs`` columns, or, still in the
        file's bytes, a big GGUF's ``bulk.BulkMerges`` or a big tokenizer.json's ``json_merges.JsonMerges``),
        or None for score-based SentencePiece.
    scores: one float per token (score-based SentencePiece).
    pre_split: a name from ``pretokenizers.PRE_SPLITS`` (llama.cpp's ``tokenizer.ggml.pre``); empty means
        the kind's own default: "default" for byte-level, "none" (no pre-split) for SentencePiece.
    pre_split_patterns: explicit regexes (llama.cpp syntax) overriding the name's.
    pre_split_behaviors: per pattern, how HF's Split treats matches: (behavior, invert), behavior one of
        "Isolated" (llama.cpp's way; the default), "Removed", "MergedWithPrevious", "MergedWithNext",
        "Contiguous".
    """

    kind: ModelKind
    tokens: list[str]
    types: list[int] | None = None
    merges: Sequence[tuple[str, str]] | None = None
    scores: list[float] | None = None
    pre_split: str = ""
    pre_split_patterns: tuple[str, ...] | None = None
    pre_split_behaviors: tuple[tuple[str, bool], ...] | None = None
    #: Unicode normalizations applied to each text fragment before splitting: NFC, NFKC, NFD, NFKD, lowercase.
    normalizers: tuple[str, ...] = ()
    #: how the space prefix is added: "" = llama.cpp (add_space_prefix: to every fragment);
    #: "unless_space" = HF Metaspace "always" / ByteLevel add_prefix_space (not when it starts with a space);
    #: "first_unless_space" = HF Metaspace "first" (only the fragment at the start of the text).
    space_prefix: str = ""
    #: decode drops the leading space of the text (HF Strip/Metaspace decoder); None: of the first token
    #: when add_space_prefix (llama.cpp).
    decode_strip_space: bool | None = None
    #: decode as HF's ByteFallback decoder does (a tokenizer.json that has one): see ``Tokenizer.decode``.
    byte_fallback_decoder: bool = False
    bos_id: int | None = None
    eos_id: int | None = None
    eot_id: int | None = None
    eom_id: int | None = None
    unk_id: int | None = None
    pad_id: int | None = None
    extra_eos_ids: tuple[int, ...] = ()
    add_bos: bool = False
    add_eos: bool = False
    add_space_prefix: bool = False
    ignore_merges: bool = False
    byte_fallback: bool = True
    #: byte-level: a byte the vocabulary lacks becomes unk_id (HF) instead of being dropped (llama.cpp).
    unk_for_missing_bytes: bool = False
    #: consecutive unknown characters (bytes, byte-level) of one word give one unk (HF BPE ``fuse_unk``).
    fuse_unk: bool = False
    #: token ids whose surrounding spaces are stripped when the token is cut out (llama.cpp attrs).
    lstrip_ids: frozenset[int] = field(default_factory=frozenset)
    rstrip_ids: frozenset[int] = field(default_factory=frozenset)
    #: lstrip/rstrip take Unicode White_Space (HF) instead of C isspace() (llama.cpp).
    unicode_strip: bool = False
    #: added tokens cut only where they stand alone: no word character (HF's \w) just before or after.
    single_word_ids: frozenset[int] = field(default_factory=frozenset)
    #: user-defined added tokens matched on the normalized text (HF ``normalized: true``): cut after the
    #: normalizers ran, against their own normalized text; all others are cut from the raw text first.
    normalized_ids: frozenset[int] = field(default_factory=frozenset)
    #: byte tokens (type BYTE: they decode and print as their byte) that a tokenizer.json also lists as
    #: added tokens; HF cuts their text "<0xE5>" out of the input, so they are cut like control tokens.
    added_byte_ids: frozenset[int] = field(default_factory=frozenset)
    #: what add_special puts before / after the ids when it is more than BOS / EOS (an HF
    #: TemplateProcessing "<s> <extra> $A </s>"); None: BOS and EOS as add_bos / add_eos say.
    special_prefix: tuple[int, ...] | None = None
    special_suffix: tuple[int, ...] | None = None
    #: where the spec came from, for error messages ("model.gguf", "tokenizer.json").
    source: str = "<spec>"
    #: the model's Jinja chat template, if its file carries one (never run; chat formats are detected from it).
    chat_template: str | None = None


def _fail(spec: TokenizerSpec, message: str) -> TokenizerError:
    return TokenizerError(f"{spec.source}: {message}")


def validate(spec: TokenizerSpec) -> None:
    """Raise TokenizerError if the spec cannot be used. Checks, in order:

    an empty vocabulary; a types list of the wrong length; a score-based
    SentencePiece spec without one score per token; special ids out of range;
    add_bos without a BOS id (add_eos without EOS). A merge whose halves or
    result are not in the vocabulary is rejected by ``Tokenizer(spec)``.
    """
    n = len(spec.tokens)
    if n == 0:
        raise _fail(spec, "the vocabulary is empty")
    if spec.types is not None and len(spec.types) != n:
        raise _fail(spec, f"token types list has {len(spec.types)} entries for {n} tokens")
    if spec.kind is ModelKind.SENTENCEPIECE and spec.merges is None:
        if spec.scores is None or len(spec.scores) != n:
            have = "no scores" if spec.scores is None else f"{len(spec.scores)} scores"
            raise _fail(spec, f"score-based SentencePiece needs one score per token: {have} for {n} tokens")
    for name in ("bos_id", "eos_id", "eot_id", "eom_id", "unk_id", "pad_id"):
        value = getattr(spec, name)
        if value is not None and not 0 <= value < n:
            raise _fail(spec, f"special token {name}={value} is out of range (vocabulary has {n} tokens)")
    for value in (*spec.extra_eos_ids, *(spec.special_prefix or ()), *(spec.special_suffix or ())):
        if not 0 <= value < n:
            raise _fail(spec, f"special token id {value} is out of range (vocabulary has {n} tokens)")
    if spec.add_bos and spec.bos_id is None:
        raise _fail(spec, "add_bos is set but there is no BOS token id")
    if spec.add_eos and spec.eos_id is None:
        raise _fail(spec, "add_eos is set but there is no EOS token id")
    # Merges are checked while the merge table is built (core.Tokenizer), at no extra pass.
