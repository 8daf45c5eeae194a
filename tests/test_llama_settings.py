"""llama.cpp's context settings as llama-cli sets them: flash attention, the logical batch and the
micro-batch, with llama.cpp's flags and defaults (read off its own ``common/common.h``), what ``-fa auto``
resolved to in ``/info`` and ``--json``, and a prompt cut into llama.cpp's own micro-batches."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT, fetch, model_path, smollm_session

from rml_chat.core.settings import BY_NAME, SettingError, choice
from rml_chat.engines.runtime import ubatches


def _common_default(field: str) -> str:
    header = fetch.llama_common("common.h").read_text()
    struct = header[header.index("struct common_params {"):]
    return re.search(rf"\b{field}\s*=\s*([\w-]+)", struct).group(1)


def test_the_flags_and_defaults_are_llama_cpps() -> None:
    assert (BY_NAME["batch_size"].flags, BY_NAME["batch_size"].default) == (("-b", "--batch-size"),
                                                                             int(_common_default("n_batch")))
    assert (BY_NAME["ubatch_size"].flags, BY_NAME["ubatch_size"].default) == (("-ub", "--ubatch-size"),
                                                                               int(_common_default("n_ubatch")))
    assert BY_NAME["flash_attn"].flags == ("-fa", "--flash-attn")
    assert f"LLAMA_FLASH_ATTN_TYPE_{BY_NAME['flash_attn'].default.upper()}" == _common_default("flash_attn_type")


def test_a_switch_takes_the_words_llama_cpp_takes_for_on_off_and_auto() -> None:
    """``-fa true``, ``--context-shift 0``, ollama's ``--think=false``: the words are read off llama.cpp's own
    ``is_truthy``, ``is_falsey`` and ``is_autoy`` (``common/arg.cpp``), and each is kept as the word it is."""
    source = fetch.llama_common("arg.cpp").read_text()
    switch = choice("on", "off", "auto")
    for kind, ours in (("truthy", "on"), ("falsey", "off"), ("autoy", "auto")):
        body = re.search(rf"bool common_arg_utils::is_{kind}\(.*?\{{(.*?)\}}", source, re.S).group(1)
        words = re.findall(r'value == "([^"]*)"', body)
        assert len(words) >= 2 and [switch(word) for word in words] == [ours] * len(words), (kind, words)
    assert choice("on", "off")("false") == "off"
    with pytest.raises(SettingError):
        choice("on", "off")("-1")  # (auto: not one of this switch's values)


def test_a_prompt_is_cut_as_llama_cpp_cuts_a_batch_into_micro_batches() -> None:
    assert ubatches(0, 2048, 512) == []
    assert ubatches(3000, 2048, 512) == [(0, 512), (512, 1024), (1024, 1536), (1536, 2048), (2048, 2560),
                                         (2560, 3000)]
    assert ubatches(1300, 1000, 512) == [(0, 512), (512, 1000), (1000, 1300)]  # a batch's tail is its own piece
    spans = ubatches(777, 64, 7)
    assert spans[0][0] == 0 and spans[-1][1] == 777 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(end - start <= 7 and start // 64 == (end - 1) // 64 for start, end in spans)


def _report(*flags: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-p", "Say hi.", "-n", "4",
                           "--temp", "0", "--json", "--prompt-cache", "off", *flags],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(("flags", "expected"), [
    ((), ("on (auto)", 2048, 512)),          # the CPU backend has flash attention: auto turns it on
    (("-fa", "off", "-b", "64", "-ub", "16"), ("off", 64, 16)),
    (("-fa", "on", "-b", "8", "-ub", "32"), ("on", 8, 8)),  # the micro-batch at most the batch, as llama.cpp
    (("-fa", "false"), ("off", 2048, 512)),  # (llama.cpp's other words for a switch's values)
    (("-fa", "-1"), ("on (auto)", 2048, 512)),
])
def test_json_reports_flash_attention_and_the_batch_sizes_llama_cpp_ran_with(flags, expected) -> None:
    report = _report(*flags)
    assert (report["flash_attn"], report["batch_size"], report["ubatch_size"]) == expected
    assert report["completion_tokens"] == 4


def test_a_prompt_is_evaluated_in_micro_batches_with_progress_between_and_its_last_id_among_them() -> None:
    from rml_chat.core.model import load_model
    from rml_chat.engines.base import Generation, Sampling
    from rml_chat.engines.local import LocalEngine

    model = load_model(str(model_path("smollm2")))
    ids = model.encoder.encode(model.encoder.format([{"role": "user", "content": "Name the planets of the sun."}]))
    engine = LocalEngine(model.weights, n_ctx=512, n_threads=2, n_batch=16, n_ubatch=6)
    seen: list[tuple[int, int]] = []
    try:
        gen = Generation()
        reply = list(engine.generate(ids, Sampling(temp=0.0, max_tokens=3), model.stop_ids, gen,
                                     progress=lambda done, total, _: seen.append((done, total))))
        assert [done for done, _ in seen] == [end for _, end in ubatches(len(ids), 16, 6)]
        assert {total for _, total in seen} == {len(ids)} and gen.evaluated == len(ids)  # the last id with the rest
        assert len(reply) == 3 and engine.cached_ids() == ids + reply[:-1]
        again = Generation()
        list(engine.generate(ids, Sampling(temp=0.0, max_tokens=1), model.stop_ids, again))
        assert again.evaluated == 1  # the whole prompt cached: its last id again, alone (llama-server's way)
    finally:
        engine.close()


def test_info_shows_what_flash_attention_resolved_to(capsys, tmp_path) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from rml_chat.frontends.repl import Repl

    with smollm_session(512, 4) as session, create_pipe_input() as pipe:
        pipe.send_text("/info\r")
        pipe.close()
        assert Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history").run() == 0
    info = capsys.readouterr().out
    assert re.search(r"flash attention: (on|off) \(auto\)", info), info
