"""White-box, accelerator: a tokenizer.json's merges read from the file's bytes (``accel/json_merges.py``) against ``json``'s own
parse: the same merge table and the same pairs for every test file and layout, the same error (or the
same working tokenizer) for every broken one — the plain reader is the oracle."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from conftest import ROOT, hf_files, read_in_bulk

import tokenizer
from tokenizer.accel import bulk, json_merges

pytestmark = pytest.mark.accel

VOCAB = {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, '"': 5, '"a': 6, "\\": 7, "\\\\": 8, "é": 9, "éa": 10,
         "😀": 11, "😀😀": 12, "merges": 13, "mer": 14, "ges": 15, "x y": 16, "x": 17, " y": 18, "\n": 19,
         "a\n": 20, "é" * 20: 21, "é" * 20 + "a": 22}
PAIRS = [["a", "b"], ["ab", "c"], ['"', "a"], ["\\", "\\"], ["é", "a"], ["😀", "😀"], ["mer", "ges"], ["a", "\n"],
         ["é" * 20, "a"], ["x", " y"]]


def _file(merges: list, *, model_last: bool = True, **dump) -> dict:
    model = {"type": "BPE", "vocab": VOCAB, "merges": merges}
    pre = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    return {"version": "1.0", "pre_tokenizer": pre, "model": model} if model_last else \
        {"model": model, "pre_tokenizer": pre}


def _write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    return path


def _outcome(path: Path, monkeypatch, bulk_min: int):
    """What loading gives: ("ok", merge table, pairs, read apart?, the table ``JsonMerges.table`` builds
    itself — None where it leaves the file to the plain path, or is not used) or ("error", type, message)."""
    read_in_bulk(monkeypatch, bulk_min)
    monkeypatch.setenv("RML_CHAT_TOKENIZER_CACHE", "off")
    try:
        tok = tokenizer.load(path)
    except Exception as err:  # noqa: BLE001 - both readers must fail alike, whatever the failure
        return "error", type(err).__name__, str(err)
    apart = isinstance(tok.spec.model.merges, json_merges.JsonMerges)
    own = tok.spec.model.merges.table(tok.model.index, tok.model.width, tok.spec.vocab.tokens) if apart else None
    assert own in (tok.model.table, None)  # never a table other than the plain path's
    return "ok", tok.model.table, [tuple(m) for m in tok.spec.model.merges or []], apart, own


def _both(path: Path, monkeypatch) -> tuple:
    fast, plain = _outcome(path, monkeypatch, 1), _outcome(path, monkeypatch, 10**9)
    assert fast[:3] == plain[:3]
    assert plain[0] == "error" or not plain[3]  # the plain reader never reads apart
    return fast


@pytest.mark.parametrize("name", hf_files.NAMES)
def test_every_test_tokenizer_json_reads_its_merges_apart_to_the_same_table(monkeypatch, name: str) -> None:
    path = hf_files.out_dir() / name / "tokenizer.json"
    fast = _both(path, monkeypatch)
    assert fast[0] == "ok" and fast[3] == bool(fast[2])  # read apart wherever there are merges
    if fast[3]:
        assert fast[4] == fast[1]  # built apart, not by the fallback


@pytest.mark.parametrize(("layout", "dump"), [
    ("pretty", {"indent": 2, "ensure_ascii": False}),
    ("minified", {"separators": (",", ":"), "ensure_ascii": False}),
    ("ascii escapes", {"indent": 1, "ensure_ascii": True}),     # é -> \u00e9, 😀 -> a surrogate pair
    ("tabs", {"indent": "\t", "ensure_ascii": False}),
])
@pytest.mark.parametrize("texts", [False, True], ids=["pairs", "texts"])
def test_layouts_and_escapes_read_apart_give_json_s_own_merges(tmp_path: Path, monkeypatch, layout, dump,
                                                               texts: bool) -> None:
    merges = [" ".join(p) for p in PAIRS if " " not in "".join(p)] if texts else PAIRS
    path = _write(tmp_path / "tokenizer.json", json.dumps(_file(merges), **dump))
    fast = _both(path, monkeypatch)
    assert fast[0] == "ok" and fast[3], fast
    assert fast[4] == fast[1]  # built apart, not by the fallback
    assert fast[2] == [tuple(m.split(" ")) if texts else tuple(m) for m in merges]
    assert fast[1][VOCAB["ab"] * (len(VOCAB) + 1) + VOCAB["c"]] == 1 * (len(VOCAB) + 1) + VOCAB["abc"]


def test_windows_line_ends_and_a_merge_named_merges(tmp_path: Path, monkeypatch) -> None:
    merges = [*PAIRS, ["merges", "merges"]]  # '"merges"' inside the array: the key is the one before
    vocab = {**VOCAB, "mergesmerges": len(VOCAB)}
    data = {"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    path = _write(tmp_path / "tokenizer.json", json.dumps(data, indent=2).replace("\n", "\r\n"))
    fast = _both(path, monkeypatch)
    assert fast[0] == "ok" and fast[3] and len(fast[2]) == len(merges)


@pytest.mark.parametrize("text", [
    json.dumps(_file(PAIRS, model_last=False), indent=2),          # model not last: json reads it all
    json.dumps(_file(PAIRS), indent=2)[:-1] + ', "x": 1}',           # something after the model
    json.dumps(_file(["a b", ["ab", "c"]]), indent=2),              # texts and pairs mixed
    json.dumps(_file(["a b c"]), indent=2),                          # two spaces: json's rule names it
    json.dumps(_file([" ab"]), indent=2),                            # a space first
    json.dumps(_file([["a", "b", "c"]]), indent=2),                 # a triple
    json.dumps(_file([["a", 1]]), indent=2),                        # a number
    json.dumps(_file([["a", "z"]]), indent=2),                      # no such token: named by the plain path
    json.dumps(_file(PAIRS), indent=2).replace('"a",\n', '"a\n",\n', 1),   # a raw newline in a string
    json.dumps(_file(PAIRS), indent=2).replace('\\\\"', '\\q"', 1),         # an escape JSON has not
    json.dumps(_file(PAIRS), indent=2).replace('[\n        "a"', '[\\\n        "a"', 1),  # a stray backslash
    json.dumps(_file(PAIRS), indent=2).replace('"b"', '"b",', 1),          # a trailing comma
    json.dumps(_file(PAIRS), indent=2).replace('"b"', '"b" "c"', 1),       # a missing comma
    json.dumps(_file(PAIRS), indent=2).replace('"b"', '"b\x01"', 1),       # a control character
    json.dumps(_file(PAIRS), indent=2).replace('"b"\n', '"b"\x0b\n', 1),   # not JSON whitespace
    json.dumps(_file(PAIRS), indent=2)[:-3],                                  # cut short
    json.dumps(_file(PAIRS), indent=2, ensure_ascii=False).encode().replace(b"\xc3\xa9", b"\xa9\xc3", 1),
    json.dumps(_file(PAIRS), indent=2, ensure_ascii=False).encode().replace(b"\xc3\xa9\"", b"\xc3\"", 1),
    json.dumps(_file(PAIRS), indent=2).encode().replace(b'"b"', b'"b\xed\xa0\x80"', 1),  # a surrogate
    json.dumps(_file(PAIRS), indent=2).encode().replace(b'"BPE"', b'"BPE\xff"', 1),  # before the merges
])
def test_what_json_would_reject_or_read_otherwise_goes_to_json(tmp_path: Path, monkeypatch, text) -> None:
    path = _write(tmp_path / "tokenizer.json", text)
    fast = _both(path, monkeypatch)
    assert fast[0] == "error" or not fast[3]


_BYTES = [b'"', b"\\", b",", b"[", b"]", b" ", b"\n", b"\t", b"\x00", b"\x1f", b"\xc3", b"\xa9", b"a", b"u", b"}"]


def test_random_byte_mutations_of_the_merges_fail_or_load_alike_both_ways(tmp_path: Path, monkeypatch) -> None:
    rng = random.Random(7)
    bases = [json.dumps(_file(m), indent=i, ensure_ascii=a).encode("utf-8", "surrogatepass")
             for m, i, a in ((PAIRS, 2, False), (PAIRS, None, True), (["a b", "ab c", "\\\\ \\\\", "é a"], 1, False))]
    outcomes = set()
    for case in range(300):
        raw = bytearray(rng.choice(bases))
        start = raw.index(b'"merges"')
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(start, len(raw))
            kind = rng.randrange(3)
            if kind == 0:
                raw[at:at + 1] = rng.choice(_BYTES)
            elif kind == 1:
                raw[at:at] = rng.choice(_BYTES)
            else:
                del raw[at]
        path = _write(tmp_path / f"{case}.json", bytes(raw))
        fast = _both(path, monkeypatch)
        outcomes.add((fast[0], fast[0] == "ok" and fast[3]))
    assert outcomes == {("error", False), ("ok", False), ("ok", True)}  # all three kinds of case were met


def test_small_merge_lists_are_left_to_json_unless_numpy_is_in_use(tmp_path: Path, monkeypatch) -> None:
    path = _write(tmp_path / "tokenizer.json", json.dumps(_file(PAIRS), indent=2))
    raw = path.read_bytes()
    monkeypatch.setattr(bulk, "BULK_MIN", 10**9)
    monkeypatch.setattr(bulk, "BULK_MIN_IMPORTED", 10**9)
    assert json_merges.split_off(raw) is None
    read_in_bulk(monkeypatch, 1)
    text, merges = json_merges.split_off(raw)
    assert json.loads(text)["model"]["merges"] == json_merges.SENTINEL
    assert len(merges) == len(PAIRS) and merges[1] == ("ab", "c")  # read as pairs: json parses the array


def test_the_fuzzer_s_mutations_of_whole_files_fail_or_load_alike_both_ways(tmp_path: Path, monkeypatch) -> None:
    """scripts/fuzz.py's tokenizer.json cases (keys deleted, odd values, bad merges, bytes flipped, cut
    short, deep nesting), whose bases put the merges last as HF does."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import fuzz

    outcomes = set()
    for case, data in enumerate(fuzz.json_cases(random.Random(3), 300)):
        fast = _both(_write(tmp_path / f"{case}.json", data), monkeypatch)
        outcomes.add((fast[0], fast[0] == "ok" and fast[3]))
    assert ("error", False) in outcomes and ("ok", True) in outcomes
