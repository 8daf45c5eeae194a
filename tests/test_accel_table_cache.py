"""White-box, accelerator: the on-disk cache of built tokenizer tables (tokenizer/accel/table_cache.py).
A warm load gives the very tokenizer a cold load builds, and a changed, corrupt or unwritable entry never
breaks a load."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from pathlib import Path

import pytest
from conftest import corpus, hf_files, model_path
from test_gguf_errors import write_gguf

import tokenizer
import tokenizer.loaders
from tokenizer.accel import bulk, table_cache
from tokenizer.core import Tokenizer
from tokenizer.stages import bpe

pytestmark = pytest.mark.accel


@pytest.fixture()
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tables"
    monkeypatch.setenv("RML_CHAT_TOKENIZER_CACHE", str(root))
    return root


def _refuse_to_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """After this, only a load from the cache can succeed: the spec is not loaded, and the merge table is
    not built (by the reference step or the accelerator's bulk one); the cached merges answer with it."""
    def fail(*_args):
        raise AssertionError("the merge table was built again: the cache entry was not used")
    monkeypatch.setattr(bpe, "build_merge_table", fail)
    monkeypatch.setattr(bulk, "table_of_texts", fail)
    monkeypatch.setattr(tokenizer.loaders, "load_spec", fail)


def _copy(source: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(source, folder / source.name))


SOURCES = {  # name -> (file, kind): byte-level GGUF, tokenizer.json of each style
    "gpt-2": lambda: model_path("gpt-2"),
    "json-llama-bpe": lambda: hf_files.out_dir() / "llama-bpe" / "tokenizer.json",
    "json-llama-spm": lambda: hf_files.out_dir() / "llama-spm" / "tokenizer.json",
}


@pytest.mark.parametrize("name", SOURCES)
def test_warm_load_is_the_same_tokenizer(name: str, tables: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = SOURCES[name]()
    monkeypatch.setenv("RML_CHAT_TOKENIZER_CACHE", "off")
    read = tokenizer.load(source).spec.model.merges  # the merges as the loader read them
    monkeypatch.setenv("RML_CHAT_TOKENIZER_CACHE", str(tables))
    cold = tokenizer.load(source)
    assert len(list(tables.glob("*.tables"))) == 1
    # once its entry is written, the cold load's merges answer from its table too (the file's bytes go)
    assert isinstance(cold.spec.model.merges, table_cache.PackedMerges)
    _refuse_to_build(monkeypatch)
    warm = tokenizer.load(source)
    assert isinstance(warm.spec.model.merges, table_cache.PackedMerges)
    # the table keeps a repeated pair once, at its first rank
    assert list(warm.spec.model.merges) == list(cold.spec.model.merges) == list(dict.fromkeys(read))
    for part in dataclasses.fields(cold.spec):
        want, got = getattr(cold.spec, part.name), getattr(warm.spec, part.name)
        if part.name == "model":
            want, got = dataclasses.replace(want, merges=None), dataclasses.replace(got, merges=None)
        assert got == want, part.name
    texts = corpus()[::7]
    for text in texts:
        assert warm.encode(text, parse_special=True) == cold.encode(text, parse_special=True), text
        assert warm.encode(text, add_special=True) == cold.encode(text, add_special=True), text
    ids = cold.encode(" ".join(texts))
    assert warm.decode(ids) == cold.decode(ids)


def test_merges_of_a_cached_tokenizer_can_be_edited(tables: Path) -> None:
    """``spec.model.merges`` of a warm load is a real sequence: slicing it builds a working tokenizer."""
    source = model_path("gpt-2")
    cold = tokenizer.load(source)
    warm = tokenizer.load(source)
    assert isinstance(warm.spec.model.merges, table_cache.PackedMerges)
    assert warm.spec.model.merges[0] == cold.spec.model.merges[0] == ("Ġ", "t")
    assert len(warm.spec.model.merges) == len(cold.model.table)
    broken = Tokenizer(dataclasses.replace(warm.spec, model=dataclasses.replace(warm.spec.model,
                                                                          merges=warm.spec.model.merges[1:])))
    assert broken.encode(" the") != cold.encode(" the") == [262]


def test_a_changed_file_is_read_again(tables: Path, tmp_path: Path) -> None:
    source = _copy(model_path("gpt-2"), tmp_path / "model")
    first = tokenizer.load(source)
    entry = next(tables.glob("*.tables"))
    stamp = entry.stat().st_mtime_ns
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    again = tokenizer.load(source)
    assert entry.stat().st_mtime_ns != stamp  # rebuilt and rewritten, in the same entry
    assert len(list(tables.glob("*.tables"))) == 1
    assert again.encode("Hello world") == first.encode("Hello world") == [15496, 995]


def test_a_changed_config_file_is_read_again(tables: Path, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    _copy(hf_files.out_dir() / "llama-bpe" / "tokenizer.json", folder)
    assert tokenizer.load(folder).spec.chat_template is None
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    assert tokenizer.load(folder).spec.chat_template == "{{ messages }}"


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage"])
def test_a_damaged_entry_is_a_miss(damage: str, tables: Path) -> None:
    source = model_path("gpt-2")
    want = tokenizer.load(source).encode("Hello world")
    entry = next(tables.glob("*.tables"))
    blob = entry.read_bytes()
    entry.write_bytes({"flip": blob[:1000] + bytes([blob[1000] ^ 1]) + blob[1001:], "truncate": blob[: len(blob) // 2],
                       "empty": b"", "garbage": b"\0" * 64}[damage])
    assert tokenizer.load(source).encode("Hello world") == want
    assert entry.read_bytes() == blob  # rewritten whole


def test_an_unwritable_cache_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("RML_CHAT_TOKENIZER_CACHE", str(blocker / "tables"))
    tok = tokenizer.load(model_path("gpt-2"))
    assert tok.encode("Hello world") == [15496, 995]
    assert not isinstance(tok.spec.model.merges, table_cache.PackedMerges)  # nothing written: the merges as read


def test_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = model_path("gpt-2")
    monkeypatch.setenv("RML_CHAT_TOKENIZER_CACHE", "off")
    monkeypatch.setenv("RML_CHAT_CACHE", str(tmp_path))
    tokenizer.load(source)
    assert list(tmp_path.rglob("*")) == []


def test_score_based_sentencepiece_is_not_cached(tables: Path) -> None:
    """No merge table to keep: Llama 2's and Gemma 3's GGUFs load as fast cold as from an entry."""
    tokenizer.load(model_path("llama-spm"))
    assert list(tables.glob("*.tables")) == []


def test_small_vocabularies_are_not_cached(tables: Path, tmp_path: Path) -> None:
    tokenizer.load(write_gguf(tmp_path / "small.gguf"))
    assert not tables.exists() or list(tables.iterdir()) == []


def test_warnings_of_the_cold_load_are_logged_again(tables: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(table_cache, "MIN_TOKENS", 1)
    source = write_gguf(tmp_path / "odd.gguf", pre="no-such-split")
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tokenizer"):
            tokenizer.load(source)
        assert [r.getMessage() for r in caplog.records if "no-such-split" in r.getMessage()], "warning lost"
    assert len(list(tables.glob("*.tables"))) == 1
