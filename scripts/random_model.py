"""A llama-architecture GGUF of any size with random F16 weights and a real model's tokenizer and chat
template, for speed runs where no real weights can be fetched (a GPU machine without a network). Not a
test: random weights write random text, so measure with ``--ignore-eos on --repeat-guard 0`` and a fixed
``-n`` (greedy, such a model soon repeats one token, which every drafter then drafts).

    python scripts/random_model.py SOURCE.gguf OUT.gguf --size 1b     # 2048 wide, 22 layers: 1.07 B
    python scripts/random_model.py SOURCE.gguf OUT.gguf --size tiny   # 64 wide, 2 layers: 3 M
    python scripts/random_model.py SOURCE.gguf VOCAB.gguf --vocab-only

SOURCE is any GGUF with a tokenizer (SmolLM2's, or the ``--vocab-only`` copy of it, 1.7 MB, which is what
travels to such a machine). The token embedding doubles as the output matrix, as in SmolLM2.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import gguf
import numpy as np


@dataclass(frozen=True)
class Shape:
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int


#: the sizes by name: 1b is TinyLlama's shape, the one the GPU figures use; tiny decodes in a fraction of a
#: millisecond on a CPU, where what a token costs beyond llama.cpp's own work shows
SHAPES = {"1b": Shape(2048, 22, 32, 4, 5632), "tiny": Shape(64, 2, 4, 4, 256)}
#: metadata that describes the source's weights, not its tokenizer: written anew
NOT_COPIED = ("GGUF.", "general.architecture", "general.file_type", "general.quantization_version")


def copy_tokenizer(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> int:
    """The source's metadata but its weights' (the tokenizer, the template, the name); the vocabulary size."""
    architecture = str(reader.fields["general.architecture"].contents())
    for key, found in reader.fields.items():
        if key.startswith(NOT_COPIED) or key.startswith(architecture + "."):
            continue
        sub_type = found.types[1] if found.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, found.contents(), found.types[0], sub_type=sub_type)
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def write_model(source: str, out: str, shape: Shape, seed: int = 0) -> None:
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(out, arch="llama")
    n_vocab = copy_tokenizer(reader, writer)
    writer.add_context_length(8192)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_freq_base(100000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_rope_dimension_count(shape.n_embd // shape.n_head)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    rng = np.random.default_rng(seed)

    def weights(rows: int, columns: int) -> np.ndarray:  # (small, so the activations stay finite)
        return (rng.standard_normal((rows, columns), dtype=np.float32) * 0.02).astype(np.float16)

    width, kv_width = shape.n_embd, shape.n_embd // shape.n_head * shape.n_head_kv
    writer.add_tensor("token_embd.weight", weights(n_vocab, width))
    for layer in range(shape.n_layer):
        block = f"blk.{layer}."
        writer.add_tensor(block + "attn_norm.weight", np.ones(width, np.float32))
        writer.add_tensor(block + "attn_q.weight", weights(width, width))
        writer.add_tensor(block + "attn_k.weight", weights(kv_width, width))
        writer.add_tensor(block + "attn_v.weight", weights(kv_width, width))
        writer.add_tensor(block + "attn_output.weight", weights(width, width))
        writer.add_tensor(block + "ffn_norm.weight", np.ones(width, np.float32))
        writer.add_tensor(block + "ffn_gate.weight", weights(shape.n_ff, width))
        writer.add_tensor(block + "ffn_up.weight", weights(shape.n_ff, width))
        writer.add_tensor(block + "ffn_down.weight", weights(width, shape.n_ff))
    writer.add_tensor("output_norm.weight", np.ones(width, np.float32))
    _finish(writer)


def write_vocabulary(source: str, out: str) -> None:
    """The source's tokenizer and template without weights: enough to build a model of any size from."""
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(out, arch=str(reader.fields["general.architecture"].contents()))
    copy_tokenizer(reader, writer)
    _finish(writer)


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--size", choices=SHAPES, default="1b")
    parser.add_argument("--vocab-only", action="store_true")
    args = parser.parse_args()
    if args.vocab_only:
        write_vocabulary(args.source, args.out)
    else:
        write_model(args.source, args.out, SHAPES[args.size])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
