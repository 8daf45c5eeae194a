"""Fuzz the loaders: mutated GGUF files and tokenizer.json files must end in a TokenizerError that names
the file, or in a working tokenizer — never another exception, a hang, or unbounded memory.

    python scripts/fuzz.py --iterations 10000 [--format gguf|json|both] [--seed 0]

GGUF mutations (on small GGUFs written here with the real tokenizer keys, and on the real SmolLM2 header):
truncation at every section boundary, flipped bytes, absurd counts and lengths, wrong value types for
``tokenizer.ggml.*`` keys, duplicate keys. tokenizer.json mutations (on small files built here, byte-level
and SentencePiece style): missing keys, wrong types, merges naming absent tokens, huge numbers, invalid
UTF-8, deep nesting, truncation, flipped bytes. Each case gets 10 s; the report gives outcomes, escapes and
the peak RSS. The tests run a bounded slice of the same cases (tests/test_fuzz_*.py).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import signal
import struct
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tokenizer  # noqa: E402
from tokenizer import TokenizerError  # noqa: E402

SAMPLE = "Hello, world! Ça va? 日本語 👋 <s> <|im_end|>\n  x"
STRING, ARRAY, U32, I32, F32, BOOL = 8, 9, 4, 5, 6, 7


# ----- writing small GGUFs ------------------------------------------------------------------------

def _str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _value(kind: int, value) -> bytes:
    if kind == STRING:
        return _str(value)
    if kind == ARRAY:
        elem_kind, items = value
        return struct.pack("<IQ", elem_kind, len(items)) + b"".join(_value(elem_kind, v) for v in items)
    return struct.pack({U32: "<I", I32: "<i", F32: "<f", BOOL: "<?"}[kind], value)


def write_gguf(entries: list[tuple[str, int, object]]) -> bytes:
    body = b"".join(_str(key) + struct.pack("<I", kind) + _value(kind, value) for key, kind, value in entries)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + body


def byte_level_entries() -> list[tuple[str, int, object]]:
    from tokenizer.stages.byte_alphabet import BYTE_TO_CHAR

    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ w", "l l", "o r"]
    tokens = list(BYTE_TO_CHAR) + [m.replace(" ", "") for m in merges] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 3) + [3, 3, 3]
    return [("general.architecture", STRING, "gpt2"), ("general.name", STRING, "fuzz byte-level"),
            ("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, "llama-bpe"),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
            ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
            ("tokenizer.ggml.bos_token_id", U32, len(tokens) - 2), ("tokenizer.ggml.eos_token_id", U32, len(tokens) - 1),
            ("tokenizer.ggml.add_bos_token", BOOL, False),
            ("tokenizer.chat_template", STRING, "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}")]


def sentencepiece_entries() -> list[tuple[str, int, object]]:
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    words = ["▁", "a", "b", "e", "h", "l", "o", "t", "▁t", "he", "▁the", "ll", "▁hello", "▁a"]
    pieces += words
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)
    scores = [0.0] * 259 + [-float(i) for i in range(len(words))]
    return [("general.architecture", STRING, "llama"), ("tokenizer.ggml.model", STRING, "llama"),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, pieces)), ("tokenizer.ggml.scores", ARRAY, (F32, scores)),
            ("tokenizer.ggml.token_type", ARRAY, (I32, types)), ("tokenizer.ggml.bos_token_id", U32, 1),
            ("tokenizer.ggml.eos_token_id", U32, 2), ("tokenizer.ggml.unknown_token_id", U32, 0),
            ("tokenizer.ggml.add_space_prefix", BOOL, True)]


# ----- where things are in a GGUF -----------------------------------------------------------------

def gguf_fields(data: bytes) -> dict[str, list[int]]:
    """Offsets of the mutable fields of a well-formed GGUF: "boundary" (every section edge), "count"
    (u64 lengths and counts), "type" (u32 value types), "key" (key text starts)."""
    out: dict[str, list[int]] = {"boundary": [0, 4, 8, 16, 24], "count": [16], "type": [], "key": []}
    (n,) = struct.unpack_from("<Q", data, 16)
    pos = 24

    def skip(kind: int, pos: int, depth: int = 0) -> int:
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        if kind == STRING:
            out["count"].append(pos)
            (length,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + length
        if kind == ARRAY:
            out["type"].append(pos)
            elem, count = struct.unpack_from("<IQ", data, pos)
            out["count"].append(pos + 4)
            pos += 12
            if elem in sizes:
                return pos + sizes[elem] * count
            for i in range(count):
                if i < 4:
                    out["boundary"].append(pos)
                pos = skip(elem, pos, depth + 1)
            return pos
        return pos + sizes[kind]

    for _ in range(n):
        if pos + 8 > len(data):
            break
        out["boundary"].append(pos)
        out["count"].append(pos)
        (klen,) = struct.unpack_from("<Q", data, pos)
        out["key"].append(pos + 8)
        pos += 8 + klen
        out["boundary"].append(pos)
        out["type"].append(pos)
        (kind,) = struct.unpack_from("<I", data, pos)
        pos = skip(kind, pos + 4)
        out["boundary"].append(min(pos, len(data)))
    return out


def gguf_mutations(data: bytes, rng: random.Random) -> bytes:
    fields = gguf_fields(data)
    buf = bytearray(data)
    choice = rng.randrange(5)
    if choice == 0:  # truncation at a section boundary (give or take a byte)
        return bytes(buf[:max(0, rng.choice(fields["boundary"]) + rng.choice((-1, 0, 0, 1)))])
    if choice == 1:  # flipped bytes
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if choice == 2:  # absurd counts and lengths
        at = rng.choice(fields["count"])
        value = rng.choice((2**64 - 1, 2**63, 2**32, 2**31 - 1, len(data), 0, 1))
        struct.pack_into("<Q", buf, at, value)
        return bytes(buf)
    if choice == 3:  # wrong value types
        struct.pack_into("<I", buf, rng.choice(fields["type"]), rng.choice((0, 1, 4, 5, 6, 7, 8, 9, 10, 12, 13, 99, 2**31)))
        return bytes(buf)
    keys = fields["key"]  # duplicate keys: copy one key's text over another of the same length
    pairs = [(a, b) for a in keys for b in keys if a != b and data[a - 8:a] == data[b - 8:b]]
    if pairs:
        a, b = rng.choice(pairs)
        (length,) = struct.unpack_from("<Q", data, a - 8)
        buf[b:b + length] = data[a:a + length]
    return bytes(buf)


# ----- tokenizer.json ----------------------------------------------------------------------------

def small_json(kind: str) -> dict:
    if kind == "byte-level":
        from tokenizer.stages.byte_alphabet import BYTE_TO_CHAR

        vocab = {c: i for i, c in enumerate(BYTE_TO_CHAR)}
        merges = ["Ġ t", "h e", "Ġt he", "i n"]
        for m in merges:
            vocab[m.replace(" ", "")] = len(vocab)
        vocab["<|endoftext|>"] = len(vocab)
        return {"version": "1.0", "added_tokens": [{"id": len(vocab) - 1, "content": "<|endoftext|>", "special": True,
                                                     "lstrip": False, "rstrip": False, "normalized": False}],
                "normalizer": {"type": "NFC"},
                "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": r"\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+"},
                     "behavior": "Isolated", "invert": False},
                    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
                "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
                "model": {"type": "BPE", "byte_fallback": False, "vocab": vocab, "merges": merges}}  # HF's order
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "h", "e", "l", "o", "he", "▁he"]
    return {"version": "1.0", "added_tokens": [{"id": i, "content": p, "special": True} for i, p in enumerate(pieces[:3])],
            "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
            "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                        {"Sequence": {"id": "A", "type_id": 0}}],
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                         {"type": "ByteFallback"}, {"type": "Fuse"},
                                                         {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
                      "vocab": {p: i for i, p in enumerate(pieces)}, "merges": [["h", "e"], ["▁", "he"]]}}


_ODD_VALUES = [None, True, 0, -1, 2**31, 10**30, 1e308, "x", "", [], {}, [1, "a"], {"type": "Nope"}, "\ud800".encode(
    "utf-8", "surrogatepass").decode("utf-8", "replace")]


def _paths(node, prefix=()) -> Iterator[tuple]:
    yield prefix
    if isinstance(node, dict):
        for key, value in list(node.items())[:64]:
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i in range(min(len(node), 8)):
            yield from _paths(node[i], (*prefix, i))


def _set(node, path: tuple, value) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _delete(node, path: tuple) -> None:
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]


def json_mutations(base: dict, rng: random.Random) -> bytes:
    data = json.loads(json.dumps(base))
    paths = [p for p in _paths(data) if p]
    choice = rng.randrange(8)
    if choice == 0:
        _delete(data, rng.choice(paths))
    elif choice == 1:
        _set(data, rng.choice(paths), rng.choice(_ODD_VALUES))
    elif choice == 2:
        merges = data["model"].get("merges")
        if isinstance(merges, list) and merges:
            merges[rng.randrange(len(merges))] = rng.choice(["zz qq", ["\u2581", "nope"], "a", 7, ["a", "b", "c"]])
    elif choice == 3:
        vocab = data["model"]["vocab"]
        vocab[rng.choice(list(vocab))] = rng.choice([10**30, -1, 2**40, 1.5, len(vocab) + 5])
    elif choice == 4:
        raw = bytearray(json.dumps(data, ensure_ascii=False).encode())
        raw[rng.randrange(len(raw))] = rng.choice((0xFF, 0xC3, 0x80, 0xED))
        return bytes(raw)
    elif choice == 5:
        depth = rng.choice((50, 500, 5000, 100000))
        _set(data, rng.choice(paths), json.loads("[" * min(depth, 900) + "]" * min(depth, 900)))
        if depth > 900:
            return json.dumps(data).replace('"model"', '"deep": ' + "[" * depth + "]" * depth + ', "model"', 1).encode()
    elif choice == 6:
        raw = json.dumps(data).encode()
        return raw[:rng.randrange(len(raw))]
    else:
        raw = bytearray(json.dumps(data).encode())
        for _ in range(rng.randint(1, 6)):
            raw[rng.randrange(len(raw))] = rng.randrange(32, 127)
        return bytes(raw)
    return json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")


# ----- running cases ------------------------------------------------------------------------------

class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_case(path: Path) -> str:
    """"valid", "error" (a TokenizerError naming the file), or "ESCAPE: …"."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        tok = tokenizer.load(path)
        ids = tok.encode(SAMPLE, add_special=True, parse_special=True)
        tok.decode(ids)
        tok.decode(list(range(min(tok.vocab_size, 300))))
        return "valid"
    except TokenizerError as err:
        return "error" if str(path) in str(err) else f"ESCAPE: error without the file name: {err}"
    except _Timeout:
        return "ESCAPE: over 10 s"
    except Exception as err:  # noqa: BLE001 - the point is to catch every escape
        frame = traceback.extract_tb(err.__traceback__)[-1]
        return f"ESCAPE: {type(err).__name__}: {err} (at {Path(frame.filename).name}:{frame.lineno})"
    finally:
        signal.alarm(0)


