"""Hostile chat templates: one that never ends and one that builds tens of gigabytes. Each render is
stopped within its budget (tokenizer/chat/budget.py), on the main thread and on others; the model still
loads and chats on the closest format, with one line, and ``--check`` names the finding."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from conftest import model_path

from tokenizer.chat.budget import RENDER_SECONDS
from tokenizer.chat.template import ChatTemplate, TemplateOverBudget

TURNS = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
HOSTILE = {
    "a loop of 10^10 steps that calls nothing":
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + TURNS,
    "a 40 GB string": "{{ 'x' * 40000000000 }}" + TURNS,
    "a string doubled in a loop": "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}"
                                  "{% endfor %}" + TURNS,
    "allowed pieces, 10 GB in all, kept in a block":
        "{% set s %}{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{% endset %}" + TURNS,
    "10 GB of output": "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}" + TURNS,
    "a huge power": "{{ 10 ** 1000000000 }}" + TURNS,
}
MESSAGES = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_render_is_stopped_within_its_budget_and_stays_stopped(name: str) -> None:
    started = time.perf_counter()
    template = ChatTemplate(HOSTILE[name])
    with pytest.raises(TemplateOverBudget, match="the chat template's render was stopped: it"):
        template.render(MESSAGES, True)
    assert time.perf_counter() - started < RENDER_SECONDS + 3
    again = time.perf_counter()
    with pytest.raises(TemplateOverBudget):  # at once, the next time
        template.render(MESSAGES, True)
    assert time.perf_counter() - again < 0.1


def test_the_budget_holds_on_another_thread_where_there_is_no_timer() -> None:
    outcome: list[BaseException] = []

    def render() -> None:
        try:
            ChatTemplate("{% for i in range(100000) %}{% for j in range(100000) %}{{ loop.index }}{% endfor %}"
                         "{% endfor %}").render(MESSAGES, True)
        except TemplateOverBudget as err:
            outcome.append(err)

    worker = threading.Thread(target=render)
    worker.start()
    worker.join(RENDER_SECONDS + 10)
    assert not worker.is_alive() and "did not finish within" in str(outcome[0])


def test_a_real_template_renders_as_before_under_the_budget() -> None:
    source = "{% set ns = namespace(out='') %}{% for m in messages %}{% set ns.out = ns.out + m.content * 2 %}" \
             "{% endfor %}{{ ns.out }}|{{ 2 ** 10 }}|{{ [1] * 3 }}"
    assert ChatTemplate(source).render([{"role": "user", "content": "ab"}] * 3, True) == "abababababab|1024|[1, 1, 1]"


@pytest.fixture(scope="module")
def hostile_models(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("hostile")
    made = {}
    for key, name in (("loop", "a loop of 10^10 steps that calls nothing"), ("big", "a 40 GB string")):
        target = folder / f"{key}.gguf"
        subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(target),
                        "--chat-template", HOSTILE[name], "--force"], check=True, capture_output=True)
        made[key] = str(target)
    return made


@pytest.mark.parametrize("key", ["loop", "big"])
def test_a_model_with_a_hostile_template_chats_on_the_closest_format_and_check_names_it(hostile_models,
                                                                                         key: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", hostile_models[key], "-p", "Hi", "-n", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert "note: the chat template can't be rendered here (the chat template's render was stopped: it " \
           in done.stderr and "using the closest format 'chatml', unverified" in done.stderr
    check = subprocess.run([sys.executable, "-m", "rml_chat", "--check", "--no-reply", "--json", hostile_models[key]],
                           capture_output=True, text=True, timeout=120)
    report = json.loads(check.stdout)["models"][0]
    assert check.returncode == 1 and "template.over-budget" in {f["id"] for f in report["findings"]}
