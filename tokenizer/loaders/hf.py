"""tokenizer.json (Hugging Face ``tokenizers``) and its model directory -> TokenizerSpec.

One engine, two loaders: this file only translates HF's pipeline description into the same spec the
GGUF loader builds. Components are read stage by stage (Sequences flattened):

    normalizer      NFC/NFKC/NFD/NFKD/Lowercase -> spec.normalizer.forms; Replace(" "->"▁")/Prepend("▁") -> spaces
    pre_tokenizer   ByteLevel (+ Split before it) -> byte-level; Metaspace -> SentencePiece style
    model           BPE only (vocab, merges as "a b" or [a, b], byte_fallback, ignore_merges, unk_token);
                    (the accelerator may read a big merge list from the file's bytes: ``speedups``)
    added_tokens    special -> CONTROL (cut only with parse_special), else USER_DEFINED (always cut);
                    lstrip/rstrip (Unicode spaces), single_word, normalized (non-special: cut after normalizing)
    post_processor  TemplateProcessing / Roberta / Bert -> which BOS/EOS add_special adds
    decoder         Strip / Metaspace -> whether decode drops the leading space

Example: Llama 3's Split(Regex "(?i:'s|…)|…", Isolated) + ByteLevel(use_regex=false) is recognised as
llama.cpp's "llama3" pre-split (the fused fast path); an unknown regex runs through the general splitter.
Anything else (WordPiece, Unigram, BertPreTokenizer …) is ``Unsupported`` naming the component.
"""

from __future__ import annotations

import json
import re
from collections import ChainMap
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from ..spec import (
    AddedTokens,
    Decoder,
    LeadingSpace,
    Merges,
    Model,
    ModelKind,
    Normalization,
    Normalizer,
    PostProcess,
    PreSplit,
    SpacePrefix,
    SplitBehavior,
    TokenizerError,
    TokenizerSpec,
    TokenType,
    Unsupported,
    Vocabulary,
)
from ..speedups import REFERENCE, Speedups
from ..stages.bpe import split_pairs
from ..stages.llama_regex import CUSTOM
from ..stages.pretokenizers import PRE_SPLITS

_GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_HF_CONTRACTIONS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_LLAMA_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#: single-pattern byte-level rows of the llama.cpp table, by pattern: a tokenizer.json with the same
#: regex runs the same (fused, fast) splitter as its GGUF twin — for patterns that mean the same in both
#: dialects only (no letter subcategory, no \d, no hand-written llama.cpp splitter).
_KNOWN_PATTERNS = {pre.patterns[0]: name for name, pre in reversed(PRE_SPLITS.items())  # first name wins
                   if len(pre.patterns) == 1 and pre.byte_encode and pre.patterns[0] not in CUSTOM
                   and not re.search(r"\\p\{L[ultmo]\}|\\d", pre.patterns[0])}
#: the byte tokens HF's byte fallback emits (always upper-case hex, unlike the GGUF BYTE type's text)
_BYTE_FALLBACK_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
_NORMALIZERS = {"NFC": Normalization.NFC, "NFKC": Normalization.NFKC, "NFD": Normalization.NFD,
                "NFKD": Normalization.NFKD, "Lowercase": Normalization.LOWERCASE}
_SPLIT_BEHAVIORS = {b.value: b for b in SplitBehavior}
#: Metaspace's prepend_scheme; "never" leaves the space prefix as the normalizer set it (a Prepend("▁")).
_METASPACE_SCHEMES = {"always": SpacePrefix.UNLESS_SPACE, "first": SpacePrefix.FIRST_UNLESS_SPACE, "never": None}


