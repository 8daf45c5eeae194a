"""rml-chat --check on the real models: no error finding, the facts it measured, and the raw format on a
base model (the defects themselves: test_doctor.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import model_path


def _report(*args: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--check", "--json", *args], capture_output=True,
                          text=True, timeout=300)
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_check_passes_on_the_real_models(name: str) -> None:
    code, report = _report(str(model_path(name)))
    (model,) = report["models"]
    assert code == 0 and report["ok"] and model["counts"]["error"] == 0, model
    facts = model["facts"]
    assert facts["tokenizer"]["id_exact"] == facts["tokenizer"]["texts"] >= 30 and facts["reply"]["tokens"] > 0
    if name == "smollm2":
        assert facts["reply"]["stop_reason"] == "stop" and facts["prompt"]["verified"]
        assert facts["chat_format"]["probes"] == "22/22"
    else:  # a base model without a chat template: format from the vocabulary, a missing stop is a note
        assert facts["chat_format"]["name"] == "gemma" and facts["chat_format"]["established_by"] == "vocabulary"
        assert {f["id"]: f["severity"] for f in model["findings"]}["template.missing"] == "warning"


def test_check_passes_on_gemma_with_the_raw_format_the_readme_recommends() -> None:
    """Raw adds the BOS the vocabulary asks for (as llama.cpp's chat does)."""
    code, report = _report("--chat-format", "raw", str(model_path("gemma3")))
    (model,) = report["models"]
    assert code == 0 and model["facts"]["chat_format"]["name"] == "raw", model
    assert {f["id"]: f["severity"] for f in model["findings"]}["reply.no-stop"] == "note"
