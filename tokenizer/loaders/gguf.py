"""GGUF metadata -> TokenizerSpec, following llama.cpp's ``llama_vocab::load``.

Keys read: tokenizer.ggml.{model, pre, tokens, token_type, scores, merges,
bos/eos/eot/eom/unknown/padding_token_id, add_bos_token, add_eos_token,
add_space_prefix}, tokenizer.chat_template, general.name. Every error names
the file. Model kinds: "gpt2" (byte-level BPE), "llama" (SentencePiece by
score), "gemma4" (SentencePiece-style BPE by rank, split at newlines).
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

from ..spec import (
    AddedTokens,
    Decoder,
    LeadingSpace,
    MergePairs,
    Model,
    ModelKind,
    Normalizer,
    PostProcess,
    PreSplit,
    SpacePrefix,
    TokenizerError,
    TokenizerSpec,
    TokenType,
    Unsupported,
    Vocabulary,
)
from ..speedups import REFERENCE, Speedups
from ..stages import pretokenizers
from ..stages.bpe import split_pairs
from .gguf_reader import ARRAY, STRING, TYPE_NAMES, read_metadata

log = logging.getLogger("tokenizer")

_TOKENS, _MERGES = "tokenizer.ggml.tokens", "tokenizer.ggml.merges"
_INT_TYPES = {0, 1, 2, 3, 4, 5, 10, 11}
_SPECIAL_KEYS = {"bos_id": "bos_token_id", "eos_id": "eos_token_id", "eot_id": "eot_token_id",
                 "eom_id": "eom_token_id", "unk_id": "unknown_token_id", "pad_id": "padding_token_id"}
#: llama.cpp's defaults when the GGUF names no id (SentencePiece: <unk>=0, <s>=1, </s>=2).
_DEFAULT_IDS = {"llama": {"bos_id": 1, "eos_id": 2, "unk_id": 0}}
#: texts llama.cpp treats as end-of-generation (and forces to CONTROL type).
EOG_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
             "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
             "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
             "<｜end▁of▁sentence｜>", "[e~[")
_EOT_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
              "_<EOT>", "<end_of_utterance>", "<｜end▁of▁sentence｜>")
#: fill-in-the-middle markers that also end generation in llama.cpp: GGUF key -> the texts that stand for
#: it when the key is absent (in llama.cpp's order; the first one present is taken).
_FIM_EOG = {"fim_pad_token_id": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
            "fim_rep_token_id": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
            "fim_sep_token_id": ("<|file_sep|>",)}
#: other texts llama.cpp forces to CONTROL (fill-in-the-middle markers).
_FIM_TEXTS = ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
              "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
              "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
              "▁<MID>", "<|code_middle|>", "<|middle|>", *(t for texts in _FIM_EOG.values() for t in texts))


class _Meta:
    """Typed access to the metadata, with errors that name the file and key."""

    def __init__(self, path: str, entries: dict[str, tuple[int, Any]]):
        self.path, self.entries = path, entries

    def get(self, key: str, kind: str, default: Any = None) -> Any:
        if key not in self.entries:
            return default
        vtype, value = self.entries[key]
        ok = {"str": vtype == STRING, "int": vtype in _INT_TYPES, "bool": vtype == 7,
              "str[]": vtype == ARRAY * 100 + STRING,
              "int[]": vtype - ARRAY * 100 in _INT_TYPES and vtype >= ARRAY * 100,
              "num[]": vtype - ARRAY * 100 in (*_INT_TYPES, 6, 12) and vtype >= ARRAY * 100}[kind]
        if not ok:
            shown = TYPE_NAMES.get(vtype, f"array of {TYPE_NAMES.get(vtype - ARRAY * 100, '?')}")
            raise TokenizerError(f"{self.path}: {key} has type {shown}, expected {kind}")
        return value


def load_gguf(path: str | Path, speedups: Speedups = REFERENCE) -> tuple[TokenizerSpec, dict[str, Any]]:
    """Read a GGUF file's tokenizer. Returns the spec and extras (chat_template, name, architecture).
    ``speedups``: the accelerator's hooks (``tokenizer.speedups``: its string arrays, its merge table)."""
    name = str(path)
    meta = _Meta(name, read_metadata(path, raw=frozenset({_MERGES}), bulk=frozenset({_TOKENS, _MERGES}),
                                     speedups=speedups))
    model = meta.get("tokenizer.ggml.model", "str")
    if model is None:
        raise TokenizerError(f"{name}: no tokenizer.ggml.model key: this GGUF carries no tokenizer")
    if model not in ("gpt2", "llama", "gemma4"):
        raise Unsupported(f"{name}: tokenizer model {model!r} is not supported (gpt2, llama and gemma4 are)")
    tokens = meta.get(_TOKENS, "str[]")
    if tokens is None:
        raise TokenizerError(f"{name}: no tokenizer.ggml.tokens key")
    raw_tokens = tokens  # as the reader gave them (the accelerator's may hold the array's bytes too)
    if type(tokens) is not list:
        tokens = list(tokens)  # a plain list (the table cache's marshal takes no subclass)
    if "" in tokens:  # llama.cpp renames empty tokens (then the bytes are not the vocabulary)
        raw_tokens = None
        tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
    n = len(tokens)
    types = meta.get("tokenizer.ggml.token_type", "int[]")
    if types is not None and len(types) < n:
        raise TokenizerError(f"{name}: tokenizer.ggml.token_type has {len(types)} entries for {n} tokens")
    types = list(types[:n]) if types is not None else [TokenType.NORMAL] * n
    scores = meta.get("tokenizer.ggml.scores", "num[]")
    if scores is not None and len(scores) < n:
        raise TokenizerError(f"{name}: tokenizer.ggml.scores has {len(scores)} entries for {n} tokens")
    merges = None
    if model != "llama":
        raw_merges = meta.get(_MERGES, "str[]")
        if raw_merges is None:
            raise TokenizerError(f"{name}: tokenizer model {model!r} needs tokenizer.ggml.merges")
        merges = speedups.gguf_merges(raw_merges, raw_tokens, partial(_split_merges, name))
        if merges is None:
            merges = _split_merges(name, list(raw_merges))

    # llama.cpp: SentencePiece has no pre-split; a "gemma4" model implies the gemma4 split.
    pre_name = {"llama": "none", "gemma4": "gemma4"}.get(model) or meta.get("tokenizer.ggml.pre", "str", "") or ""
    pre, known = pretokenizers.lookup(pre_name)
    if not known:
        log.warning("%s: pre-tokenizer %r is unknown; using llama.cpp's %r split", name, pre_name or "(none)",
                    pretokenizers.FALLBACK_NAME)
        pre_name = pretokenizers.FALLBACK_NAME

    ids = dict(_DEFAULT_IDS.get(model, {}))
    ids = {k: v for k, v in ids.items() if v < n}
    for field, key in _SPECIAL_KEYS.items():
        value = meta.get(f"tokenizer.ggml.{key}", "int")
        if value is not None:
            ids[field] = value
    wanted = {*EOG_TEXTS, *_EOT_TEXTS, *_FIM_TEXTS, "<unk>", "<s>", "<|plamo:eos|>", "<mask>", "[MASK]"}
    by_text = _last_ids(tokens, wanted)
    _promote_control(types, by_text)
    if "eot_id" not in ids:
        ids["eot_id"] = next((by_text[t] for t in _EOT_TEXTS if t in by_text), None)
    extra_eos = _end_of_generation(types, by_text) + _fim_end_of_generation(meta, by_text, n)

    spm = not pre.byte_encode  # "llama" and gemma4: raw UTF-8 with spaces as "▁"
    add_bos_default = model == "llama" or pre.add_bos
    lstrip, rstrip = _strip_attributes(pre_name, meta.get("general.architecture", "str", "") or "",
                                       (meta.get("general.name", "str", "") or "").lower(), types, by_text)
    # llama.cpp adds the space prefix to SentencePiece text only, and strips it from the first token it decodes
    space_prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", "bool", model == "llama")) and spm
    spec = TokenizerSpec(
        vocab=Vocabulary(tokens, types, list(map(float, scores[:n])) if scores is not None else None,
                         extra_eos_ids=extra_eos, **ids),
        model=Model(ModelKind.SENTENCEPIECE if spm else ModelKind.BYTE_LEVEL, merges,
                    ignore_merges=pre.ignore_merges),
        normalizer=Normalizer(space_prefix=SpacePrefix.EVERY_FRAGMENT if space_prefix else SpacePrefix.NONE),
        pre_split=PreSplit(pre_name),
        added=AddedTokens(lstrip_ids=lstrip, rstrip_ids=rstrip),
        # llama.cpp forces add_bos on for Gemma 4, whatever the file says
        post=PostProcess(add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", "bool", add_bos_default))
                         or model == "gemma4", add_eos=bool(meta.get("tokenizer.ggml.add_eos_token", "bool", False))),
        decoder=Decoder(LeadingSpace.STRIP_ADDED),
        source=name, chat_template=meta.get("tokenizer.chat_template", "str"),
    )
    extras = {"chat_template": meta.get("tokenizer.chat_template", "str"),
              "name": meta.get("general.name", "str"), "architecture": meta.get("general.architecture", "str")}
    return spec, extras


