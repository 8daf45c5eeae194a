"""The GGUF flags add_bos_token, add_eos_token and add_space_prefix, each absent, true or false, against
llama.cpp reading the same file.

Llama 2's SentencePiece test vocabulary (all 27 combinations) and GPT-2's byte-level one (the two
flags a byte-level vocabulary reads: 9 combinations) are rewritten with the flags set; our ids must
equal llama.cpp's with and without ``add_special`` and ``parse_special``, on texts where the flags
show: empty, leading spaces, special-token texts, a space after a newline.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import gguf
import pytest
from conftest import model_path

import tokenizer
from tokenizer.loaders.gguf import load_gguf

TEXTS = ["Hello world", "", " leading", "  two", "<s>x</s> y", "a\n b", "<unk>", "<|endoftext|>z"]
OPTIONS = (None, True, False)
CASES = [("llama-spm", "llama", None, combo) for combo in itertools.product(OPTIONS, OPTIONS, OPTIONS)] + [
    ("gpt-2", "gpt2", "gpt-2", (bos, eos, None)) for bos, eos in itertools.product(OPTIONS, OPTIONS)]


def write_with_flags(path: Path, vocab: str, model: str, pre: str | None, flags: tuple[bool | None, ...]) -> None:
    spec, _ = load_gguf(model_path(vocab))
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model(model)
    if pre:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(list(spec.vocab.tokens))
    writer.add_token_types(list(spec.vocab.types))
    if spec.vocab.scores:
        writer.add_token_scores(list(spec.vocab.scores))
    if spec.model.merges:
        writer.add_token_merges([f"{a} {b}" for a, b in spec.model.merges])
    writer.add_bos_token_id(spec.vocab.bos_id)
    writer.add_eos_token_id(spec.vocab.eos_id)
    for name, value in zip(("add_bos_token", "add_eos_token", "add_space_prefix"), flags):
        if value is not None:
            getattr(writer, f"add_{name}")(value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()


@pytest.mark.parametrize(("vocab", "model", "pre", "flags"), CASES,
                         ids=[f"{v}-bos{f[0]}-eos{f[1]}-space{f[2]}" for v, _, _, f in CASES])
def test_flags_match_llama_cpp(vocab: str, model: str, pre: str | None, flags: tuple[bool | None, ...],
                               tmp_path: Path) -> None:
    import llama_cpp

    path = tmp_path / "flags.gguf"
    write_with_flags(path, vocab, model, pre, flags)
    ours = tokenizer.load(path)
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        for text, add, special in itertools.product(TEXTS, (False, True), (False, True)):
            assert ours.encode(text, add_special=add, parse_special=special) == ref.tokenize(
                text.encode(), add_bos=add, special=special), (text, add, special)
    finally:
        ref.close()
