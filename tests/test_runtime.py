"""Our llama.cpp runtime (rml_chat/runtime.py) against the oracle it replaces, llama-cpp-python's ``Llama``:
the same ids sampled, greedy and seeded, over several turns with prefix reuse; and its early import of the
bindings alone, which leaves the package working for everyone else."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, model_path

from rml_chat.core.model import load_model
from rml_chat.engines.base import Generation, Sampling
from rml_chat.engines.local import LocalEngine

TURNS = ["Name three colours.", "And three animals?", "Which of them is the largest?"]


@pytest.fixture(scope="module")
def model():
    return load_model(str(model_path("smollm2")))


def _oracle(weights) -> object:
    """llama-cpp-python's ``Llama`` over the weights as ours runs them: a prompt evaluated in one batch with
    its last id (llama-server's way, and ``Llama.eval``'s), flash attention on (what llama.cpp's ``auto``,
    our default, resolves to on the CPU). On a CPU with AMX it loads without llama.cpp's extra buffers, as
    ours does (engines/cpu_quirks.py)."""
    from llama_cpp import Llama, llama_cpp

    from rml_chat.engines import cpu_quirks

    defaults = llama_cpp.llama_model_default_params

    def params():
        made = defaults()
        made.use_extra_bufts = not cpu_quirks.no_extra_buffers()
        return made

    llama_cpp.llama_model_default_params = params
    try:
        return Llama(model_path=str(weights), n_ctx=1024, n_batch=512, n_threads=2, n_threads_batch=2,
                     flash_attn=True, verbose=False)
    finally:
        llama_cpp.llama_model_default_params = defaults


def _theirs(model, sampling: Sampling, prompts: list[list[int]]) -> list[list[int]]:
    """llama-cpp-python's own loop: ``Llama.generate`` on the same prompt ids, one ``Llama`` for all turns."""
    llm = _oracle(model.weights)
    replies = []
    try:
        for ids in prompts:
            llm.set_seed(sampling.seed)
            reply: list[int] = []
            for token in llm.generate(ids, top_k=sampling.top_k, top_p=sampling.top_p, min_p=sampling.min_p,
                                      temp=sampling.temp, repeat_penalty=sampling.repeat_penalty):
                if token in model.stop_ids:
                    break
                reply.append(token)
                if len(reply) == sampling.max_tokens:  # (as ours: the last id of -n is not decoded)
                    break
            replies.append(reply)
    finally:
        llm.close()
    return replies


def _chat_prompts(model, replies_text: list[str]) -> list[list[int]]:
    """The prompt ids of each turn of a chat whose earlier replies were ``replies_text``."""
    messages: list[dict] = []
    prompts = []
    for turn, text in enumerate(TURNS):
        messages.append({"role": "user", "content": text})
        prompts.append(model.encoder.encode(model.encoder.format(messages)))
        messages.append({"role": "assistant", "content": replies_text[turn] if turn < len(replies_text) else ""})
    return prompts


@pytest.mark.parametrize("sampling", [Sampling(temp=0.0, seed=0, max_tokens=24),
                                      Sampling(temp=0.8, seed=1234, max_tokens=24)],
                         ids=["greedy", "seeded"])
def test_our_engine_samples_the_ids_llama_cpp_pythons_llama_samples(model, sampling: Sampling) -> None:
    # (penalties off: llama-cpp-python's Llama does not hand the prompt to its penalties, llama-server and
    # llama-cli do, and so do we; tests/test_remote.py holds the penalties to llama-server)
    engine = LocalEngine(model.weights, n_ctx=1024, n_threads=2)
    ours, replies_text, evaluated = [], [], []
    try:
        for turn in range(len(TURNS)):
            ids = _chat_prompts(model, replies_text)[turn]
            gen = Generation()
            ours.append(list(engine.generate(ids, sampling, model.stop_ids, gen)))
            evaluated.append(gen.evaluated)
            replies_text.append(model.tokenizer.decode(ours[-1]))
            decoded = ours[-1][:-1] if gen.stop_reason == "length" else ours[-1]  # a stop id is never decoded,
            assert engine.cached_ids() == ids + decoded                           # nor the last id of -n
    finally:
        engine.close()
    assert _theirs(model, sampling, _chat_prompts(model, replies_text)) == ours
    assert all(ours) and evaluated[1] < len(_chat_prompts(model, replies_text)[1]) / 2  # turn 2 reused turn 1


