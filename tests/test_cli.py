"""python -m tokenizer: encode, decode, inspect, errors."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, model_path


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tokenizer", *args], input=stdin, capture_output=True, cwd=ROOT)


def test_encode_decode_smollm2() -> None:
    model = str(model_path("smollm2"))
    enc = run("encode", model, "--parse-special", stdin="Hello <|im_start|> wörld 😀".encode())
    assert enc.returncode == 0, enc.stderr
    assert enc.stdout.decode().split() == "19556 216 1 267 29989 400 40303 218".split()
    dec = run("decode", model, stdin=enc.stdout)
    assert dec.stdout.decode() == "Hello <|im_start|> wörld 😀"
    plain = run("encode", model, stdin=b"<|im_start|>")
    assert plain.stdout.decode().split() == ["44", "108", "306", "79", "3738", "108", "46"]  # same as llama.cpp


def test_encode_add_special_llama_spm() -> None:
    out = run("encode", str(model_path("llama-spm")), "--add-special", stdin=b"Hello")
    assert out.stdout.decode().split() == ["1", "15043"]


def test_inspect_lists_pieces() -> None:
    out = run("inspect", str(model_path("smollm2")), "Hi 😀")
    lines = out.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == ["26843", "40303", "218"]
    assert "normal" in lines[0] and "'Hi'" in lines[0]


def test_errors_name_the_file() -> None:
    out = run("encode", "/no/such/model.gguf", stdin=b"x")
    assert out.returncode == 1
    assert out.stderr.decode() == "error: /no/such/model.gguf: no such file or directory\n"
    bad = run("decode", str(model_path("smollm2")), stdin=b"1 2 99999999")
    assert bad.returncode == 1 and "token id 99999999 is out of range" in bad.stderr.decode()
