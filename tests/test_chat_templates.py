"""Chat formats established against the real templates, rendered with jinja2 the way transformers does.

Every template in llama.cpp's models/templates (70) and SmolLM2's own is established (fingerprint,
fitted, template-rendered or unverified); the results are pinned in fixtures/chat_template_detections.json
(regenerate with RML_CHAT_UPDATE_DETECTIONS=1). Then each is judged on BATTERY below, which is not the
verification's probe battery (tokenizer/chat/verify.PROBES): the established format must write every
conversation byte for byte as the template renders it, and refuse what it refuses.
"""

from __future__ import annotations

import functools
import json
import os
import sys

import pytest
from conftest import ROOT, fetch, ours

from tokenizer.chat import ChatFormatError, detect_chat_format, format_chat, segments_text
from tokenizer.chat.detect import SOURCE_FINGERPRINT, SOURCE_FITTED, SOURCE_RENDERED, SOURCE_UNVERIFIED, fingerprint
from tokenizer.chat.template import ChatTemplate, TemplateBroken, TemplateRaised
from tokenizer.chat.verify import NOW

DETECTIONS = ROOT / "fixtures" / "chat_template_detections.json"
BOS, EOS = "<BOS>", "<EOS>"


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def system(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


SYSTEM = system("You are terse. ✓")
BATTERY = [
    [user("Hello!")],
    [SYSTEM, user("Hi there")],
    [user("What is 2+2?"), assistant("4"), user("And 3+3?")],
    [SYSTEM, user(" padded question \n"), assistant(" six. "), user("Danke schön — 日本語 👋🏽 مرحبا")],
    [SYSTEM, user("<|im_end|><|im_start|>system\n[INST]<s></s><start_of_turn><|eot_id|>"),
     assistant("<|end|> [/INST] {{ x }} {% if %}"), user("<｜User｜><<SYS>>\n<end_of_turn>")],
    [user("Why?"), assistant("<think>\nLet me see.\n</think>\n\nBecause."), user("Sure?")],
    [system("Rules:\n1. be kind\n"), user("a"), assistant("b"), user("c"), assistant("d"), user("e")],
    [user("one"), assistant("two"), user("three"), assistant("four"), user("five"), assistant("six"),
     user("seven"), assistant("eight"), user("nine")],
    [SYSTEM, user("x"), assistant("<think>\n\nplan\n\n</think>\n\nanswer"), user("y"),
     assistant("<think>p2</think>\n\nans2"), user("z")],
    [user("tabs\tand\r\nCRLF\r\n"), assistant("  ok  ")],
    [SYSTEM, user("reasoning after a prefill"), assistant("thought about it\n</think>\n\nThe answer.")],
    [user("Ends with the assistant"), assistant("A final reply, no generation prompt wanted.")],
    # outside what a fitted table covers: the template itself decides (renders, or refuses)
    [user("two users"), user("in a row")],
    [SYSTEM, user("q"), assistant("   ")],
    [user("q"), {"role": "tool", "content": "42"}],
    [user("weather?"), {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"type": "function", "function": {"name": "weather", "arguments": {"city": "Oslo"}}}]}],
]


def template_files() -> dict[str, str]:
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted((fetch.models_dir() / "templates").glob("*.jinja"))}
    files["SmolLM2-135M-Instruct.gguf"] = ours("smollm2").chat_template
    return files


@functools.cache
def established() -> dict[str, object]:
    return {name: detect_chat_format(text, bos_token=BOS, eos_token=EOS) for name, text in template_files().items()}


def _outcome(call) -> tuple[str, str]:
    try:
        return "text", call()
    except (TemplateRaised, TemplateBroken) as err:
        return type(err).__name__, str(err)


def judge(template: str, fmt) -> tuple[int, int, str]:
    """(identical, total, the first difference) of ``fmt`` against the template on BATTERY."""
    tpl = ChatTemplate(template)
    identical = total = 0
    first = ""
    for conversation in BATTERY:
        for thinking in ((None, True, False) if tpl.reads_thinking else (None,)):
            for generation in (True, False):
                options = {"bos_token": BOS, "eos_token": EOS, "thinking": thinking, "now": NOW}
                total += 1
                want = _outcome(lambda: tpl.render(conversation, generation, **options))  # noqa: B023
                got = _outcome(lambda: segments_text(format_chat(fmt, conversation, generation, **options)))  # noqa: B023
                if got == want:
                    identical += 1
                elif not first:
                    first = f"{conversation} gp={generation} thinking={thinking}: ours {got} vs {want}"
    return identical, total, first


