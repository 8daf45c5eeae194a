"""Reasoning controls beyond the split: ``--reasoning-effort`` (the template's ``reasoning_effort``, written
by the template itself), gpt-oss's other channels shown as such, the thought as one line in the REPL
(``--thinking-display line``, ``/thought``), and ``think``/``reasoning_effort`` as batch-line keys. Real
turns run SmolLM2's weights under other templates (copies of its GGUF, written by the ``gguf`` package)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest
from conftest import fetch, model_path
from test_reasoning import EXPECTED, OSS_THOUGHT, QWEN3_THOUGHT

from rml_chat.core.channels import CallForm, ChannelCall, Channels, ChannelSplitter
from rml_chat.frontends.thought_view import ThoughtView
from tokenizer.chat.reasoning import derive, effort_changes_prompt
from tokenizer.chat.template import ChatTemplate, TemplateRaised

HARMONY = ("<|channel|>analysis<|message|>Think hard.<|end|><|start|>assistant<|channel|>commentary<|message|>"
           "I'll look it up.<|end|><|start|>assistant<|channel|>analysis<|message|>More.<|end|><|start|>assistant"
           "<|channel|>final<|message|>The answer.")


def _template(name: str) -> ChatTemplate:
    return ChatTemplate((fetch.models_dir() / "templates" / f"{name}.jinja").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("effort")
    made = {}
    for family, name in (("gpt-oss", EXPECTED["gpt-oss"][0]), ("qwen3", EXPECTED["qwen3"][0]), ("hy3", "tencent-Hy3")):
        target = folder / f"{family}.gguf"
        subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(target),
                        "--chat-template-file", str(fetch.models_dir() / "templates" / f"{name}.jinja"), "--force"],
                       check=True, capture_output=True)
        made[family] = str(target)
    bare = folder / "no-template.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model_path("smollm2")), str(bare),
                    "--remove-metadata", "tokenizer.chat_template", "--force"], check=True, capture_output=True)
    made["none"] = str(bare)
    return made


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rml_chat", *args], capture_output=True, text=True, timeout=300,
                          input=stdin)


# ----- reasoning effort ---------------------------------------------------------------------------------

def test_every_template_that_reads_an_effort_is_found_and_a_refused_value_is_the_templates_words() -> None:
    folder = fetch.models_dir() / "templates"
    reading = sorted(p.stem for p in folder.glob("*.jinja") if ChatTemplate(p.read_text(encoding="utf-8")).reads_effort)
    assert {"openai-gpt-oss-120b", "tencent-Hy3", "upstage-Solar-Open-100B"} <= set(reading)
    oss = _template("openai-gpt-oss-120b")
    assert effort_changes_prompt(oss, "high") and effort_changes_prompt(oss, "low")
    assert not effort_changes_prompt(oss, "medium")  # its default
    with pytest.raises(TemplateRaised, match="should be no_think/low/high"):
        effort_changes_prompt(_template("tencent-Hy3"), "medium")


def test_the_effort_reaches_the_prompt_as_the_template_writes_it(copies) -> None:
    from rml_chat.core.model import load_model

    shown = json.loads(_cli(copies["gpt-oss"], "--show-prompt", "--json", "-p", "Hi", "--reasoning-effort", "high").stdout)
    model = load_model(copies["gpt-oss"])
    want = ChatTemplate(model.tokenizer.chat_template).render(
        [{"role": "user", "content": "Hi"}], True, bos_token=model.encoder.bos_text, eos_token=model.encoder.eos_text,
        effort="high")
    assert "Reasoning: high" in want and shown["prompt"] == want  # (the date: today's in both)
    assert shown["ids"] == model.tokenizer.encode(shown["prompt"], parse_special=True)


def test_an_effort_the_template_does_not_read_is_a_note_and_one_it_refuses_a_usage_error(copies) -> None:
    ignored = _cli(copies["qwen3"], "-p", "Hi", "-n", "2", "--temp", "0", "--reasoning-effort", "high")
    assert ignored.returncode == 0 and "--reasoning-effort high does not apply: the model's chat template reads no " \
                                      "reasoning effort" in ignored.stderr
    refused = _cli(copies["hy3"], "-p", "Hi", "-n", "2", "--reasoning-effort", "medium")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--reasoning-effort medium: the template refuses 'medium'" in refused.stderr
    assert "should be no_think/low/high" in refused.stderr
    bad = _cli(copies["gpt-oss"], "-p", "Hi", "--reasoning-effort", "Very High!")
    assert bad.returncode == 2 and "--reasoning-effort: must be a lower-case word" in bad.stderr
    unknown = _cli(copies["gpt-oss"], "-p", "Hi", "-n", "1", "--reasoning-effort", "extreme")  # (not written in)
    assert unknown.returncode == 2 and "the chat template takes levels (medium named in it; minimal, low, medium, " \
                                       "high are the levels such templates take), not 'extreme'" in unknown.stderr


def test_tool_choice_required_without_tools_is_a_usage_error() -> None:
    from conftest import model_path

    done = _cli(str(model_path("smollm2")), "-p", "Hi", "-n", "1", "--tool-choice", "required")
    assert done.returncode == 2 and "--tool-choice required: no tools to call" in done.stderr and not done.stdout


def test_think_and_reasoning_effort_are_batch_line_keys(copies) -> None:
    lines = [{"id": "h", "prompt": "Hi", "max_tokens": 1, "temp": 0, "reasoning_effort": "high"},
             {"id": "d", "prompt": "Hi", "max_tokens": 1, "temp": 0},
             {"id": "x", "prompt": "Hi", "max_tokens": 1, "reasoning_effort": 3}]
    done = _cli(copies["gpt-oss"], "--batch", "-", stdin="\n".join(map(json.dumps, lines)) + "\n")
    high, default, bad = (json.loads(line) for line in done.stdout.splitlines())
    assert high["ok"] and default["ok"]
    assert not bad["ok"] and "reasoning_effort must be a lower-case word" in bad["error"]["message"]
    think = [{"prompt": "Hi", "max_tokens": 1, "temp": 0, "think": "off"}, {"prompt": "Hi", "max_tokens": 1, "temp": 0}]
    ran = [json.loads(line) for line in _cli(copies["qwen3"], "--batch", "-", stdin="\n".join(
        map(json.dumps, think)) + "\n").stdout.splitlines()]
    assert ran[0]["ok"] and ran[1]["ok"] and ran[0]["prompt_tokens"] > ran[1]["prompt_tokens"]  # off: an empty thought
    refused = _cli(copies["gpt-oss"], "--batch", "-", stdin=json.dumps({"prompt": "Hi", "think": "off"}) + "\n")
    assert "think does not apply" in json.loads(refused.stdout)["error"]["message"]


# ----- gpt-oss's other channels -------------------------------------------------------------------------

@pytest.mark.parametrize("step", [1, 2, 5, 13, len(HARMONY)])
def test_a_commentary_to_no_one_is_the_answer_and_each_analysis_the_thought(step: int) -> None:
    """As llama.cpp reads harmony: a message on the thought's channel is the thought, any other addressed to
    no one (a ``commentary`` preamble, the ``final``) the answer; each decided by its header as it streams."""
    marks = derive(_template("openai-gpt-oss-120b")).channels()
    assert marks == ("<|end|><|start|>assistant", "<|channel|>", "<|message|>", "analysis", "final")
    splitter = ChannelSplitter(Channels(*marks))
    answer, thought = "", ""
    for at in range(0, len(HARMONY), step):
        answer += splitter.feed(HARMONY[at:at + step])
        thought += splitter.take_thought()
    answer += splitter.finish()
    thought += splitter.take_thought()
    assert answer == "I'll look it up.\n\nThe answer." and thought == "Think hard.\n\nMore."
    assert splitter.thought_raw == "Think hard.\n\nMore."  # the thought's messages, for the history


@pytest.mark.parametrize("step", [1, 3, 7, 200])
def test_a_call_after_the_analysis_ends_the_thought_and_is_the_answer(step: int) -> None:
    """gpt-oss writes a call as a message addressed to the tool before its channel: the thought is over,
    and the message, header and all, is the answer, where the call is parsed."""
    r = derive(_template("openai-gpt-oss-120b"))
    form = CallForm("to=", "functions.", " to=functions.", "<|channel|>commentary json<|message|>")
    splitter = ChannelSplitter(Channels(*r.channels()), call_form=form)
    call = ' to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city": "Paris"}'
    reply = f"{r.open}Paris, then.<|end|><|start|>assistant{call}"
    answer = "".join(splitter.feed(reply[at:at + step]) for at in range(0, len(reply), step)) + splitter.finish()
    assert answer == ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}'  # (the syntax's)
    assert splitter.take_thought() == "Paris, then."
    assert splitter.calls == [ChannelCall("get_weather", '{"city": "Paris"}')]


def test_templates_without_channels_have_none() -> None:
    assert derive(_template(EXPECTED["qwen3"][0])).channels() is None
    assert derive(_template(EXPECTED["cohere2"][0])).channels() is None  # its answer opens with no channel name


def test_gpt_oss_commentary_between_analysis_and_final_on_real_weights(copies) -> None:
    grammar = OSS_THOUGHT.replace('"<|end|><|start|>assistant<|channel|>final', '"<|end|><|start|>assistant<|channel|>'
                                  'commentary<|message|>" [a-z ]{4,20} "<|end|><|start|>assistant<|channel|>final')
    done = json.loads(_cli(copies["gpt-oss"], "-p", "Say hi", "--temp", "0", "--grammar", grammar, "--json").stdout)
    preamble, final = done["reply"].split("\n\n", 1)  # (the commentary, to no one, is the answer's: llama.cpp's reading)
    assert re.fullmatch("[a-z ]{1,20}", preamble) and final[:1].isupper() and done["reasoning"]
    assert "<|" not in done["reply"] + done["reasoning"]


# ----- the thought on one line -------------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_view_rewrites_one_line_and_ends_with_a_summary() -> None:
    out = _Tty()
    view = ThoughtView("line", hidden=False, out=out)
    for word in ("The user ", "wants\n", "a colour."):
        view.thought(word)
    view.answer()
    shown = out.getvalue()
    assert shown.count("\r\x1b[K") == 4 and "\n" not in shown.rsplit("\r\x1b[K", 1)[0]  # one line, rewritten
    assert "thinking: The user wants a colour." in shown
    assert re.search(r"thought: 5 words, \d+\.\d s \(/thought\)\x1b\[0m\n\n$", shown)
    full = _Tty()
    ThoughtView("full", hidden=False, out=full).thought("hm")
    assert full.getvalue() == "\x1b[2mhm\x1b[0m"
    hidden = _Tty()
    ThoughtView("line", hidden=True, out=hidden).thought("hm")
    assert hidden.getvalue() == ""


@pytest.mark.parametrize("columns", [80, 24, 8])
def test_the_line_never_wraps_whatever_the_thought_holds(monkeypatch, columns) -> None:
    """The line is rewritten in place (``\\r``, cleared), so a line that wrapped would leave its first row on
    screen at every rewrite: wide characters (a thought in Chinese) take two cells each, a control character
    is shown as two (``^[``), and the terminal may be narrower than the label."""
    from rml_chat.terminal import cells

    monkeypatch.setenv("COLUMNS", str(columns))
    out = _Tty()
    view = ThoughtView("line", hidden=False, out=out)
    thought = ["用户想要一种颜色。", "我应该回答蓝色", "\x1b]0;x\x07", "\n\n  ", "👋" * 50] + ["and a long thought, "] * 3000
    for chunk in thought:
        view.thought(chunk)
    view.answer()
    rows = [re.sub(r"\x1b\[[0-9;]*m", "", row) for row in out.getvalue().split("\r\x1b[K")[1:]]
    assert len(rows) == len(thought) + 1
    assert all(cells(row.rstrip("\n")) <= columns - 1 for row in rows), max(rows, key=cells)
    if columns == 80:
        assert rows[1] == "thinking: 用户想要一种颜色。我应该回答蓝色"
        assert rows[2].endswith("我应该回答蓝色^[]0;x^G")
        assert rows[-2].endswith("a long thought, and a long thought,")  # (the end, its spaces run together)
        assert re.fullmatch(r"thought: 12001 words, \d+\.\d s \(/thought\)\n\n", rows[-1])
    if columns == 8:
        assert rows[-2] == "thinkin" and rows[-1] == "thought\n\n"


def test_the_repl_collapses_the_thought_to_a_line_and_shows_it_whole_on_demand(copies, tmp_path) -> None:
    from test_repl import Terminal

    term = Terminal(tmp_path, copies["qwen3"], "--temp", "0", "--grammar", QWEN3_THOUGHT, "--thinking-display", "line",
                    model=False)
    term.prompt_ready()
    term.ask(b"Say hi", b"thinking)")
    term.ask(b"/thought", b"\n")
    assert term.finish() == 0
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.output.decode("utf-8", "replace"))
    (chat,) = (tmp_path / "sessions").glob("*.json")
    reply = json.loads(chat.read_text())["messages"][1]
    thought, answer = reply["reasoning"].strip(), reply["content"].strip()
    assert re.search(r"thought: \d+ words, \d+\.\d s \(/thought\)\r\n\r\n" + re.escape(answer), plain)
    assert thought in plain[:plain.index("thought: ")]  # on the thinking line
    assert thought in plain[plain.rindex("/thought") + len("/thought"):]  # and whole from /thought


def test_a_model_without_a_template_splits_by_the_records_markers_under_chat_format(copies) -> None:
    done = json.loads(_cli(copies["none"], "--chat-format", "qwen3", "-p", "Say hi", "--temp", "0", "--grammar",
                           QWEN3_THOUGHT, "--json").stdout)
    assert done["ok"] and done["reasoning"] and done["reply"] and "<think>" not in done["reply"] + done["reasoning"]