def _split_merges(path: str, raw: list[bytes]) -> MergePairs:
    """ "a b" -> ("a", "b"), cut at the first space after the first character, as llama.cpp does."""
    pairs = split_pairs(raw)  # the usual case: one space each, in bulk
    if pairs is not None:
        return pairs
    merges = []
    for index, text in enumerate(raw):
        text = text.decode("utf-8", "surrogateescape")
        cut = text.find(" ", 1)
        if cut < 0:
            raise TokenizerError(f"{path}: tokenizer.ggml.merges[{index}] {text!r} has no space between its halves")
        merges.append((text[:cut], text[cut + 1:]))
    return MergePairs.of(merges)


def _last_ids(tokens: list[str], texts: set[str]) -> dict[str, int]:
    """text -> id of its last occurrence (as in the vocabulary index), for the few ``texts`` present.
    A C-level set intersection finds them (and leaves every token's hash cached for the index built
    next). Special tokens sit at one end of a vocabulary: near the end of most, where a reversed search
    finds them at once; at the start of SentencePiece ones (Gemma 3: ids 0-105), whose last occurrence
    one forward pass finds (a search per text would scan all 262k tokens each time to prove it the last)."""
    present = texts.intersection(tokens)
    n = len(tokens)
    tail = tokens[:n - n // 8 - 1:-1]  # the last eighth, reversed
    found, earlier = {}, set()
    for text in present:
        try:
            found[text] = n - 1 - tail.index(text)
        except ValueError:
            earlier.add(text)
    if earlier:
        found.update({token: i for i, token in enumerate(tokens) if token in earlier})  # later ids win
    return found


def _promote_control(types: list[int], by_text: dict[str, int]) -> None:
    """llama.cpp forces end-of-turn and fill-in-the-middle markers to CONTROL, whatever the file says."""
    for text in (*EOG_TEXTS, *_FIM_TEXTS):
        token_id = by_text.get(text)
        if token_id is not None and types[token_id] != TokenType.CONTROL:
            types[token_id] = TokenType.CONTROL


def _fim_end_of_generation(meta: _Meta, by_text: dict[str, int], n: int) -> tuple[int, ...]:
    """llama.cpp's FIM pad, repo and file-separator tokens end generation too: each from its GGUF key,
    else from the first of its texts present."""
    ids = []
    for key, texts in _FIM_EOG.items():
        token_id = meta.get(f"tokenizer.ggml.{key}", "int")
        if token_id is None:
            token_id = next((by_text[t] for t in texts if t in by_text), None)
        if token_id is not None and 0 <= token_id < n:
            ids.append(token_id)
    return tuple(ids)


def _end_of_generation(types: list[int], by_text: dict[str, int]) -> tuple[int, ...]:
    """llama.cpp's end-of-generation set by text, with its two exceptions:
    gpt-oss/solar-open (<|return|> or <|calls|> present) keep <|end|> as plain user-defined text, and
    gemma4/plamo (<|tool_response>, <|plamo:eos|>) keep </s> as a normal token."""
    eog = [t for t in EOG_TEXTS if t in by_text]
    exceptions = {"<|end|>": (("<|return|>", "<|call|>"), ("<|calls|>", "<|flush|>"), TokenType.USER_DEFINED),
                  "</s>": (("<|tool_response>",), ("<|plamo:eos|>",), TokenType.NORMAL)}
    for text, (first, second, new_type) in exceptions.items():
        if text in eog and (all(t in by_text for t in first) or all(t in by_text for t in second)):
            eog.remove(text)
            types[by_text[text]] = new_type
    return tuple(by_text[t] for t in eog)


def _strip_attributes(pre: str, arch: str, name: str, types: list[int],
                      by_text: dict[str, int]) -> tuple[frozenset[int], frozenset[int]]:
    """The spaces llama.cpp strips around some special tokens, chosen by model names (its own if-chain,
    first match wins): Jina v2 / nomic-bert-moe / jina-bert-v3 strip before <mask>; Phi-3 after its
    special tokens; ModernBERT before [MASK]. Returns (lstrip ids, rstrip ids)."""
    none: frozenset[int] = frozenset()
    if any(n in pre for n in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or \
            any(n in arch for n in ("nomic-bert-moe", "jina-bert-v3")):
        return frozenset({by_text["<mask>"]} if "<mask>" in by_text else ()), none
    if "phi-3" in name or "phi3" in name:
        return none, _phi3_rstrip(types, by_text)
    if "modern-bert" in name:
        return frozenset({by_text["[MASK]"]} if "[MASK]" in by_text else ()), none
    return none, none


def _phi3_rstrip(types: list[int], by_text: dict[str, int]) -> frozenset[int]:
    """llama.cpp strips spaces after Phi-3's special tokens, except <unk>, <s> and <|endoftext|>."""
    special = {i for i, t in enumerate(types) if t in (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)}
    if "</s>" in by_text:
        special.add(by_text["</s>"])
    special -= {by_text[t] for t in ("<unk>", "<s>", "<|endoftext|>") if t in by_text}
    return frozenset(special)
