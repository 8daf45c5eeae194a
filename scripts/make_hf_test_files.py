"""Build the tokenizer.json files the tests compare against HF ``tokenizers`` (into the cache, once).

From llama.cpp's test GGUFs and our two models, with HF tokenizers' own API:
  byte-level  gpt-2, llama-bpe, qwen2 (their Split regexes + ByteLevel), smollm2
  SentencePiece style  llama-spm (Metaspace "first", as transformers' Llama converter writes it) and
                       gemma3 (Replace " "->"▁" + Split " ", as the Gemma converter writes it); their merges
                       come from the scores, the way transformers' SentencePieceExtractor derives them.
Trained on the committed corpus with HF tokenizers:
  trained-gpt2, trained-llama3, trained-qwen2 (byte-level BPE, three splits; qwen2 with NFC),
  trained-spm-bytefallback (Metaspace "always", byte fallback, a Prepend/Replace twin: trained-spm-legacy)
Trained with sentencepiece (BPE, byte fallback), converted the same way: sentencepiece-bpe.

    python scripts/make_hf_test_files.py [--force]    # prints the folder
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fetch_test_data as fetch  # noqa: E402

VERSION = "v3"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
#: the pre-tokenizer of each byte-level file: None = ByteLevel's own regex; "digits" = Digits(individual) first,
#: as SmolLM2's published tokenizer.json has it.
BYTE_LEVEL = {"gpt-2": None, "llama-bpe": LLAMA3_REGEX, "qwen2": QWEN2_REGEX, "smollm2": "digits"}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def out_dir() -> Path:
    return fetch.cache_dir() / f"hf-test-{VERSION}"


def _byte_level_pre(regex: str | None):
    from tokenizers import Regex, pre_tokenizers

    if regex is None:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if regex == "digits":
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), "isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def _add_gguf_specials(tk, spec) -> None:
    from tokenizers import AddedToken

    from tokenizer import TokenType

    types = spec.vocab.types or []
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, k in zip(spec.vocab.tokens, types) if k == TokenType.CONTROL])
    tk.add_tokens([AddedToken(t, special=False, normalized=False)
                   for t, k in zip(spec.vocab.tokens, types) if k == TokenType.USER_DEFINED])


def from_byte_level_gguf(name: str, gguf: Path, target: Path) -> None:
    from tokenizers import Tokenizer, decoders, models

    from tokenizer.loaders.gguf import load_gguf

    spec, _ = load_gguf(gguf)
    vocab = {t: i for i, t in enumerate(spec.vocab.tokens)}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in spec.model.merges], fuse_unk=False))
    tk.pre_tokenizer = _byte_level_pre(BYTE_LEVEL[name])
    tk.decoder = decoders.ByteLevel()
    _add_gguf_specials(tk, spec)
    tk.save(str(target))


def merges_from_scores(pieces: list[str], scores: list[float], usable: list[bool]) -> list[tuple[str, str]]:
    """transformers' SentencePieceExtractor: every split of a piece into two pieces is a merge, ranked by
    the piece's score (best first), ties by the ids of the halves."""
    vocab = {p: i for i, p in enumerate(pieces) if usable[i]}
    merges = []
    for piece, i in vocab.items():
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda pair: (vocab[pair[0]], vocab[pair[1]]))
        merges += [(left, right, scores[i]) for left, right in local]
    merges.sort(key=lambda m: m[2], reverse=True)
    return [(left, right) for left, right, _ in merges]


def _spm_tokenizer(pieces: list[str], scores: list[float], usable: list[bool], unk: str, style: str):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    vocab = {p: i for i, p in enumerate(pieces)}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges_from_scores(pieces, scores, usable), unk_token=unk,
                              byte_fallback=True, fuse_unk=True))
    replace = decoders.Replace("\u2581", " ")
    if style == "gemma":
        tk.normalizer = normalizers.Replace(" ", "\u2581")
        tk.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
        tk.decoder = decoders.Sequence([replace, decoders.ByteFallback(), decoders.Fuse()])
    else:
        tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
        tk.decoder = decoders.Sequence([replace, decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return tk


def from_spm_gguf(gguf: Path, target: Path, style: str) -> None:
    from tokenizers import processors

    from tokenizer import TokenType
    from tokenizer.loaders.gguf import load_gguf

    spec, _ = load_gguf(gguf)
    usable = [t == TokenType.NORMAL for t in (spec.vocab.types or [])]
    unk = spec.vocab.tokens[spec.vocab.unk_id] if spec.vocab.unk_id is not None else None
    tk = _spm_tokenizer(spec.vocab.tokens, list(spec.vocab.scores), usable, unk, style)
    _add_gguf_specials(tk, spec)
    if spec.post.add_bos:
        bos = spec.vocab.tokens[spec.vocab.bos_id]
        tk.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, spec.vocab.bos_id)])
    tk.save(str(target))


