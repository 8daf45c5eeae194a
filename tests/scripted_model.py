"""A model that writes a given reply: a real GGUF, run by llama.cpp like any other, whose one layer is set by
hand so that its greedy reply is a script. It lets a test put in a real terminal what real models write and
a 135M model under a grammar can't be made to (a call whose keys come in another order, a call opened inside
a thought), with no hook in rml-chat: the tokenizer, the template, the engine, the parser and the screen are
the ones a user runs.

How it writes the script. SmolLM2's vocabulary (its merges, so the prompt is tokenized as usual) gets:

- the family's markers in its spare special entries, control or user-defined as in the real vocabulary;
- each piece of the script as a token of its own, appended (type NORMAL, spelled in GPT-2's byte alphabet as
  the vocabulary's own are: no merge makes it, so no prompt
  holds it);
- ``key``, appended as a user-defined token: the text that says "the second reply now" (a tool's result).

Each script token gets a dimension of its own in a 64-wide residual stream, and the output matrix maps a
token's dimension to the token after it: a lookup, ``next = script[i + 1]``, which needs the pieces to be
distinct. Every other token's embedding is one shared "bias" dimension, which the output maps to the
script's first token. The layer's one attention head looks for ``key``: its query is constant, only
``key``'s key is not zero (on a pair of dimensions RoPE barely turns, so where ``key`` stands does not
matter), and its value writes an "after" dimension, which moves the start from the first script to the
second. The feed-forward part is zero. For example, with ``first=["Hello", " there"]``::

    prompt ... "\\n"   -> bias            -> "Hello"
    "Hello"            -> slot("Hello")   -> " there"
    " there"           -> slot(" there")  -> eos

The margins are some 20 logits, so any sampler at ``--temp 0`` (and most above) writes the script.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from conftest import fetch, model_path
from test_control_tokens import SPARE

from tokenizer.stages.byte_alphabet import spell

WIDTH = 64
BIAS, AFTER, KEY = 0, 1, 2  # residual dimensions; the script's tokens take 3, 4, ...
SCALE = 3.0


def scripted_model(target: Path, template: str, first: list[str], then: list[str], *,
                   control: tuple[str, ...] = (), user_defined: tuple[str, ...] = (),
                   key: str = "Sunny, 21 C") -> Path:
    """Write the GGUF at ``target``: under ``template`` (a stem of llama.cpp's set) it replies ``first``
    (pieces: a marker of ``control``/``user_defined`` is that token, any other text a token of its own),
    then the end-of-turn token; once ``key`` is anywhere in the prompt, ``then``."""
    reader = gguf.GGUFReader(str(model_path("smollm2")))
    tokens = [str(t) for t in reader.get_field("tokenizer.ggml.tokens").contents()]
    types = list(reader.get_field("tokenizer.ggml.token_type").contents())
    markers = list(control) + list(user_defined)
    assert len(markers) <= len(SPARE)
    for i, marker in zip(SPARE, markers):
        kind = gguf.TokenType.USER_DEFINED if marker in user_defined else gguf.TokenType.CONTROL
        tokens[i], types[i] = marker, int(kind)
    pieces = [p for p in dict.fromkeys(first + then) if p not in markers]
    spelled = {p: spell(p.encode("utf-8")) for p in pieces}  # (a normal token of a byte-level vocabulary
    known = set(tokens)  # spells its bytes in GPT-2's alphabet; special and user-defined ones are raw text)
    assert not (set(spelled.values()) | {key}) & known, "a piece that is already a token would be made by merges"
    ids = {marker: tokens.index(marker) for marker in markers}
    for piece in pieces:
        ids[piece] = len(tokens)
        tokens.append(spelled[piece])
        types.append(int(gguf.TokenType.NORMAL))
    ids[key] = len(tokens)
    tokens.append(key)
    types.append(int(gguf.TokenType.USER_DEFINED))
    eos = int(reader.get_field("tokenizer.ggml.eos_token_id").contents())
    scripts = [[ids[p] for p in first], [ids[p] for p in then]]
    written = scripts[0] + scripts[1]
    assert len(set(written)) == len(written), "each piece once: the next token is looked up from this one"
    assert 3 + len(written) <= WIDTH
    _write(target, reader, tokens, types, template, _weights(len(tokens), ids[key], scripts, eos))
    return target


def _weights(vocab: int, key: int, scripts: list[list[int]], eos: int) -> dict[str, np.ndarray]:
    """The one layer, as above (numpy shapes are (out, in), as the gguf writer wants them)."""
    embed = np.zeros((vocab, WIDTH), np.float32)
    embed[:, BIAS] = 1.0
    embed[key, KEY] = 1.0
    out = np.zeros((vocab, WIDTH), np.float32)
    first, then = scripts
    out[first[0], [BIAS, AFTER]] = SCALE * 1.0, SCALE * -2.0  # (no key: this one; after it: far below)
    out[then[0], [BIAS, AFTER]] = SCALE * 0.5, SCALE * 1.5
    slot = 3
    for script in scripts:
        for this, following in zip(script, script[1:] + [eos]):
            embed[this, slot] = 1.0
            out[following, slot] += 4 * SCALE
            slot += 1
    normed_key = np.sqrt(WIDTH / 2)  # (the key token's two ones after RMS norm: 5.66 each)
    q, k, v, o = (np.zeros((WIDTH, WIDTH), np.float32) for _ in range(4))
    q[WIDTH - 2, BIAS] = 4.0  # (the last pair of a head's dimensions: RoPE turns it by 1e-19 a position)
    k[WIDTH - 2, KEY] = 2.0  # (score ~ 4 * 5.66 * 2 * 5.66 / 8 = 32 where key stands, 0 elsewhere)
    v[0, KEY] = 1.0
    o[AFTER, 0] = 1.0 / normed_key
    ones = np.ones(WIDTH, np.float32)
    zeros = np.zeros((WIDTH, WIDTH), np.float32)
    return {"token_embd.weight": embed, "output_norm.weight": ones, "output.weight": out,
            "blk.0.attn_norm.weight": ones, "blk.0.attn_q.weight": q, "blk.0.attn_k.weight": k,
            "blk.0.attn_v.weight": v, "blk.0.attn_output.weight": o, "blk.0.ffn_norm.weight": ones,
            "blk.0.ffn_gate.weight": zeros, "blk.0.ffn_up.weight": zeros, "blk.0.ffn_down.weight": zeros}


SHAPE = {"llama.block_count": 1, "llama.embedding_length": WIDTH, "llama.feed_forward_length": WIDTH,
         "llama.attention.head_count": 1, "llama.attention.head_count_kv": 1, "llama.rope.dimension_count": WIDTH,
         "general.file_type": 0}


def _write(target: Path, reader: gguf.GGUFReader, tokens: list[str], types: list[int], template: str,
           tensors: dict[str, np.ndarray]) -> None:
    writer = gguf.GGUFWriter(str(target), "llama")
    new = {"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types, "llama.vocab_size": len(tokens),
           "tokenizer.chat_template": (fetch.models_dir() / "templates" / f"{template}.jinja").read_text(encoding="utf-8"),
           **SHAPE}
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, new.pop(field.name, field.contents()), kind, sub_type=sub)
    for name, value in new.items():
        writer.add_key_value(name, value, gguf.GGUFValueType.STRING)
    for name, data in tensors.items():
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