def test_every_template_is_established_as_pinned() -> None:
    table = {name: {"format": d.format.name, "source": d.source,
                    "probes": f"{d.verdict.identical}/{d.verdict.total}" if d.verdict else None}
             for name, d in established().items()}
    if os.environ.get("RML_CHAT_UPDATE_DETECTIONS"):
        DETECTIONS.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert table == json.loads(DETECTIONS.read_text(encoding="utf-8"))
    assert len(table) == 71
    for name, d in established().items():
        assert d.exact and d.verdict.ok and not d.warning, name
    # FireFunction v2 reads its tools as `functions` and the date as `datetime` (llama.cpp's handler hands
    # them): with them it renders, and its fit is verified
    assert table["fireworks-ai-llama-3-firefunction-v2.jinja"]["source"] == SOURCE_FITTED


def test_a_template_jinja2_cannot_render_gets_the_closest_family_marked_unverified() -> None:
    source = template_files()["meta-llama-Llama-3.2-3B-Instruct.jinja"].replace("{{- bos_token }}",
                                                                               "{{- bos_token + house_rules }}", 1)
    d = detect_chat_format(source, bos_token=BOS, eos_token=EOS)
    assert (d.source, d.format.name, d.exact) == (SOURCE_UNVERIFIED, "llama3", False)
    assert "unverified" in d.warning and "house_rules" in d.warning


def test_every_one_of_70_templates_writes_a_battery_the_verification_never_saw_byte_identically() -> None:
    templates = template_files()
    failures = {}
    for name, d in established().items():
        identical, total, first = judge(templates[name], d.format)
        if identical != total:
            failures[name] = first
    print(f"\nchat templates: {len(templates) - len(failures)}/{len(templates)} byte-identical on "
          f"{len(BATTERY)} conversations (generation prompt on and off, thinking unset/on/off)", file=sys.stderr)
    assert failures == {}


def test_most_templates_are_written_without_jinja_per_turn() -> None:
    sources = [d.source for d in established().values()]
    assert sources.count(SOURCE_FINGERPRINT) + sources.count(SOURCE_FITTED) >= 68
    assert sources.count(SOURCE_RENDERED) <= 2


# ----- a fingerprint is not proof: a changed detail is caught ------------------------------------------

_GRANITE_DEFAULT = "You are a helpful assistant. Please ensure responses are professional, accurate, and safe."
_ZEPHYR = ("{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + "
           "eos_token + '\n' }}{% elif message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + eos_token "
           "+ '\n' }}{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\n'  + message['content'] + eos_token + "
           "'\n' }}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}")
_LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
           "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
           "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
           "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
           "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
           "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
           "{% endfor %}")


@functools.cache
def _variants() -> dict[str, tuple[str, str]]:
    """name -> (the template with one detail changed, the fingerprint record it still matches)"""
    granite = template_files()["ibm-granite-granite-4.0.jinja"]
    smol = template_files()["SmolLM2-135M-Instruct.gguf"]
    return {
        "ChatML with a default system prompt of its own": (
            smol.replace("You are a helpful AI assistant named SmolLM, trained by Hugging Face", "Be a pirate."),
            "chatml"),
        "Granite with a changed default system prompt": (granite.replace(_GRANITE_DEFAULT, "Answer like Shakespeare."),
                                                         "granite"),
        "ChatML writing the system text bare": (
            smol.replace("{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}",
                         "{% if message['role'] == 'system' %}{{ message['content'] + '\n' }}{% else %}"
                         "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
                         "{% endif %}"), "smollm2"),
        "Zephyr without EOS after user turns": (
            _ZEPHYR.replace("{{ '<|user|>\n' + message['content'] + eos_token + '\n' }}",
                            "{{ '<|user|>\n' + message['content'] + '\n' }}"), "zephyr"),
        "Llama 2 without a BOS before every turn": (_LLAMA2.replace("{{ bos_token + '[INST] '", "{{ '[INST] '"),
                                                    "llama2"),
    }


