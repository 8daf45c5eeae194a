"""The sampler chain as llama.cpp builds it: defaults, order, names and flags read off llama.cpp's own
common/ sources (fetched with the sdist); the model's recommendations (a GGUF's ``general.sampling.*``
written with the ``gguf`` package, a directory's generation_config.json) under the flags' precedence; the
chain printed by ``/info``, ``--verbose`` and ``--json``; and each sampler doing what it says on the real
model."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import fetch, model_path

from rml_chat.core.sampling_sources import choose, recommended
from rml_chat.core.settings import BY_NAME, SETTINGS
from rml_chat.engines.base import Sampling
from rml_chat.engines.sampler_chain import LETTERS, describe, parse_order, stages

#: llama.cpp's common_params_sampling field -> ours
FIELDS = {"top_k": "top_k", "top_p": "top_p", "min_p": "min_p", "xtc_probability": "xtc_probability",
          "xtc_threshold": "xtc_threshold", "typ_p": "typical_p", "temp": "temp", "dynatemp_range": "dynatemp_range",
          "dynatemp_exponent": "dynatemp_exp", "penalty_last_n": "repeat_last_n", "penalty_repeat": "repeat_penalty",
          "penalty_freq": "frequency_penalty", "penalty_present": "presence_penalty",
          "dry_multiplier": "dry_multiplier", "dry_base": "dry_base", "dry_allowed_length": "dry_allowed_length",
          "dry_penalty_last_n": "dry_penalty_last_n", "mirostat": "mirostat", "top_n_sigma": "top_n_sigma",
          "mirostat_tau": "mirostat_ent", "mirostat_eta": "mirostat_lr"}


def _struct() -> str:
    header = fetch.llama_common("common.h").read_text()
    return header[header.index("struct common_params_sampling {"):][:6000]


def test_every_default_and_the_order_are_llama_cpps() -> None:
    struct, ours = _struct(), Sampling()
    for theirs, name in FIELDS.items():
        value = re.search(rf"\b{theirs}\s*=\s*(-?[\d.]+)f?;", struct).group(1)
        assert float(value) == float(getattr(ours, name)), theirs
    enum_names = {"DRY": "dry", "TOP_K": "top_k", "TOP_P": "top_p", "MIN_P": "min_p", "TYPICAL_P": "typ_p",
                  "TEMPERATURE": "temperature", "XTC": "xtc", "PENALTIES": "penalties", "TOP_N_SIGMA": "top_n_sigma"}
    block = struct[struct.index("samplers = {"):struct.index("};", struct.index("samplers = {"))]
    assert tuple(enum_names[m] for m in re.findall(r"COMMON_SAMPLER_TYPE_(\w+)", block)) == ours.samplers
    breakers = re.search(r"dry_sequence_breakers = \{(.*?)\};", struct).group(1)
    assert tuple(json.loads(f"[{breakers}]")) == ours.dry_sequence_breakers


def test_the_sampler_names_letters_and_flags_are_llama_cpps() -> None:
    sampling = fetch.llama_common("sampling.cpp").read_text()
    pairs = re.findall(r"case COMMON_SAMPLER_TYPE_(\w+):\s*return '(\w)';", sampling)
    by_enum = dict(re.findall(r'case COMMON_SAMPLER_TYPE_(\w+):\s*return "(\w+)";', sampling))
    assert {by_enum[e]: letter for e, letter in pairs if by_enum[e] in LETTERS} == LETTERS
    arg = fetch.llama_common("arg.cpp").read_text()
    ours = {flag for row in SETTINGS for flag in row.flags}
    for flag in ("--temp", "--top-k", "--top-p", "--min-p", "--top-nsigma", "--xtc-probability", "--xtc-threshold",
                 "--typical", "--repeat-last-n", "--repeat-penalty", "--presence-penalty", "--frequency-penalty",
                 "--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n",
                 "--dry-sequence-breaker", "--dynatemp-range", "--dynatemp-exp", "--mirostat", "--mirostat-lr",
                 "--mirostat-ent", "--logit-bias", "--samplers", "--sampler-seq", "--ignore-eos", "--seed", "-bs",
                 "--backend-sampling"):
        assert f'"{flag}"' in arg and flag in ours, flag


def test_llama_server_gets_the_settings_as_its_request_fields_and_an_empty_breaker_list_is_refused() -> None:
    from rml_chat.engines.server import request_fields
    from rml_chat.errors import UsageError

    fields = request_fields(Sampling(typical_p=0.5, logit_bias=((2, float("-inf")),), ignore_eos=True), stop_ids=(7,))
    assert fields["typical_p"] == 0.5 and fields["logit_bias"] == [[2, False], [7, False]]
    assert "backend_sampling" not in fields and request_fields(Sampling(backend_sampling=True))["backend_sampling"] is True
    assert fields["samplers"] == list(Sampling().samplers) and fields["dry_sequence_breakers"] == ["\n", ":", "\"", "*"]
    with pytest.raises(UsageError, match="llama-server takes no empty list of DRY sequence breakers"):
        request_fields(Sampling(dry_sequence_breakers=()))


def test_the_chain_follows_llama_cpps_common_sampler_init() -> None:
    default = stages(Sampling(seed=7))
    assert [s.name for s in default] == [*Sampling().samplers, "dist"]
    assert describe(stages(Sampling(temp=0.5, mirostat=2, seed=1))) == \
        "temperature(t=0.5) -> mirostat_v2(tau=5, eta=0.1, seed=1)"
    chain = stages(Sampling(ignore_eos=True, logit_bias=((5, 1.0),), samplers=("min_p",)), grammar=True, stop_ids=(2,))
    assert describe(chain) == "grammar() -> logit_bias(biases=[[5, 1], [2, -inf]]) -> min_p(p=0.05) -> dist(seed=-1)"
    assert parse_order("nucleus;TOP-K;typ") == ("top_p", "top_k", "typ_p") and parse_order("edskypmxt") == Sampling().samplers
    with pytest.raises(ValueError):
        parse_order("top_k;hot")


def _copy_with(tmp_path, **metadata) -> str:
    """SmolLM2's GGUF with ``general.sampling.*`` keys, as llama.cpp's converter writes them."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(str(model_path("smollm2")), "r")
    target = tmp_path / "recommends.gguf"
    writer = gguf.GGUFWriter(str(target), arch=reader.get_field("general.architecture").contents(),
                             endianess=reader.endianess)
    kinds = {str: gguf.GGUFValueType.STRING, int: gguf.GGUFValueType.INT32, float: gguf.GGUFValueType.FLOAT32}
    copy_with_new_metadata(reader, writer, {f"general.sampling.{k}": MetadataDetails(kinds[type(v)], v)
                                            for k, v in metadata.items()}, [])
    return str(target)