def _run_on_a_file_that_is_no_model(script: str, tmp_path) -> subprocess.CompletedProcess:
    """``script`` in a fresh interpreter (llama.cpp's log callback is per process), its ``sys.argv[1]`` a
    file llama.cpp can't load; it must exit 0."""
    not_gguf = tmp_path / "not-a-model.gguf"
    not_gguf.write_text("not a model\n")
    done = subprocess.run([sys.executable, "-c", script, str(not_gguf)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_the_bindings_load_alone_and_the_package_completes_on_demand(tmp_path) -> None:
    """``bindings()`` imports neither numpy nor llama-cpp-python's ``Llama``; the first name asked of the
    package completes it, and our log callback is put back (a failed load still gives llama.cpp's reason)."""
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        from rml_chat.engines.bindings import bindings, llama_log
        bindings(); llama_log()
        import llama_cpp
        print("numpy" in sys.modules, "jinja2" in sys.modules, "Llama" in vars(llama_cpp))
        from llama_cpp import Llama
        print(Llama.__name__, "numpy" in sys.modules, llama_cpp.__version__ != "")
        from rml_chat.engines.local import LocalEngine
        from rml_chat.errors import ModelError
        try:
            LocalEngine(Path(sys.argv[1]))
        except ModelError as err:
            print(err)
    """)
    done = _run_on_a_file_that_is_no_model(script, tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0] == "False False False"
    assert lines[1] == "Llama True True"
    assert "could not load the weights: error loading model: llama_model_loader" in lines[2]  # its log
    assert done.stderr == ""  # llama-cpp-python's own callback did not take over the log


def test_the_log_keeps_llama_cpps_reasons_and_prints_only_when_verbose(tmp_path) -> None:
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        from rml_chat.engines.local import LocalEngine
        from rml_chat.errors import ModelError
        for verbose in (False, True):
            try:
                LocalEngine(Path(sys.argv[1]), verbose=verbose)
            except ModelError as err:
                print(err)
            sys.stderr.write("--- verbose above\\n" if verbose else "--- quiet above\\n")
    """)
    done = _run_on_a_file_that_is_no_model(script, tmp_path)
    quiet, verbose = done.stdout.splitlines()
    assert "could not load the weights: error loading model: llama_model_loader" in quiet
    assert quiet.endswith("(--verbose shows llama.cpp's log)") and not verbose.endswith("log)")
    before, after = done.stderr.split("--- quiet above\n")
    assert before == ""  # nothing of llama.cpp's when not verbose
    assert "llama_model_load" in after.split("--- verbose above")[0]  # its log, as it came, when verbose


def test_a_random_weight_model_of_the_speed_runs_has_smollm2s_tokenizer_and_writes_n_tokens(tmp_path, model) -> None:
    """scripts/random_model.py, which makes the GPU runs' model where no weights can be carried
    (docs/performance.md, "On a GPU"): from the 1.7 MB tokenizer-only copy, a model of the tiny shape that
    tokenizes as SmolLM2 does and that rml-chat runs to the ``-n`` it is given."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import random_model

    vocabulary, weights = tmp_path / "vocab.gguf", tmp_path / "tiny.gguf"
    random_model.write_vocabulary(str(model_path("smollm2")), str(vocabulary))
    random_model.write_model(str(vocabulary), str(weights), random_model.SHAPES["tiny"])
    assert vocabulary.stat().st_size < 2_000_000
    made = load_model(str(weights))
    text = "Random weights, a real tokenizer: ids as SmolLM2's."
    assert made.tokenizer.encode(text) == model.tokenizer.encode(text)
    assert made.detection.format == model.detection.format and made.stop_ids == model.stop_ids
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(weights), "-p", "Hello", "-n", "24", "--ignore-eos", "on",
                           "--repeat-guard", "0", "--temp", "0", "--json", "--prompt-cache", "off"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["completion_tokens"] == 24