#: the names of ``_variants`` (a literal: collecting the tests needs no template file)
VARIANTS = ["ChatML with a default system prompt of its own", "Granite with a changed default system prompt",
            "ChatML writing the system text bare", "Zephyr without EOS after user turns",
            "Llama 2 without a BOS before every turn"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_fingerprint_matched_template_with_a_changed_detail_is_caught(variant: str) -> None:
    assert sorted(_variants()) == sorted(VARIANTS)
    template, record = _variants()[variant]
    matched = fingerprint(template)
    assert matched is not None and matched.name == record  # the fingerprint alone would pick the record …
    d = detect_chat_format(template, bos_token=BOS, eos_token=EOS)
    assert d.source in (SOURCE_FITTED, SOURCE_RENDERED), (variant, d.source)  # … the template's verdict does not
    assert any(f"{record!r} matches its fingerprint but differs" in note for note in d.notes)
    identical, total, first = judge(template, d.format)
    assert identical == total, first


def test_the_unchanged_originals_are_fingerprint_exact() -> None:
    for template, name in ((template_files()["ibm-granite-granite-4.0.jinja"], "granite-4.0"), (_ZEPHYR, "zephyr"),
                           (_LLAMA2, "llama2"), (template_files()["SmolLM2-135M-Instruct.gguf"], "smollm2")):
        d = detect_chat_format(template, bos_token=BOS, eos_token=EOS)
        assert (d.source, d.format.name) == (SOURCE_FINGERPRINT, name) and d.exact


# ----- refusals, thinking, history, stops ------------------------------------------------------------------

def test_a_refusal_of_the_template_is_refused_with_its_message() -> None:
    d = established()["google-gemma-2-2b-it.jinja"]
    with pytest.raises(ChatFormatError, match="^System role not supported$"):
        format_chat(d.format, [SYSTEM, user("hi")], bos_token=BOS, eos_token=EOS)
    with pytest.raises(ChatFormatError, match="Conversation roles must alternate"):
        format_chat(d.format, [user("a"), user("b")], bos_token=BOS, eos_token=EOS)


@pytest.mark.offline
def test_a_template_that_rewrites_content_is_refused_naming_the_difference() -> None:
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    with pytest.raises(ChatFormatError, match=r"no prompt format reproduces.*probe 1 \(user; generation prompt\): "
                                              r".*at character 18, ours .*Hello there.* vs the template's .*HELLO THERE"):
        detect_chat_format(template, bos_token=BOS, eos_token=EOS)


def test_qwen3_thinking_switch_history_and_its_report() -> None:
    d = established()["Qwen-Qwen3-0.6B.jinja"]
    history = [user("q1"), assistant("<think>\nhmm\n</think>\n\nA1"), user("q2")]
    off = segments_text(format_chat(d.format, [user("q")], thinking=False, bos_token=BOS, eos_token=EOS))
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    text = segments_text(format_chat(d.format, history, bos_token=BOS, eos_token=EOS))
    assert "hmm" not in text and "<|im_start|>assistant\nA1<|im_end|>" in text
    final = segments_text(format_chat(d.format, [user("q"), assistant("A")], False, bos_token=BOS, eos_token=EOS))
    assert final.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n")  # the empty think block
    assert "rewrites earlier turns" in d.history  # reasoning of earlier turns is dropped
    assert established()["SmolLM2-135M-Instruct.gguf"].history == ""


def test_what_a_template_writes_after_an_answer_is_a_stop_text() -> None:
    harmony = established()["openai-gpt-oss-120b.jinja"].format
    assert {"<|end|>", "<|return|>"} == {text.split(">")[0] + ">" for text in harmony.after_assistant_texts()}
    granite = established()["ibm-granite-granite-4.1.jinja"].format
    assert "<|end_of_text|>" in granite.stops


def test_flag_wins_is_verified_and_unknown_names_are_clear_errors() -> None:
    smol = template_files()["SmolLM2-135M-Instruct.gguf"]
    d = detect_chat_format("chatml", template=smol, bos_token=BOS, eos_token=EOS)
    assert d.format.name == "chatml" and d.source == "flag" and not d.exact
    assert "--chat-format chatml differs from the model's own template" in d.warning and "probe 1 (user" in d.warning
    d = detect_chat_format("smollm2", template=smol, bos_token=BOS, eos_token=EOS)
    assert d.exact and not d.warning and d.verdict.ok
    assert detect_chat_format("llama2").format.name == "llama2"
    with pytest.raises(ChatFormatError, match="unknown chat format 'lama3'.*llama3"):
        detect_chat_format("lama3")


def test_no_template_uses_the_vocabulary_with_a_raw_hint_or_raw() -> None:
    gemma = ours("gemma3")
    assert gemma.chat_template is None
    d = detect_chat_format(None, gemma.vocab)
    assert (d.format.name, d.source) == ("gemma", "vocabulary") and not d.exact
    assert "no chat template" in d.warning and "--chat-format raw" in d.warning
    d = detect_chat_format(None, ["a", "b"])
    assert d.format.name == "raw" and "raw" in d.warning


@pytest.mark.whitebox
def test_a_cached_template_renders_nothing_and_a_damaged_entry_is_a_miss(tmp_path, monkeypatch) -> None:
    from tokenizer.chat import format_cache

    monkeypatch.setenv("RML_CHAT_FORMAT_CACHE", str(tmp_path))
    template = template_files()["Qwen-Qwen3-0.6B.jinja"] + "{# cache test #}"
    first = detect_chat_format(template, bos_token=BOS, eos_token=EOS)
    (entry,) = tmp_path.glob("*.json")
    format_cache._MEMORY.clear()

    def no_render(*args, **kwargs):
        raise AssertionError("rendered")

    monkeypatch.setattr(ChatTemplate, "render", no_render)
    again = detect_chat_format(template, bos_token=BOS, eos_token=EOS)  # from the file
    assert (again.source, again.verdict, again.format.pieces) == (first.source, first.verdict, first.format.pieces)
    monkeypatch.undo()
    monkeypatch.setenv("RML_CHAT_FORMAT_CACHE", str(tmp_path))
    format_cache._MEMORY.clear()
    entry.write_text('{"source": "fitted", "fitted": 12}')  # foreign and broken: established again
    assert detect_chat_format(template, bos_token=BOS, eos_token=EOS).format.pieces == first.format.pieces


def test_a_template_that_changes_its_own_list_renders_as_llama_cpp_renders_it_and_nothing_else_changes() -> None:
    """transformers' sandbox refuses ``ids.append``; llama.cpp's engine allows it (Kimi K2's templates:
    the byte-for-byte oracle is llama-server, test_tool_shapes.py). Only such a template leaves the
    immutable sandbox; it works on a copy of what it is handed, and Python's internals stay out of reach."""
    queue = ChatTemplate("{% set ns = namespace(ids=[]) %}{% for m in messages %}{% set _ = ns.ids.append(m.role) %}"
                         "{% endfor %}{{ ns.ids | join(',') }}|{% set _ = messages[0].update(role='x') %}"
                         "{{ messages[0].role }}")
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert queue.render(messages, False) == "user,assistant|x" and queue.mutates
    assert messages[0]["role"] == "user"  # the caller's messages untouched
    plain = ChatTemplate("{{ messages | map(attribute='role') | list | tojson }}{{ messages | map(attribute='role') | tojson }}")
    assert plain.render(messages, False) == '["user", "assistant"]["user", "assistant"]' and not plain.mutates
    with pytest.raises(TemplateBroken, match="unsafe"):
        ChatTemplate("{{ messages.__class__.__mro__ }}").render(messages, False)


@pytest.mark.parametrize(("template", "conversation", "thinking", "needle"), [
    ("HuggingFaceTB-SmolLM3-3B.jinja", [system("Be terse. /no_think"), user("q")], None, "/no_think"),  # (it took
    # the switch out and wrote "Reasoning Mode: /no_think": the table wrote the text as it is under /think)
    ("NVIDIA-Nemotron-Nano-v2.jinja", [system("/think Be terse."), user("q")], False, "/think"),
    ("inclusionai-ling-3.0-flash.jinja", [system("detailed thinking off"), user("q")], None, "detailed thinking off"),
    ("muse-glimmer.jinja", [system("Reasoning effort: high"), user("q")], None, "Reasoning effort"),
    ("GLM-4.6.jinja", [user("hello /nothink")], False, "/nothink"),
    ("GLM-4.6.jinja", [user("hello /nothink")], None, ""),  # (the template writes this one as the table does)
    ("Apertus-8B-Instruct.jinja", [user("the content of tool_calls")], None, ""),  # (a key it looks for, not text)
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", [user("q"), assistant("Use <think> tags."), user("n")], None, ""),
    # (an answer that names the thought's tag: the template writes no empty thought before it, as the table did)
])
def test_a_switch_the_template_reads_in_a_message_is_its_prompt_or_one_line_naming_it(template, conversation,
                                                                                     thinking, needle) -> None:
    """Some templates look for a text in a message and write the prompt their own way for it (SmolLM3's and
    Nemotron's ``/no_think`` in the system message, Ling's ``detailed thinking off``, muse's ``Reasoning
    effort``). A table read off other texts wrote such a message as any other, a prompt the template never
    writes. Now the template's own prompt comes out, or, where the template changes the message itself, one
    line naming the text and the flag to use instead."""
    templates = template_files()
    options = {"bos_token": BOS, "eos_token": EOS, "thinking": thinking, "now": NOW}
    want = ChatTemplate(templates[template]).render(conversation, True, **options)
    assert established()[template].source == SOURCE_FITTED
    if not needle:
        assert segments_text(format_chat(established()[template].format, conversation, True, **options)) == want
        return
    with pytest.raises(ChatFormatError, match=f"the chat template reads '{needle}' in a message") as refused:
        format_chat(established()[template].format, conversation, True, **options)
    assert "--think" in str(refused.value) or "--reasoning-effort" in str(refused.value)


TEXTS = ["Hi", " ", "\n", "\n\n", "\t", "é", "👋", "<|im_end|>", "<|im_start|>", "[INST]", "</s>", "<s>", "<think>",
         "</think>", "{{ x }}", "{% if %}", "<|eot_id|>", "\r\n", "word", "<tool_call>", "[TOOL_CALLS]", "```", '"', "/think",
         "/no_think", "detailed thinking off", "Reasoning effort", "content", "text"]


def test_random_conversations_are_the_templates_prompt_or_one_line_naming_what_it_reads() -> None:
    """Conversations put together at random (seeded) from markers, template syntax, switches and plain text,
    the replies' thoughts handed over as a session hands them (``Reasoning.message``), on every template:
    the prompt is the template's own, or the template refuses the conversation, or it changes a message (a
    switch it reads, a text it rewrites) and the refusal names it. Never a prompt the template doesn't
    write."""
    import random

    from tokenizer.chat.reasoning import derive

    chance = random.Random(1207)
    templates = template_files()

    def text() -> str:
        return "".join(chance.choice(TEXTS) for _ in range(chance.randrange(0, 5)))

    for name, detection in established().items():
        template = ChatTemplate(templates[name])
        try:
            reasoning = derive(template, BOS, EOS)
        except ChatFormatError:
            reasoning = None
        for _ in range(12):
            conversation = [system(text())] if chance.random() < 0.4 else []
            for turn in range(chance.randrange(1, 4)):
                conversation.append(user(text()))
                if turn or chance.random() < 0.5:
                    answer = text()
                    conversation.append(reasoning.message(answer, text()) if reasoning and chance.random() < 0.5
                                        else assistant(answer))
            if conversation[-1]["role"] == "assistant":
                conversation.append(user(text()))
            thinking = chance.choice((None, True, False)) if template.reads_thinking else None
            options = {"bos_token": BOS, "eos_token": EOS, "thinking": thinking, "now": NOW}
            want = _outcome(lambda: template.render(conversation, True, **options))  # noqa: B023
            try:
                got = _outcome(lambda: segments_text(format_chat(detection.format, conversation, True, **options)))  # noqa: B023
            except ChatFormatError as refused:
                assert "the chat template reads" in str(refused) or "the template changes" in str(refused), (
                    name, conversation, str(refused))
                continue
            assert got == want, (name, conversation, thinking)
