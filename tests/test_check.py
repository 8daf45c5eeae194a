"""rml-chat --check: passes on real models, fails with a clear report when the tokenizer disagrees."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from conftest import model_path

from rml_chat.core.model import load_model
from rml_chat.engines.local import LocalEngine
from rml_chat.frontends.check import check_model, format_report
from tokenizer import Tokenizer
from tokenizer.chat import ChatEncoder


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_check_passes_on_the_real_models(name: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--check", "--json", str(model_path(name))],
                          capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"], report
    assert report["sample_matched"] == report["sample_total"] >= 20 and report["prompt_matches"]
    assert report["reply_tokens"] > 0
    if name == "smollm2":
        assert report["reply_stop_reason"] == "stop" and not report["notes"]
    else:  # a base model without a chat template: format from the vocabulary, a missing stop is a note
        assert report["chat_format"] == "gemma" and report["format_source"] == "vocabulary"


def test_check_passes_on_gemma_with_the_raw_format_the_readme_recommends() -> None:
    """Raw adds the BOS the vocabulary asks for (as llama.cpp's chat does): the oracle's ids get it too."""
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--check", "--json", "--chat-format", "raw",
                           str(model_path("gemma3"))], capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"] and report["prompt_matches"], report
    assert report["chat_format"] == "raw" and any("not a failure" in note for note in report["notes"])


def test_check_fails_and_names_the_first_mismatch_when_a_merge_is_missing() -> None:
    model = load_model(str(model_path("smollm2")))
    spec = model.tokenizer.spec
    # drop the first merge ("Ġ t")
    broken = Tokenizer(dataclasses.replace(spec, model=dataclasses.replace(spec.model, merges=spec.model.merges[1:])))
    model = dataclasses.replace(model, tokenizer=broken, encoder=ChatEncoder(broken, model.detection.format))
    engine = LocalEngine(model.weights, n_ctx=512, n_threads=2)
    try:
        report = check_model(model, engine, max_tokens=8)
    finally:
        engine.close()
    assert not report.ok and report.sample_matched < report.sample_total
    assert report.first_mismatch is not None
    text = format_report(report)
    assert "FAIL: tokenizer:" in text and "first mismatch in" in text and "vs llama.cpp" in text
