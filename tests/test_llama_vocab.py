"""llama.cpp's own tokenizer tests: every .inp string must give exactly the .out ids."""

from __future__ import annotations

import pytest
from conftest import VOCABS, model_path, ours


@pytest.mark.parametrize("name", VOCABS)
def test_inp_out_ids(name: str) -> None:
    base = model_path(name)
    # Each input ends with the separator line; each expected line ends with a newline.
    inputs = base.with_name(base.name + ".inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    if inputs and inputs[-1] == "":
        inputs.pop()
    outputs = base.with_name(base.name + ".out").read_text(encoding="utf-8").split("\n")
    if outputs and outputs[-1] == "":
        outputs.pop()
    assert len(inputs) == len(outputs), f"{name}: {len(inputs)} inputs, {len(outputs)} outputs"
    tok = ours(name)
    mismatches = []
    for text, expected_line in zip(inputs, outputs):
        expected = [int(x) for x in expected_line.split()]
        got = tok.encode(text, add_special=False, parse_special=False)
        if got != expected:
            mismatches.append((text, got, expected))
    assert not mismatches, f"{name}: {len(mismatches)} of {len(inputs)} differ, first: {mismatches[0]!r}"
