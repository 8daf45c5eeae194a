"""The model doctor (``--check``): each defect built as a copy of SmolLM2's GGUF with one metadata field
changed (the ``gguf`` package writes the copies), its finding asserted with its severity and fix; then the
fix command applied to the copy, and the finding gone. The real models and llama.cpp's test vocabularies
give no error finding; several models in one run, the JSON schema and the JUnit report."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import fetch, model_path

from rml_chat.core.model import load_model
from rml_chat.doctor import reply, vocabulary
from rml_chat.doctor.patient import Patient
from rml_chat.engines.llama_vocab import LlamaVocab
from rml_chat.engines.local import LocalEngine
from tokenizer import Tokenizer
from tokenizer.chat import ChatEncoder
from tokenizer.loaders.gguf_reader import read_metadata

TOOLS = {"gguf-new-metadata": "gguf.scripts.gguf_new_metadata", "gguf-set-metadata": "gguf.scripts.gguf_set_metadata"}


def _gguf(command: str, *args: str) -> None:
    subprocess.run([sys.executable, "-m", TOOLS[command], *args, "--force"], check=True, capture_output=True)


def _check(*args: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--check", "--json", *args], capture_output=True,
                          text=True, timeout=600)
    return done.returncode, json.loads(done.stdout)


def _findings(path: Path, *flags: str) -> dict[str, dict]:
    _, report = _check(str(path), "--no-reply", *flags)
    return {f["id"]: f for f in report["models"][0]["findings"]}


def _retyped(source: Path, target: Path, token_id: int, token_type: int) -> None:
    """A copy with one token's type changed (no gguf-new-metadata option does this: its copier does)."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(str(source), "r")
    types = list(reader.get_field("tokenizer.ggml.token_type").contents())
    types[token_id] = token_type
    writer = gguf.GGUFWriter(str(target), arch=reader.get_field("general.architecture").contents(),
                             endianess=reader.endianess)
    copy_with_new_metadata(reader, writer, {"tokenizer.ggml.token_type": MetadataDetails(
        gguf.GGUFValueType.ARRAY, types, sub_type=gguf.GGUFValueType.INT32)}, [])


@pytest.fixture(scope="module")
def smol(tmp_path_factory) -> dict[str, Path]:
    """SmolLM2's GGUF, its own template as a file, and the folder the defective copies go in."""
    folder = tmp_path_factory.mktemp("doctor")
    source = model_path("smollm2")
    template = folder / "own.jinja"
    template.write_text(read_metadata(source, ("tokenizer.chat_template",))["tokenizer.chat_template"][1],
                        encoding="utf-8")
    return {"source": source, "folder": folder, "template": template}


def _defect(smol, name: str, *edits: tuple[str, ...]) -> Path:
    path, current = smol["folder"] / f"{name}.gguf", smol["source"]
    for n, (command, *args) in enumerate(edits):
        target = path.with_suffix(f".{n}.gguf")
        if command == "gguf-set-metadata":
            target.write_bytes(Path(current).read_bytes())
            _gguf(command, str(target), *args)
        else:
            _gguf(command, str(current), str(target), *args)
        current = target
    Path(current).rename(path)
    return path


def _apply(fix: str, broken: Path, smol) -> Path:
    """The finding's own fix command, with IN.gguf and OUT.gguf (and TEMPLATE.jinja: the model's own) filled in."""
    fixed = broken.with_name(broken.stem + "-fixed.gguf")
    words = [{"IN.gguf": str(broken), "OUT.gguf": str(fixed), "TEMPLATE.jinja": str(smol["template"])}.get(w, w)
             for w in shlex.split(fix)]
    _gguf(words[0], *words[1:])
    return fixed