def _read_json(path: Path, speedups: Speedups | None = None) -> Any:
    """The parsed JSON file; with ``speedups`` (a tokenizer.json), its ``json_merges`` hook may read a big
    merge list from the bytes, leaving the rest to ``json``."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise TokenizerError(f"{path}: can't read ({err.strerror})") from None
    apart = speedups.json_merges(raw) if speedups is not None else None
    if apart is not None:
        rest, merges, placeholder = apart
        try:
            data = json.loads(rest)
        except (ValueError, RecursionError):  # the plain parse below says what is wrong
            data = None
        model = data.get("model") if isinstance(data, dict) else None
        if isinstance(model, dict) and model.get("merges") == placeholder:
            model["merges"] = merges
            return data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"{path}: not UTF-8 text (byte {err.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise TokenizerError(f"{path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from None
    except RecursionError:
        raise TokenizerError(f"{path}: JSON nested too deeply") from None


def _flatten(component: Any, key: str, where: str, path: Path) -> list[dict]:
    """A component or a Sequence of them, as a flat list of dicts with a "type"."""
    if component is None:
        return []
    if not isinstance(component, dict) or not isinstance(component.get("type"), str):
        raise TokenizerError(f"{path}: {where} must be an object with a 'type'")
    if component["type"] == "Sequence":
        items = component.get(key)
        if not isinstance(items, list):
            raise TokenizerError(f"{path}: {where} Sequence needs a '{key}' list")
        return [c for item in items for c in _flatten(item, key, where, path)]
    return [component]


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _pattern(split: dict, path: Path) -> str:
    pattern = split.get("pattern")
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        return pattern["Regex"]
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return re.escape(pattern["String"])
    raise TokenizerError(f"{path}: pre_tokenizer Split needs a pattern {{'Regex': …}} or {{'String': …}}")


class _Builder:
    """Collects the normalizer, pre-split and decoder parts from the components of one tokenizer.json."""

    def __init__(self, path: Path):
        self.path = path
        self.normalizer_part = Normalizer()
        self.pre_split_part = PreSplit()
        self.decoder_part = Decoder()
        self.patterns: list[str] = []
        self.behaviors: list[tuple[SplitBehavior, bool]] = []
        self.byte_level = False
        self.spaces: str | None = None  # how SentencePiece-style files write spaces: "metaspace" | "normalizer"

    def unsupported(self, stage: str, component: dict) -> Unsupported:
        return Unsupported(f"{self.path}: {stage} {component.get('type')!r} is not supported")

    def normalizer(self, components: list[dict]) -> None:
        steps = []
        for c in components:
            kind = c["type"]
            if kind in _NORMALIZERS:
                steps.append(_NORMALIZERS[kind])
            elif kind == "Replace" and c.get("pattern") == {"String": " "} and c.get("content") == "\u2581":
                self.spaces = "normalizer"
            elif kind == "Prepend" and c.get("prepend") == "\u2581":
                self.spaces = "normalizer"
                self.normalizer_part.space_prefix = SpacePrefix.EVERY_FRAGMENT
            else:
                raise self.unsupported("normalizer", c)
        self.normalizer_part.forms = tuple(steps)

    def pre_tokenizer(self, components: list[dict]) -> None:
        for c in components:
            kind = c["type"]
            if kind == "ByteLevel":
                self.byte_level = True
                if c.get("use_regex", True):
                    self._split(_GPT2_REGEX, SplitBehavior.ISOLATED, False)
                if c.get("add_prefix_space", False):
                    self.normalizer_part.space_prefix = SpacePrefix.UNLESS_SPACE
            elif kind == "Split":
                behavior = c.get("behavior", "Isolated")
                if behavior not in _SPLIT_BEHAVIORS:
                    raise TokenizerError(f"{self.path}: pre_tokenizer Split behavior {behavior!r} is unknown")
                self._split(_pattern(c, self.path), _SPLIT_BEHAVIORS[behavior], bool(c.get("invert", False)))
            elif kind == "Digits":
                self._split(r"\p{N}" if c.get("individual_digits") else r"\p{N}+", SplitBehavior.ISOLATED, False)
            elif kind == "Metaspace":
                self._metaspace(c)
            else:
                raise self.unsupported("pre_tokenizer", c)

    def _split(self, pattern: str, behavior: SplitBehavior, invert: bool) -> None:
        self.patterns.append(pattern)
        self.behaviors.append((behavior, invert))

    def _metaspace(self, c: dict) -> None:
        if c.get("replacement", "\u2581") != "\u2581":
            raise TokenizerError(f"{self.path}: Metaspace replacement {c.get('replacement')!r} is not supported")
        self.spaces = "metaspace"
        scheme = c.get("prepend_scheme", "always" if c.get("add_prefix_space", True) else "never")
        if scheme not in _METASPACE_SCHEMES:
            raise TokenizerError(f"{self.path}: Metaspace prepend_scheme {scheme!r} is unknown")
        prefix = _METASPACE_SCHEMES[scheme]
        if prefix is not None:
            self.normalizer_part.space_prefix = prefix
        if c.get("split", False):
            self._split("\u2581", SplitBehavior.MERGED_WITH_NEXT, False)

    def decoder(self, components: list[dict]) -> None:
        strip = False
        self.decoder_part.byte_fallback = any(c["type"] == "ByteFallback" for c in components)
        for c in components:
            if c["type"] == "Strip" and c.get("content") == " " and _int(c.get("start")) >= 1:
                strip = True
            elif c["type"] == "Metaspace" and c.get("prepend_scheme", "always") != "never":
                strip = True
        self.decoder_part.leading_space = LeadingSpace.STRIP if strip else LeadingSpace.KEEP

    def finish_pre_split(self) -> None:
        if self.byte_level and self.spaces:
            raise TokenizerError(f"{self.path}: both ByteLevel and SentencePiece-style spaces (Metaspace or a "
                                 "'▁' normalizer); a tokenizer writes spaces one way")
        if not self.byte_level and not self.spaces:
            raise Unsupported(f"{self.path}: neither ByteLevel nor Metaspace / '▁' normalizer: can't tell how "
                              "this tokenizer writes spaces")
        if not self.patterns:  # ByteLevel(use_regex=false) alone, or Metaspace without split: the text is one word
            self.pre_split_part.name = "none"
            return
        if self.byte_level and len(self.patterns) == 1 and self.behaviors[0] == (SplitBehavior.ISOLATED, False):
            key = self.patterns[0].replace(_HF_CONTRACTIONS, _LLAMA_CONTRACTIONS)
            if key in _KNOWN_PATTERNS:
                self.pre_split_part.name = _KNOWN_PATTERNS[key]
                return
        self.pre_split_part = PreSplit(patterns=tuple(self.patterns), behaviors=tuple(self.behaviors))


def _vocabulary(model: dict, added: list[dict], path: Path) -> tuple[list[str], list[int]]:
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise TokenizerError(f"{path}: model.vocab must be an object of token -> id")
    values = vocab.values()
    if vocab and (set(map(type, values)) != {int} or min(values) < 0 or max(values) >= 1 << 24):
        bad = next(t for t, i in vocab.items() if type(i) is not int or not 0 <= i < 1 << 24)
        raise TokenizerError(f"{path}: model.vocab id of {bad!r} must be an integer in 0..2^24, not {vocab[bad]!r}")
    types = {token["id"]: TokenType.CONTROL if token.get("special") else TokenType.USER_DEFINED for token in added}
    if list(values) == list(range(len(vocab))) and all(i >= len(vocab) for i in types):
        tokens = [*vocab] + [None] * (max(types, default=-1) + 1 - len(vocab))
    else:  # ids out of order or overridden by added tokens: by id
        by_id = dict(zip(values, vocab))
        tokens = list(map(by_id.get, range(max(chain(values, types), default=-1) + 1)))
    for token in added:
        tokens[token["id"]] = token["content"]
    n = len(tokens)
    if None in tokens:
        raise TokenizerError(f"{path}: token ids are not contiguous: no token has id {tokens.index(None)}")
    kinds = [TokenType.NORMAL] * n
    for i, kind in types.items():
        kinds[i] = kind
    return tokens, kinds


def _merges(model: dict, path: Path) -> Sequence[tuple[str, str]]:
    """Merges as pairs: [a, b] lists as they are, "a b" texts as columns (``split_pairs``); else a
    checked loop."""
    merges = model.get("merges", [])
    if isinstance(merges, Merges):  # read from the bytes by the accelerator, its shape checked there
        return merges
    if not isinstance(merges, list):
        raise TokenizerError(f"{path}: model.merges must be a list")
    shapes = set(map(type, merges))
    if shapes == {str}:
        split = split_pairs(merges)
        if split is not None:
            return split
    elif shapes == {list} and set(map(len, merges)) == {2}:  # build_merge_table reports halves that are no strings
        return merges
    out = []
    for i, m in enumerate(merges):
        if isinstance(m, str) and m.count(" ") == 1:
            left, right = m.split(" ")
        elif isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
            left, right = m
        else:
            raise TokenizerError(f"{path}: merge {i} must be \"a b\" or [a, b], not {str(m)[:40]!r}")
        out.append((left, right))
    return out


def _added_tokens(data: dict, path: Path) -> list[dict]:
    added = data.get("added_tokens") or []
    if not isinstance(added, list):
        raise TokenizerError(f"{path}: added_tokens must be a list")
    for i, token in enumerate(added):
        if not (isinstance(token, dict) and isinstance(token.get("id"), int) and isinstance(token.get("content"), str)
                and 0 <= token["id"] < 1 << 24):
            raise TokenizerError(f"{path}: added_tokens[{i}] needs an integer 'id' and a string 'content'")
    return added


def _template_affixes(processor: dict, ids: Mapping[str, int], n: int) -> dict[str, Any]:
    """TemplateProcessing's "single" template: the special tokens before and after $A, each expanded
    through the processor's special_tokens map (else looked up as a token text). Example:
    "<s> <x> $A </s>" -> prefix (<s>, <x>), suffix (</s>): BOS <s>, EOS </s>, and the prefix kept whole."""
    single = processor.get("single") if isinstance(processor.get("single"), list) else []
    table = processor.get("special_tokens") if isinstance(processor.get("special_tokens"), dict) else {}
    prefix: list[int] = []
    suffix: list[int] = []
    side = prefix
    for item in single:
        kind, body = next(iter(item.items())) if isinstance(item, dict) and len(item) == 1 else (None, {})
        name = body.get("id") if isinstance(body, dict) else None
        if kind == "Sequence":
            side = suffix
        elif kind == "SpecialToken" and isinstance(name, str):
            listed = table.get(name, {}).get("ids") if isinstance(table.get(name), dict) else None
            found = listed if isinstance(listed, list) else [ids[name]] if name in ids else []
            side += [i for i in found if type(i) is int and 0 <= i < n]
    fields: dict[str, Any] = {}
    if prefix:
        fields.update(add_bos=True, bos_id=prefix[0])
    if suffix:
        fields.update(add_eos=True, eos_id=suffix[-1])
    if len(prefix) > 1 or len(suffix) > 1:
        fields.update(prefix=tuple(prefix), suffix=tuple(suffix))
    return fields


def _post_processor(component: Any, ids: Mapping[str, int], n: int, path: Path) -> dict[str, Any]:
    """Which BOS/EOS ``add_special`` adds, from TemplateProcessing / RobertaProcessing / BertProcessing:
    ``PostProcess`` fields, and bos_id / eos_id where the processor names them."""
    fields: dict[str, Any] = {}
    for c in _flatten(component, "processors", "post_processor", path):
        if c["type"] == "TemplateProcessing":
            fields.update(_template_affixes(c, ids, n))
        elif c["type"] in ("RobertaProcessing", "BertProcessing"):
            cls, sep = c.get("cls"), c.get("sep")
            if isinstance(cls, list) and isinstance(sep, list) and len(cls) == len(sep) == 2 \
                    and all(type(x[1]) is int and 0 <= x[1] < n for x in (cls, sep)):
                fields.update(add_bos=True, bos_id=cls[1], add_eos=True, eos_id=sep[1])
    return fields


def spec_from_tokenizer_json(path: Path, speedups: Speedups = REFERENCE) -> tuple[TokenizerSpec, Mapping[str, int]]:
    """The spec of one tokenizer.json file (no neighbouring config files), and its text -> id lookup.

    The components are checked where they are read; a value of a shape no check foresaw (a list where an
    object belongs, deep inside a component) still ends as a TokenizerError naming the file."""
    try:
        return _spec_from_json(path, _read_json(path, speedups))
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as err:
        if isinstance(err, TokenizerError):
            raise
        raise TokenizerError(f"{path}: malformed tokenizer.json ({type(err).__name__}: {err})") from None


def _spec_from_json(path: Path, data: Any) -> tuple[TokenizerSpec, Mapping[str, int]]:
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise TokenizerError(f"{path}: not a tokenizer.json (no 'model' object)")
    model = data["model"]
    kind = model.get("type", "BPE" if "merges" in model else None)
    if kind != "BPE":
        raise Unsupported(f"{path}: model type {kind!r} is not supported (only BPE)")
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):  # would change the ids
        if model.get(option) not in (None, "", 0, 0.0):
            raise Unsupported(f"{path}: BPE model option {option}={model[option]!r} is not supported")
    added = _added_tokens(data, path)
    tokens, types = _vocabulary(model, added, path)
    # texts -> ids without a third index of the whole vocabulary: the added tokens, then the model's own map
    ids = ChainMap({t["content"]: t["id"] for t in added}, model["vocab"])
    added_bytes = set()
    if model.get("byte_fallback"):  # HF's ByteFallback decoder turns these into bytes, added tokens or not
        for text in _BYTE_FALLBACK_TOKENS:
            i = ids.get(text)
            if i is not None:
                if types[i] != TokenType.NORMAL:
                    added_bytes.add(i)
                types[i] = TokenType.BYTE
    builder = _Builder(path)
    builder.normalizer(_flatten(data.get("normalizer"), "normalizers", "normalizer", path))
    builder.pre_tokenizer(_flatten(data.get("pre_tokenizer"), "pretokenizers", "pre_tokenizer", path))
    builder.decoder(_flatten(data.get("decoder"), "decoders", "decoder", path))
    builder.finish_pre_split()
    unk = model.get("unk_token")
    unk_id = ids.get(unk) if isinstance(unk, str) else None
    post = _post_processor(data.get("post_processor"), ids, len(tokens), path)
    named = {key: post.pop(key) for key in ("bos_id", "eos_id") if key in post}
    spec = TokenizerSpec(
        vocab=Vocabulary(tokens, list(map(int, types)), unk_id=unk_id, **named),
        model=Model(ModelKind.BYTE_LEVEL if builder.byte_level else ModelKind.SENTENCEPIECE, _merges(model, path),
                    ignore_merges=bool(model.get("ignore_merges", False)),
                    byte_fallback=bool(model.get("byte_fallback", False)), unk_for_missing_bytes=unk_id is not None,
                    fuse_unk=bool(model.get("fuse_unk", False))),
        normalizer=builder.normalizer_part, pre_split=builder.pre_split_part,
        added=AddedTokens(
            lstrip_ids=frozenset(t["id"] for t in added if t.get("lstrip")),
            rstrip_ids=frozenset(t["id"] for t in added if t.get("rstrip")), unicode_strip=True,
            single_word_ids=frozenset(t["id"] for t in added if t.get("single_word")),
            # HF matches special tokens on the raw text always (their default is normalized: false)
            normalized_ids=frozenset(t["id"] for t in added if t.get("normalized", True) and not t.get("special")),
            byte_ids=frozenset(added_bytes)),
        post=PostProcess(**post), decoder=builder.decoder_part, source=str(path))
    return spec, ids
