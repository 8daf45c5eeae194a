"""Our chat formats against the real templates rendered with jinja2 the way transformers does.

Every template in llama.cpp's models/templates (and SmolLM2's own) is detected; the detections are pinned
in fixtures/chat_template_detections.json (regenerate with RML_CHAT_UPDATE_DETECTIONS=1). For each template
detected exactly, every conversation below must render byte for byte as the template renders it.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import ROOT, fetch, ours
from jinja2 import TemplateSyntaxError
from jinja_oracle import NOW, TemplateRaised, render

from tokenizer.chat import ChatFormatError, detect_chat_format, format_text

DETECTIONS = ROOT / "fixtures" / "chat_template_detections.json"
SYSTEM = {"role": "system", "content": "You are terse. ✓"}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


CONVERSATIONS = [
    [user("Hello!")],
    [SYSTEM, user("Hi there")],
    [user("What is 2+2?"), assistant("4"), user("And 3+3?")],
    [SYSTEM, user(" padded question \n"), assistant(" six. "), user("Danke schön — 日本語 👋🏽 مرحبا")],
    [SYSTEM, user("<|im_end|><|im_start|>system\n[INST]<s></s><start_of_turn><|eot_id|>"),
     assistant("<|end|> [/INST] {{ x }} {% if %}"), user("<｜User｜><<SYS>>\n<end_of_turn>")],
    [user("Why?"), assistant("<think>\nLet me see.\n</think>\n\nBecause."), user("Sure?")],
    [{"role": "system", "content": "Rules:\n1. be kind\n"}, user("a"), assistant("b"), user("c"), assistant("d"),
     user("e")],
]


def template_files() -> dict[str, str]:
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted((fetch.models_dir() / "templates").glob("*.jinja"))}
    files["SmolLM2-135M-Instruct.gguf"] = ours("smollm2").chat_template
    return files


def _oracle(template: str, conversation, generation: bool) -> str | None:
    """The template's text, or None when the template refuses the conversation."""
    try:
        return render(template, conversation, generation, bos_token="<BOS>", eos_token="<EOS>")
    except TemplateRaised:
        return None


def _ours(fmt, conversation, generation: bool) -> str | None:
    try:
        return format_text(fmt, conversation, generation, bos_token="<BOS>", eos_token="<EOS>", now=NOW)
    except ChatFormatError:
        return None


def test_detections_are_pinned_and_exact_ones_render_byte_identically() -> None:
    templates = template_files()
    detected = {name: detect_chat_format(text) for name, text in templates.items()}
    table = {name: {"format": d.format.name, "source": d.source} for name, d in detected.items()}
    if os.environ.get("RML_CHAT_UPDATE_DETECTIONS"):
        DETECTIONS.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert table == json.loads(DETECTIONS.read_text(encoding="utf-8"))
    exact = unrenderable = identical = 0
    failures = []
    for name, d in detected.items():
        if not d.exact:
            continue
        exact += 1
        try:
            cases = [(c, g, _oracle(templates[name], c, g)) for c in CONVERSATIONS for g in (True, False)]
        except TemplateSyntaxError:  # transformers-only extensions ({% generation %}): jinja2 can't judge it
            unrenderable += 1
            continue
        bad = [(c, g, want, _ours(d.format, c, g)) for c, g, want in cases if _ours(d.format, c, g) != want]
        if bad:
            failures.append((name, d.format.name, bad[0]))
        else:
            identical += 1
    print(f"\nchat templates: {len(templates)} seen, {exact} detected exactly, {unrenderable} not renderable by "
          f"jinja2, {identical} byte-identical on {len(CONVERSATIONS) * 2} renderings each", file=sys.stderr)
    assert not failures, failures[0]
    assert identical >= 20


@pytest.mark.parametrize("name", ["Qwen3-Coder.jinja", "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
                                  "Mistral-Small-3.2-24B-Instruct-2506.jinja"])
def test_templates_known_only_by_family_get_the_closest_format_and_a_warning(name: str) -> None:
    d = detect_chat_format(template_files()[name])
    assert not d.exact
    assert d.format.name in d.warning and "closest" in d.warning


def test_smollm2_template_is_smollm2_and_gemma3_without_template_is_found_by_vocabulary() -> None:
    assert detect_chat_format(ours("smollm2").chat_template).format.name == "smollm2"
    gemma = ours("gemma3")
    assert gemma.chat_template is None
    d = detect_chat_format(None, gemma.vocab)
    assert (d.format.name, d.source) == ("gemma", "vocabulary")
    assert "no chat template" in d.warning


def test_flag_name_wins_and_unknown_name_is_a_clear_error() -> None:
    assert detect_chat_format("llama2").format.name == "llama2"
    with pytest.raises(ChatFormatError, match="unknown chat format 'lama3'.*llama3"):
        detect_chat_format("lama3")


def test_no_template_and_no_chat_tokens_is_raw_with_a_warning() -> None:
    d = detect_chat_format(None, ["a", "b"])
    assert d.format.name == "raw" and "raw" in d.warning
