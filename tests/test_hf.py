"""tokenizer.json and model directories: id-exact with HF tokenizers; loader errors name file and part."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from conftest import corpus, hf_files, model_path, oracle, ours, read_in_bulk
from tokenizers import Tokenizer as HFTokenizer

import tokenizer
from tokenizer import TokenizerError, TokenType, Unsupported


@functools.lru_cache(maxsize=2)
def pair(name: str):
    folder = hf_files.out_dir() / name
    return tokenizer.load(folder), HFTokenizer.from_file(str(folder / "tokenizer.json"))


@pytest.mark.parametrize("name", hf_files.NAMES)
def test_ids_equal_hf_tokenizers_on_the_corpus(name: str) -> None:
    mine, hf = pair(name)
    for text in corpus():
        want = hf.encode(text, add_special_tokens=False).ids
        assert mine.encode(text, parse_special=True) == want, text
        assert mine.encode(text, add_special=True, parse_special=True) == hf.encode(text, add_special_tokens=True).ids
        assert mine.decode(want) == hf.decode(want, skip_special_tokens=False), text


@pytest.mark.parametrize("name", ["llama-bpe", "gemma3", "trained-llama3", "trained-spm-bytefallback"])
def test_with_parse_special_off_special_added_tokens_stay_text(name: str) -> None:
    mine, hf = pair(name)
    specials = [t for i, t in enumerate(mine.vocab) if mine.token_type(i) == TokenType.CONTROL][:40]
    for text in specials:
        ids = mine.encode(f"a {text} b", parse_special=False)
        assert mine.token_to_id(text) not in ids and mine.decode(ids) == f"a {text} b"
        assert mine.token_to_id(text) in mine.encode(f"a {text} b", parse_special=True)


def test_known_split_patterns_run_the_same_fast_path_as_their_gguf_twin() -> None:
    assert pair("llama-bpe")[0].spec.pre_split.name == "llama3"
    assert pair("qwen2")[0].spec.pre_split.name == "qwen2"
    assert pair("gpt-2")[0].spec.pre_split.name == "gpt-2"
    assert pair("gemma3")[0].spec.pre_split.behaviors == (("MergedWithPrevious", False),)


@pytest.mark.parametrize("name", ["gpt-2", "llama-bpe", "qwen2", "smollm2"])
def test_the_same_model_from_gguf_and_from_tokenizer_json_gives_the_same_ids(name: str) -> None:
    from_json, from_gguf = pair(name)[0], ours(name)
    for text in corpus():
        assert from_json.encode(text, parse_special=True) == from_gguf.encode(text, parse_special=True), text


def test_sentencepiece_spaces_differ_by_design_and_each_loader_follows_its_oracle() -> None:
    """llama.cpp prefixes "▁" to every text fragment (after special tokens too, and before a leading space);
    HF's Metaspace "first" prefixes only the text's start, and not when it already starts with a space."""
    from_json, hf = pair("llama-spm")
    from_gguf = ours("llama-spm")
    for text in ["</s>Hello", " Hello", "<s> x</s>y"]:
        want_hf = hf.encode(text, add_special_tokens=False).ids
        want_llama = oracle("llama-spm").tokenize(text.encode(), add_bos=False, special=True)
        assert from_json.encode(text, parse_special=True) == want_hf
        assert from_gguf.encode(text, parse_special=True) == want_llama
        assert want_hf != want_llama, text
    assert from_json.encode("Hello") == from_gguf.encode("Hello")  # where they agree, they agree


def test_a_declared_nfc_normalizer_is_applied_as_hf_does() -> None:
    mine, hf = pair("trained-qwen2")
    assert mine.spec.normalizer.forms == ("NFC",)
    decomposed, composed = "Cafe\u0301 n\u0303", "Café ñ"
    assert mine.encode(decomposed) == mine.encode(composed) == hf.encode(composed, add_special_tokens=False).ids
    assert ours("qwen2").encode(decomposed) != ours("qwen2").encode(composed)  # the GGUF path (llama.cpp) does not


def _write(folder: Path, name: str, data) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _small(**changes) -> dict:
    data = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3}, "merges": ["a b"]},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "added_tokens": [{"id": 3, "content": "<s>", "special": True}]}
    for key, value in changes.items():
        if key.startswith("model_"):
            data["model"][key[6:]] = value
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(("data", "error", "message"), [
    ('{"model": {"type": "BPE",\n "vocab": {"a": 0,}}}', TokenizerError,
     r"tokenizer.json:2:19: invalid JSON: Expecting property name"),
    (_small(model_type="WordPiece"), Unsupported, "model type 'WordPiece' is not supported"),
    (_small(model_end_of_word_suffix="</w>"), Unsupported, "option end_of_word_suffix='</w>' is not supported"),
    (_small(model_continuing_subword_prefix="##"), Unsupported, "option continuing_subword_prefix='##'"),
    (_small(model_dropout=0.1), Unsupported, "option dropout=0.1"),
    (_small(pre_tokenizer={"type": "BertPreTokenizer"}), Unsupported, "pre_tokenizer 'BertPreTokenizer'"),
    (_small(normalizer={"type": "BertNormalizer"}), Unsupported, "normalizer 'BertNormalizer'"),
    (_small(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Metaspace"}]}),
     TokenizerError, "both ByteLevel and SentencePiece-style spaces"),
    (_small(pre_tokenizer=None), Unsupported, "neither ByteLevel nor Metaspace"),
    (_small(model_merges=["a c"]), TokenizerError, "merge #0 .*'c' is not in the vocabulary"),
    (_small(model_merges=["a b c"]), TokenizerError, "merge 0 must be"),
    (_small(model_merges=[["a", "b"], [1, "b"]]), TokenizerError, r"merge #1 \(1 'b'\): its halves must be strings"),
    (_small(model_merges=[[["a"], ["b"]]]), TokenizerError, r"merge #0 \(\['a'\] \['b'\]\): its halves must be"),
    (_small(model_merges=[[1, 2]]), TokenizerError, r"merge #0 \(1 2\): its halves must be strings"),
    (_small(model_merges=[["a", "b", "c"]]), TokenizerError, "merge 0 must be"),
    (_small(model_vocab={"a": 0, "b": 5}), TokenizerError, "not contiguous: no token has id 1"),
    (_small(model_vocab={"a": "x"}), TokenizerError, "model.vocab id of 'a' must be an integer"),
    (_small(added_tokens=[{"id": "3"}]), TokenizerError, r"added_tokens\[0\] needs an integer 'id'"),
    ("[1, 2]", TokenizerError, "not a tokenizer.json"),
    ("[" * 100000, TokenizerError, "nested too deeply|invalid JSON"),
])
@pytest.mark.parametrize("bulk_min", [10**9, 1], ids=["plain", "bulk"])  # merge tables with numpy too
def test_bad_files_are_clear_errors_naming_the_file(tmp_path: Path, monkeypatch, bulk_min, data, error,
                                                    message: str) -> None:
    read_in_bulk(monkeypatch, bulk_min)
    path = _write(tmp_path, "tokenizer.json", data)
    with pytest.raises(error, match=message) as err:
        tokenizer.load(path)
    assert str(path) in str(err.value) or "tokenizer.json" in str(err.value)


def test_invalid_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_bytes(b'{"model": "\xff"}')
    with pytest.raises(TokenizerError, match="not UTF-8"):
        tokenizer.load(path)


def test_a_model_directory_reads_its_config_files(tmp_path: Path) -> None:
    _write(tmp_path, "tokenizer.json", _small(model_vocab={"a": 0, "b": 1, "ab": 2, "<s>": 3, "</s>": 4},
                                              added_tokens=[{"id": 3, "content": "<s>", "special": True},
                                                            {"id": 4, "content": "</s>", "special": True}]))
    _write(tmp_path, "tokenizer_config.json", {"bos_token": {"content": "<s>"}, "eos_token": "</s>",
                                               "add_bos_token": True,
                                               "chat_template": [{"name": "tool_use", "template": "T"},
                                                                 {"name": "default", "template": "D"}]})
    _write(tmp_path, "generation_config.json", {"eos_token_id": [4, 2]})
    tok = tokenizer.load(tmp_path)
    assert tok.encode("ab", add_special=True) == [3, 2]
    assert tok.chat_template == "D" and set(tok.eos_ids) == {4, 2}
    _write(tmp_path, "chat_template.jinja", "J")
    assert tokenizer.load(tmp_path).chat_template == "J"


def test_a_directory_with_only_a_gguf_loads_the_gguf(tmp_path: Path) -> None:
    (tmp_path / "model.gguf").symlink_to(model_path("smollm2"))
    assert tokenizer.load(tmp_path).encode("Hello world") == ours("smollm2").encode("Hello world")


@pytest.mark.parametrize("name", hf_files.NAMES)
def test_random_texts_with_added_tokens_equal_hf(name: str) -> None:
    """Seeded random texts of added-token texts, spaces (plain, no-break, runs), a literal "▁" (Metaspace
    takes it for a space: no prefix before it), newlines, tabs, emoji: plain and add_special."""
    import random

    mine, hf = pair(name)
    folder = hf_files.out_dir() / name
    added = [t["content"] for t in json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]][:40]
    alphabet = [*"ab ü\n\t  .1", "  ", "\u00a0", "😀", "é", "\u2581"]
    rng = random.Random(name)
    for _ in range(800):
        text = "".join(rng.choice(added) if rng.random() < 0.3 else rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        assert mine.encode(text, parse_special=True) == hf.encode(text, add_special_tokens=False).ids, text
        assert mine.encode(text, add_special=True, parse_special=True) == hf.encode(text, add_special_tokens=True).ids, text