BOS_TEMPLATE = "{{ bos_token }}"
#: defect -> (the edits that make it, the finding, its severity, the start of its fix)
DEFECTS = {
    "eos-not-eot": ([("gguf-new-metadata", "--special-token", "eos", "<|endoftext|>")], "stops.not-declared", "warning",
                    "gguf-new-metadata IN.gguf OUT.gguf --special-token eot '<|im_end|>'"),
    "bos-twice": ([("gguf-new-metadata", "--chat-template", BOS_TEMPLATE + "TEMPLATE"),
                   ("gguf-new-metadata", "--special-token", "bos", "<|endoftext|>"),
                   ("gguf-set-metadata", "tokenizer.ggml.add_bos_token", "1")], "bos.template-and-add-bos", "warning",
                  "gguf-new-metadata IN.gguf OUT.gguf --remove-metadata tokenizer.ggml.add_bos_token"),
    "pre-default": ([("gguf-new-metadata", "--pre-tokenizer", "default")], "pre.default", "warning",
                    "gguf-new-metadata IN.gguf OUT.gguf --pre-tokenizer smollm"),
    "no-template": ([("gguf-new-metadata", "--remove-metadata", "tokenizer.chat_template")], "template.missing",
                    "warning", "gguf-new-metadata IN.gguf OUT.gguf --chat-template-file TEMPLATE.jinja"),
    "broken-template": ([("gguf-new-metadata", "--chat-template", "{% if %}")], "template.broken", "error",
                        "gguf-new-metadata IN.gguf OUT.gguf --chat-template-file TEMPLATE.jinja"),
    "gemma2-template": ([("gguf-new-metadata", "--chat-template-file", "google-gemma-2-2b-it")],
                        "template.foreign-markers", "error",
                        "gguf-new-metadata IN.gguf OUT.gguf --chat-template-file TEMPLATE.jinja"),
}


@pytest.mark.parametrize("defect", DEFECTS)
def test_each_defect_is_found_with_its_severity_and_fix_and_the_fix_mends_it(smol, defect: str) -> None:
    edits, finding_id, severity, fix = DEFECTS[defect]
    own = smol["template"].read_text(encoding="utf-8")
    templates = fetch.models_dir() / "templates"
    edits = [tuple(own if a == "TEMPLATE" else BOS_TEMPLATE + own if a == BOS_TEMPLATE + "TEMPLATE" else
                   str(templates / f"{a}.jinja") if a == "google-gemma-2-2b-it" else a for a in edit) for edit in edits]
    broken = _defect(smol, defect, *edits)
    found = _findings(broken)
    assert finding_id in found, found
    assert found[finding_id]["severity"] == severity and found[finding_id]["fix"]["gguf"] == fix
    code, _ = _check(str(broken), "--no-reply")
    assert code == (1 if severity == "error" else 0)
    assert _check(str(broken), "--no-reply", "--strict")[0] == 1
    mended = _findings(_apply(fix, broken, smol))
    assert finding_id not in mended and not [f for f in mended.values() if f["severity"] == "error"], mended


def test_a_double_bos_in_the_prompt_is_an_error(smol) -> None:
    broken = _defect(smol, "bos-in-prompt", ("gguf-new-metadata", "--chat-template",
                                             BOS_TEMPLATE + smol["template"].read_text(encoding="utf-8")))
    found = _findings(broken)["bos.double"]  # SmolLM2's BOS is <|im_start|>, which the template writes next
    assert found["severity"] == "error" and [i for i, _ in found["evidence"]["prompt_starts"][:2]] == [1, 1]


def test_a_marker_typed_as_a_normal_token_is_named(smol) -> None:
    broken = smol["folder"] / "retyped.gguf"
    _retyped(smol["source"], broken, 1, 1)  # <|im_start|>: control -> normal
    found = _findings(broken)["tokens.marker-typed-normal"]
    assert found["severity"] == "warning" and found["evidence"]["token"] == [1, "<|im_start|>"]
    assert len(found["evidence"]["llama_cpp_ids"]) > 1  # llama.cpp spells it out
    mended = smol["folder"] / "retyped-back.gguf"
    _retyped(broken, mended, 1, 3)
    assert "tokens.marker-typed-normal" not in _findings(mended)


def test_the_tokenizer_check_names_the_first_mismatch_when_a_merge_is_missing() -> None:
    model = load_model(str(model_path("smollm2")))
    spec = model.tokenizer.spec
    broken = Tokenizer(dataclasses.replace(spec, model=dataclasses.replace(spec.model, merges=spec.model.merges[1:])))
    model = dataclasses.replace(model, tokenizer=broken, encoder=ChatEncoder(broken, model.detection.format))
    oracle = LlamaVocab(model.weights)
    try:
        (found,) = vocabulary.tokenizer_ids(Patient.of(model, oracle, []))
    finally:
        oracle.close()
    assert found.id == "tokenizer.differs" and found.severity == "error"
    assert found.evidence["ours"] != found.evidence["llama_cpp"] and found.evidence["text"]


