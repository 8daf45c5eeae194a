"""GGUF loading: a small file written with the gguf package, then broken in every way we can think of.

Every broken file must raise TokenizerError naming the path (and the offset, for layout errors) —
never another exception, a hang or a huge allocation.
"""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import pytest

import tokenizer
from tokenizer import TokenizerError
from tokenizer.loaders import gguf_reader
from tokenizer.stages.byte_alphabet import BYTE_TO_CHAR

pytestmark = pytest.mark.offline


def write_gguf(path: Path, *, model: str = "gpt2", tokens: list[str] | None = None, extra=None,
               pre: str = "gpt-2") -> Path:
    writer = gguf.GGUFWriter(str(path), arch="llama")
    tokens = tokens if tokens is not None else [*BYTE_TO_CHAR, "ab", "<|end|>"]
    writer.add_tokenizer_model(model)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - 1) + [3])
    writer.add_token_merges(["a b"])
    writer.add_eos_token_id(len(tokens) - 1)
    for key, value in (extra or {}).items():
        writer.add_key_value(key, value[0], value[1])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


@pytest.fixture()
def good(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "good.gguf")


def test_valid_file_loads(good: Path) -> None:
    tok = tokenizer.load(good)
    assert tok.encode("abab<|end|>", parse_special=True) == [256, 256, 257]
    assert tok.eos_ids == (257,)


def test_truncated_at_every_boundary(good: Path, tmp_path: Path) -> None:
    data = good.read_bytes()
    cuts = sorted({0, 3, 4, 7, 8, 15, 16, 23, 24, 30, 40, len(data) // 2, len(data) - 9, len(data) - 1,
                   *range(24, min(len(data), 400), 7)})
    for cut in cuts:
        broken = tmp_path / f"cut{cut}.gguf"
        broken.write_bytes(data[:cut])
        with pytest.raises(TokenizerError) as info:
            tokenizer.load(broken)
        assert str(broken) in str(info.value), cut
        if cut:
            assert "offset" in str(info.value), str(info.value)


def test_wrong_magic(good: Path, tmp_path: Path) -> None:
    broken = tmp_path / "magic.gguf"
    broken.write_bytes(b"GGML" + good.read_bytes()[4:])
    with pytest.raises(TokenizerError, match=r"magic.gguf: offset 0: not a GGUF file \(magic b'GGML'"):
        tokenizer.load(broken)


def test_wrong_version(good: Path, tmp_path: Path) -> None:
    data = bytearray(good.read_bytes())
    data[4:8] = struct.pack("<I", 99)
    broken = tmp_path / "version.gguf"
    broken.write_bytes(bytes(data))
    with pytest.raises(TokenizerError, match="unsupported GGUF version 99"):
        tokenizer.load(broken)


@pytest.mark.parametrize("field", ["kv_count", "key_length", "array_count", "string_length"])
def test_absurd_counts_and_lengths(good: Path, tmp_path: Path, field: str) -> None:
    data = bytearray(good.read_bytes())
    huge = struct.pack("<Q", 2**62)
    if field == "kv_count":
        data[16:24] = huge
    elif field == "key_length":
        data[24:32] = huge
    else:
        key = b"tokenizer.ggml.tokens"
        at = data.index(key) + len(key) + 4 + 4  # past key, value type, element type
        if field == "array_count":
            data[at:at + 8] = huge
        else:
            data[at + 8:at + 16] = huge  # length of the first string
    broken = tmp_path / f"{field}.gguf"
    broken.write_bytes(bytes(data))
    with pytest.raises(TokenizerError, match=r"offset \d+: .*(past the end|needs \d+ bytes)"):
        tokenizer.load(broken)


def test_wrong_value_type_for_tokenizer_key(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "types.gguf", extra={"tokenizer.ggml.bos_token_id": ("one", gguf.GGUFValueType.STRING)})
    with pytest.raises(TokenizerError, match="types.gguf: tokenizer.ggml.bos_token_id has type string, expected int"):
        tokenizer.load(path)


def raw_gguf(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A GGUF header by hand (the gguf writer refuses duplicate keys): (key, type, encoded value)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries))
    for key, vtype, value in entries:
        out += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + value
    return out


def test_duplicate_key(tmp_path: Path) -> None:
    model = struct.pack("<Q", 4) + b"gpt2"
    path = tmp_path / "dup.gguf"
    path.write_bytes(raw_gguf([("tokenizer.ggml.model", 8, model), ("tokenizer.ggml.model", 8, model)]))
    with pytest.raises(TokenizerError, match="dup.gguf: offset 68: duplicate key tokenizer.ggml.model"):
        tokenizer.load(path)


def test_unknown_value_type(tmp_path: Path) -> None:
    path = tmp_path / "vtype.gguf"
    path.write_bytes(raw_gguf([("tokenizer.ggml.model", 77, b"\0" * 8)]))
    with pytest.raises(TokenizerError, match="vtype.gguf: offset 52: tokenizer.ggml.model: unknown value type 77"):
        tokenizer.load(path)


def test_unknown_tokenizer_model(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "bert.gguf", model="bert")
    with pytest.raises(tokenizer.Unsupported, match="bert.gguf: tokenizer model 'bert' is not supported"):
        tokenizer.load(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(TokenizerError, match="empty.gguf: offset 0: the file is empty"):
        tokenizer.load(empty)
    with pytest.raises(TokenizerError, match="missing.gguf: no such file"):
        tokenizer.load(tmp_path / "missing.gguf")


def test_unknown_pre_tokenizer_warns_once_and_falls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "pre.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("no-such-family")
    writer.add_token_list([*BYTE_TO_CHAR, "ab"])
    writer.add_token_merges(["a b"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with caplog.at_level("WARNING", logger="tokenizer"):
        tok = tokenizer.load(path)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "'no-such-family' is unknown" in warnings[0] and "'default'" in warnings[0]
    assert tok.decode(tok.encode("Hello, 1234!")) == "Hello, 1234!"


@pytest.mark.whitebox
def test_the_readers_value_type_codes_are_the_gguf_packages() -> None:
    """gguf_reader keeps its own copy of GGUF's value-type codes (importing gguf costs the launch ~150 ms:
    docs/performance.md); here the copy is held to the gguf package's own table."""
    import numpy as np
    from gguf.constants import GGUFValueType
    from gguf.gguf_reader import GGUFReader

    assert {t.value: t.name.lower() for t in GGUFValueType} == gguf_reader.TYPE_NAMES
    assert (gguf_reader.STRING, gguf_reader.ARRAY) == (GGUFValueType.STRING.value, GGUFValueType.ARRAY.value)
    sizes = {t.value: np.dtype(dtype).itemsize for t, dtype in GGUFReader.gguf_scalar_to_np.items()}
    assert {code: fmt.size for code, fmt in gguf_reader._SCALARS.items()} == sizes