def test_a_ggufs_recommendations_apply_where_no_flag_is_given_and_json_says_where_each_came_from(tmp_path) -> None:
    path = _copy_with(tmp_path, temp=0.25, top_k=17, penalty_repeat=1.5, sequence="top_k;temperature", min_p=-3.0)
    values, refused = recommended(model_path("smollm2"), model_path("smollm2"))
    assert values == {} and refused == []  # the real SmolLM2 recommends nothing
    done = subprocess.run([sys.executable, "-m", "rml_chat", path, "-p", "Hi", "-n", "2", "--top-k", "5", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["sampling"]
    assert out["temp"] == {"value": 0.25, "from": "model: general.sampling.temp"}
    assert out["top_k"] == {"value": 5, "from": "flag"}  # a flag wins
    assert out["repeat_penalty"]["from"] == "model: general.sampling.penalty_repeat"
    assert out["samplers"] == {"value": ["top_k", "temperature"], "from": "model: general.sampling.sequence"}
    assert out["top_p"] == {"value": 0.95, "from": "llama.cpp's default"}
    assert out["min_p"]["from"] == "llama.cpp's default"  # -3 is no min-p: left out, and said
    assert "note: the model's sampling recommendation is left out: general.sampling.min_p must be a number from 0 " \
           "to 1 (0: off), not '-3.0'" in done.stderr


def test_a_model_directorys_generation_config_recommends_as_llama_cpps_converter_reads_it(tmp_path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.6, "top_p": 0.9,
                                                                 "repetition_penalty": 1.05, "do_sample": True}))
    values, refused = recommended(tmp_path, tmp_path / "weights.gguf")
    chosen = choose({"temp": 1.0}, values, refused)
    assert (chosen.sampling.temp, chosen.sampling.top_p, chosen.sampling.repeat_penalty) == (1.0, 0.9, 1.05)
    assert chosen.sources["repeat_penalty"] == "model: generation_config.json repetition_penalty"


def _reply(*flags: str, prompt: str = "Write a list of ten fruits.") -> dict:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "-p", prompt, "--json", "--seed", "3", *flags],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_each_sampler_acts_on_the_real_model() -> None:
    from rml_chat.core.model import load_model

    tok = load_model(str(model_path("smollm2"))).tokenizer
    greedy = _reply("--temp", "0", "-n", "24")
    first = tok.encode(greedy["reply"])[0]
    barred = _reply("--temp", "0", "-n", "24", "--logit-bias", f"{first}-inf")
    assert tok.encode(barred["reply"])[:1] != [first]  # -inf: never
    assert _reply("--temp", "0", "-n", "24", "--samplers", "top_k;temp")["reply"] == greedy["reply"]
    endless = _reply("--temp", "0", "-n", "40", "--ignore-eos", prompt="Say yes.")
    assert endless["stop_reason"] == "length" and endless["completion_tokens"] == 40
    # a repetition penalty and DRY change what a looping greedy reply writes; the defaults leave it alone
    loop = "Write the word yes 30 times."
    plain = _reply("--temp", "0", "-n", "60", prompt=loop)["reply"]
    assert _reply("--temp", "0", "-n", "60", "--dry-multiplier", "0.8", prompt=loop)["reply"] != plain
    assert _reply("--temp", "0", "-n", "60", "--repeat-penalty", "1.3", prompt=loop)["reply"] != plain
    for flags in (("--mirostat", "2"), ("--mirostat", "1"), ("--xtc-probability", "1", "--xtc-threshold", "0.01"),
                  ("--typical", "0.5"), ("--top-nsigma", "1"), ("--dynatemp-range", "0.5"),
                  ("--presence-penalty", "1.5", "--frequency-penalty", "1")):
        out = _reply("-n", "16", *flags)
        assert out["completion_tokens"] > 0 and out["sampler_chain"] == describe(stages(_as_sampling(out)))