def corpus_texts() -> list[str]:
    lines = (ROOT / "fixtures" / "corpus.jsonl").read_text(encoding="utf-8").split("\n")
    return [json.loads(line)["text"] for line in lines if line]


def trained_byte_level(regex: str | None, target: Path, nfc: bool = False) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tk = Tokenizer(models.BPE())
    if nfc:  # as Qwen2's published tokenizer.json declares
        tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = _byte_level_pre(regex)
    tk.decoder = decoders.ByteLevel()

    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(corpus_texts(), trainer)
    tk.post_processor = processors.TemplateProcessing(single="<|im_start|> $A <|im_end|>",
                                                      special_tokens=[("<|im_start|>", 1), ("<|im_end|>", 2)])
    tk.save(str(target))


def trained_spm(target: Path, legacy: bool) -> None:
    """Metaspace ("always") BPE with byte fallback; the <0xXX> tokens are put into the model vocabulary
    (as SentencePiece models have them) by rebuilding the trained model around them."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    tk.train_from_iterator(corpus_texts(), trainers.BpeTrainer(vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>"],
                                                               show_progress=False))
    trained = json.loads(tk.to_str())["model"]
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [p for p, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]) if p not in pieces]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    tk = Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=merges, unk_token="<unk>",
                              byte_fallback=True, fuse_unk=True))
    if legacy:
        tk.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    else:
        tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    tk.add_special_tokens(["<unk>", "<s>", "</s>"])
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tk.save(str(target))


def sentencepiece_bpe(target: Path) -> None:
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "corpus.txt"
        text.write_text("\n".join(t.replace("\n", " ") for t in corpus_texts()), encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=f"{tmp}/m", model_type="bpe", vocab_size=3000,
                                       byte_fallback=True, character_coverage=0.98, minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=f"{tmp}/m.model")
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    scores = [sp.get_score(i) for i in range(len(pieces))]
    usable = [sp.is_unknown(i) is False and not sp.is_control(i) and not sp.is_byte(i) for i in range(len(pieces))]
    tk = _spm_tokenizer(pieces, scores, usable, sp.id_to_piece(sp.unk_id()), "llama")
    tk.add_special_tokens([p for i, p in enumerate(pieces) if sp.is_control(i) or sp.is_unknown(i)])
    tk.save(str(target))


def build(force: bool = False) -> Path:
    root = out_dir()
    jobs = {name: (lambda t, n=name: from_byte_level_gguf(n, _gguf(n), t)) for name in BYTE_LEVEL}
    jobs["llama-spm"] = lambda t: from_spm_gguf(_gguf("llama-spm"), t, "llama")
    jobs["gemma3"] = lambda t: from_spm_gguf(fetch.gemma_path(), t, "gemma")
    jobs["trained-gpt2"] = lambda t: trained_byte_level(None, t)
    jobs["trained-llama3"] = lambda t: trained_byte_level(LLAMA3_REGEX, t)
    jobs["trained-qwen2"] = lambda t: trained_byte_level(QWEN2_REGEX, t, nfc=True)
    jobs["trained-spm-bytefallback"] = lambda t: trained_spm(t, legacy=False)
    jobs["trained-spm-legacy"] = lambda t: trained_spm(t, legacy=True)
    jobs["sentencepiece-bpe"] = sentencepiece_bpe
    for name, job in jobs.items():
        target = root / name / "tokenizer.json"
        if target.exists() and not force:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        job(target)
    return root


def _gguf(name: str) -> Path:
    return fetch.smollm_path() if name == "smollm2" else fetch.models_dir() / f"ggml-vocab-{name}.gguf"


NAMES = [*BYTE_LEVEL, "llama-spm", "gemma3", "trained-gpt2", "trained-llama3", "trained-qwen2",
         "trained-spm-bytefallback", "trained-spm-legacy", "sentencepiece-bpe"]

if __name__ == "__main__":
    print(build(force="--force" in sys.argv))