def gguf_cases(rng: random.Random, n: int) -> Iterator[bytes]:
    bases = [write_gguf(byte_level_entries()), write_gguf(sentencepiece_entries())]
    for base in bases:  # every section boundary of each base, exactly
        for at in sorted(set(gguf_fields(base)["boundary"])):
            yield base[:at]
    for _ in range(n):
        yield gguf_mutations(rng.choice(bases), rng)


def json_cases(rng: random.Random, n: int) -> Iterator[bytes]:
    bases = [small_json("byte-level"), small_json("sentencepiece")]
    for _ in range(n):
        yield json_mutations(rng.choice(bases), rng)


def run(kind: str, n: int, seed: int, report: Callable[[str], None] = print) -> Counter:
    rng = random.Random(seed)
    outcomes: Counter = Counter()
    escapes: list[str] = []
    cases = gguf_cases(rng, n) if kind == "gguf" else json_cases(rng, n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("model.gguf" if kind == "gguf" else "tokenizer.json")
        for data in cases:
            path.write_bytes(data)
            outcome = run_case(path)
            outcomes[outcome.split(":")[0]] += 1
            if outcome.startswith("ESCAPE") and len(escapes) < 20:
                escapes.append(outcome)
                (Path(tmp).parent / f"fuzz-escape-{kind}-{len(escapes)}").write_bytes(data)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report(f"{kind}: {sum(outcomes.values())} cases: {dict(outcomes)}; peak RSS {peak_mb:.0f} MB")
    for line in escapes:
        report("  " + line[:300])
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--format", choices=("gguf", "json", "both"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-rss-mb", type=int, default=256,
                        help="fail if the process ever held more (the loaders allocate at most ~ the file's size)")
    args = parser.parse_args()
    sys.setrecursionlimit(10000)
    kinds = ("gguf", "json") if args.format == "both" else (args.format,)
    escaped = sum(run(kind, args.iterations, args.seed)["ESCAPE"] for kind in kinds)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if peak_mb > args.max_rss_mb:
        print(f"peak RSS {peak_mb:.0f} MB is over the bound of {args.max_rss_mb} MB")
    sys.exit(1 if escaped or peak_mb > args.max_rss_mb else 0)


if __name__ == "__main__":
    main()