def test_a_reply_that_does_not_stop_says_the_prompt_is_verified() -> None:
    model = load_model(str(model_path("smollm2")))
    oracle, engine = LlamaVocab(model.weights), LocalEngine(model.weights, n_ctx=512, n_threads=2)
    try:
        (found,) = reply.turn(Patient.of(model, oracle, []), engine, max_tokens=2)
    finally:
        engine.close()
        oracle.close()
    assert found.id == "reply.no-stop" and found.severity == "error"
    assert "the prompt is the template's own (22/22 probes identical)" in found.message


def test_the_real_models_give_no_error_and_several_models_make_one_report(tmp_path) -> None:
    junit = tmp_path / "check.xml"
    code, report = _check(str(model_path("smollm2")), str(model_path("gemma3")), "--junit", str(junit))
    assert code == 0 and report["schema"] == "rml-chat.check/1" and report["ok"]
    smol, gemma = report["models"]
    assert smol["counts"] == {"error": 0, "warning": 0, "note": 2} and smol["facts"]["reply"]["stop_reason"] == "stop"
    assert gemma["counts"]["error"] == 0 and {f["id"] for f in gemma["findings"]} >= {"template.missing"}
    assert smol["facts"]["tokenizer"]["id_exact"] == smol["facts"]["tokenizer"]["texts"] >= 30
    suites = ET.parse(junit).getroot()
    assert [s.get("name") for s in suites] == [smol["model"], gemma["model"]] and suites.get("failures") == "0"
    strict = _check(str(model_path("gemma3")), "--no-reply", "--strict")
    assert strict[0] == 1 and not strict[1]["ok"]  # a warning fails under --strict
    text = subprocess.run([sys.executable, "-m", "rml_chat", "--check", "--no-reply", str(model_path("smollm2")),
                           str(model_path("gemma3"))], capture_output=True, text=True, timeout=300).stdout
    assert "model" in text.splitlines()[-3] and text.splitlines()[-1].endswith("PASS")  # the table


def test_junit_marks_the_checks_that_did_not_run_as_skipped(tmp_path) -> None:
    junit = tmp_path / "check.xml"
    code, report = _check(str(model_path("smollm2")), str(tmp_path / "missing.gguf"), "--no-reply", "--junit", str(junit))
    assert code == 1
    smol, missing = report["models"]
    assert smol["skipped"] == {"reply": "no reply asked for (--no-reply)"}
    assert set(missing["skipped"]) == {"tokenizer", "stops", "bos", "pre", "tokens", "template", "prompt", "reasoning",
                                       "reply"}
    suites = ET.parse(junit).getroot()
    cases = {(case.get("classname"), case.get("name")): case for suite in suites for case in suite}
    assert cases[(smol["model"], "reply")].find("skipped").get("message") == "no reply asked for (--no-reply)"
    assert cases[(smol["model"], "tokenizer")].find("skipped") is None  # it ran, and passed
    assert cases[(missing["model"], "model")].find("failure") is not None
    assert cases[(missing["model"], "prompt")].find("skipped").get("message") == "the model did not load"
    assert suites.get("skipped") == "10" and suites.get("failures") == "1"


def test_every_llama_cpp_test_vocabulary_gives_no_error() -> None:
    vocabularies = sorted(str(p) for p in fetch.models_dir().glob("ggml-vocab-*.gguf"))
    code, report = _check(*vocabularies, "--no-reply")
    errors = {m["model"]: [f["id"] for f in m["findings"] if f["severity"] == "error"] for m in report["models"]}
    assert code == 0 and not any(errors.values()), errors
    assert len(report["models"]) == len(vocabularies) >= 15


def test_a_model_directory_has_its_tokenizer_json_checked_against_its_gguf(tmp_path) -> None:
    from conftest import hf_files

    source = json.loads((hf_files.out_dir() / "smollm2" / "tokenizer.json").read_text(encoding="utf-8"))
    template = read_metadata(model_path("smollm2"), ("tokenizer.chat_template",))["tokenizer.chat_template"][1]
    found = {}
    for name, merges in (("good", source["model"]["merges"]), ("bad", source["model"]["merges"][1:])):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "tokenizer.json").write_text(json.dumps({**source, "model": {**source["model"], "merges": merges}}),
                                               encoding="utf-8")
        (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "eos_token": "<|im_end|>"}))
        (folder / "weights.gguf").symlink_to(model_path("smollm2"))
        found[name] = _findings(folder)
    assert not [f for f in found["good"].values() if f["severity"] == "error"], found["good"]
    assert found["bad"]["tokenizer.json-vs-gguf"]["severity"] == "error"
    assert found["bad"]["tokenizer.differs"]["message"].startswith("our tokenizer (from tokenizer.json)")