def _as_sampling(out: dict) -> Sampling:
    values = {name: tuple(tuple(v) if isinstance(v, list) else v for v in entry["value"])
              if isinstance(entry["value"], list) else entry["value"] for name, entry in out["sampling"].items()}
    return Sampling(**values)


def test_set_changes_a_sampler_and_info_prints_the_chain_and_where_each_setting_came_from(tmp_path, capsys) -> None:
    from conftest import smollm_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from rml_chat.frontends.repl import Repl

    with smollm_session(1024, 4) as session, create_pipe_input() as pipe:
        session.options.sampling_sources = {"temp": "flag"}
        pipe.send_text("/set dry-multiplier 0.8\r/set samplers kmt\r/set logit-bias 2-inf\r/info\r")
        pipe.close()
        Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history").run()
    out = capsys.readouterr().out
    assert "sampler chain: logit_bias(biases=[[2, -inf]]) -> top_k(k=40) -> min_p(p=0.05) -> temperature(t=0) -> " \
           "dist(seed=-1)" in out
    assert "sampling set by: temp (flag), dry-multiplier (/set), samplers (/set), logit-bias (/set)" in out
    assert BY_NAME["samplers"].settable and session.options.sampling.dry_multiplier == 0.8


# ----- the repeat guard (rml_chat/core/loop_guard.py) -------------------------------------------------------

def test_the_guard_sees_one_span_repeated_and_not_a_refrain_a_table_or_a_list() -> None:
    from rml_chat.core.loop_guard import LoopGuard

    guard = LoopGuard(limit=64)
    loop = "It was a dark night. " + "He had returned home to his home. " * 30
    assert guard.loop_tokens(loop, tokens=len(loop) // 4) >= (len(loop) - 30) // 4
    refrain = "".join(f"Verse {i}: the tide turns over stone number {i * 7}.\nAnd the waves come home.\n" for i in range(30))
    table = "| n | square |\n|---|---|\n" + "".join(f"| {i} | {i * i} |\n" for i in range(100))
    items = "".join(f"{i}. Item number {i}\n" for i in range(1, 120))
    assert [guard.loop_tokens(text, tokens=len(text) // 4) for text in (refrain, table, items)] == [0, 0, 0]
    assert LoopGuard(limit=0).tripped(loop, tokens=10_000) == 0  # off
    two = ("The bicycle was invented in the early nineteenth century, and its first form had no pedals at all. "
           "Riders pushed it along with their feet, and within decades cranks, chains and air-filled tyres had "
           "turned it into the machine we know today. ")  # (265 characters: two sentences, written again and again)
    assert len(two) > 200 and guard.loop_tokens("It began. " + two * 4, tokens=300) >= 64
    block = "".join(f"def step_{i}(x):\n    return x * {i} + {i * i}\n\n" for i in range(30))
    rewrite = "Here it is:\n" + block + "\nAnd with one change:\n" + block.replace("step_29", "last_step")
    assert guard.loop_tokens(rewrite, tokens=len(rewrite) // 4) == 0  # (a block written twice on purpose)


def test_a_looping_reply_is_ended_by_the_guard_with_its_own_stop_reason_and_a_note() -> None:
    prompt = "Write the word yes 30 times."
    guarded = _reply("--temp", "0", "-n", "600", "--repeat-guard", "64", prompt=prompt)
    assert guarded["stop_reason"] == "repetition" and guarded["completion_tokens"] < 300
    assert re.fullmatch(r"reply stopped: it had repeated one span for \d+ tokens \(the repeat guard; --repeat-guard 0 "
                        r"lets such a reply run\)", guarded["stop_note"])
    assert guarded["sampling"]["repeat_guard"] == {"value": 64, "from": "flag"}
    free = _reply("--temp", "0", "-n", "600", "--repeat-guard", "0", prompt=prompt)
    assert free["stop_reason"] == "length" and free["reply"].startswith(guarded["reply"])
