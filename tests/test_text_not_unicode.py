"""Text that is not Unicode, or that the locale can't write, on every path where it turned into a
traceback: a lone surrogate a JSON file escapes (``"\\ud800"``: a saved chat, a schema, a ``--batch``
line), a file name that is not UTF-8 (a model store's folder), and a locale whose encoding is not UTF-8.
Each is read under the text policy (U+FFFD, one warning), shown visibly on a terminal, written exactly
elsewhere, and never ends a run with "internal error"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import model_path
from test_cli_robustness import one_line_error, run

from rml_chat.terminal import json_text, visible
from rml_chat.text_input import from_json

LONE = "\\ud800"  # (as JSON writes it: six characters, a lone surrogate once read)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


@pytest.mark.offline
def test_a_lone_surrogate_is_shown_visibly_and_escaped_in_json() -> None:
    assert visible("a\ud800 b\udcff") == "a<U+D800> b<FF>"  # (a file name's byte as less shows one)
    assert json.loads(json_text({"k": "a\ud800"})) == {"k": "a\ud800"}
    assert "\ud800" not in json_text("a\ud800")  # (escaped: the line is valid UTF-8)


@pytest.mark.offline
def test_json_under_the_policy_replaces_lone_surrogates_and_keeps_pairs_warning_once() -> None:
    said: list[str] = []
    value = from_json('{"a\\udcff": ["\\ud83d\\ude00", "x\\ud800"]}', "test.json", said.append)
    assert value == {"a\ufffd": ["\U0001f600", "x\ufffd"]}
    assert from_json('["\\ud801"]', "test.json", said.append) == ["\ufffd"]
    assert said == ["test.json holds text that is not valid Unicode (a lone surrogate); invalid bytes were replaced "
                    "with U+FFFD"]
    assert from_json('["\\\\ud800"]', "other.json", said.append) == ["\\ud800"]  # (an escaped backslash: text)
    assert len(said) == 1


def test_a_chat_file_with_lone_surrogates_resumes_with_one_warning_and_saves_valid_utf8(tmp_path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text('{"messages": [{"role": "user", "content": "hi ' + LONE + '"}, '
                    '{"role": "assistant", "content": "ok ' + LONE + '"}]}')
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "--resume", str(chat), "-p",
                           "and?", "-n", "3", "--temp", "0"], capture_output=True, timeout=300,
                          env=_env(RML_CHAT_SESSIONS=str(tmp_path / "sessions")))
    err = done.stderr.decode()
    assert done.returncode == 0 and "internal error" not in err, err
    assert err.count("holds text that is not valid Unicode (a lone surrogate)") == 1
    (saved,) = (tmp_path / "sessions").glob("*.json")  # (the turn, saved as a chat of its own)
    messages = json.loads(saved.read_bytes().decode("utf-8"))["messages"]  # (strict: the file is UTF-8)
    assert [m["content"] for m in messages][:2] == ["hi \ufffd", "ok \ufffd"]


def test_a_schema_with_a_lone_surrogate_or_nested_too_deeply_is_a_warning_or_one_line(tmp_path) -> None:
    done = run(str(model_path("smollm2")), "-p", "hi", "-n", "20", "--temp", "0", "--json-schema",
               '{"enum": ["' + LONE + '"]}')
    assert done.returncode == 0 and b"(a lone surrogate)" in done.stderr, done.stderr
    assert done.stdout.decode("utf-8").strip() == '"\ufffd"'  # (the one value the schema allows)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert one_line_error(run("-p", "hi", "--json-schema", f"@{deep}"), 2).endswith(
        "--json-schema: not read: its JSON is nested too deeply (rml-chat --help lists the flags)")
    nested = tmp_path / "nested.json"  # (read, converted, but too deep for the validator to check a reply)
    nested.write_text('{"type": "array", "items": ' * 800 + '{"type": "string"}' + "}" * 800)
    done = run(str(model_path("smollm2")), "-p", "hi", "-n", "4", "--temp", "0", "--json-schema", f"@{nested}")
    assert done.returncode == 0 and b"internal error" not in done.stderr, done.stderr


def test_a_batch_line_with_a_lone_surrogate_is_answered_with_one_warning(tmp_path) -> None:
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"prompt": "say ' + LONE + ' hi"}\n{"prompt": "and ' + LONE + '"}\n')
    done = run(str(model_path("smollm2")), "--batch", str(lines), "-n", "3", "--temp", "0")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["ok"] for line in done.stdout.splitlines()] == [True, True]
    assert done.stderr.decode().count("(a lone surrogate)") == 1


def _store_with_a_name_that_is_not_utf8(tmp_path) -> str:
    """A Hugging Face cache whose one repository's folder name holds the byte 0xff and an escape."""
    name = os.fsdecode(b"models--bad\xff--x\x1b[31m")
    snapshot = tmp_path / "hub" / name / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    shutil.copyfile(model_path("smollm2"), snapshot / "m-Q4_1.gguf")
    return str(tmp_path / "hub")


def test_models_named_with_bytes_that_are_not_utf8_list_exactly_in_a_pipe_and_visibly_on_a_terminal(tmp_path) -> None:
    """Under a UTF-8 locale Python writes strictly (``PYTHONIOENCODING=utf-8:strict`` stands for one here,
    where the locale is C): the name's byte used to end ``--models`` with "internal error"."""
    from test_repl import Terminal

    hub = _store_with_a_name_that_is_not_utf8(tmp_path)
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--models"], capture_output=True, timeout=120,
                          env=_env(HF_HUB_CACHE=hub, PYTHONIOENCODING="utf-8:strict"))
    assert done.returncode == 0, done.stderr
    assert b"bad\xff/x\x1b[31m:Q4_1" in done.stdout  # (a pipe gets the name's own bytes)
    term = Terminal(tmp_path, "--models", model=False, env=_env(HF_HUB_CACHE=hub, PYTHONIOENCODING="utf-8:strict"))
    assert term.exit_code() == 0  # (it ends by itself: a Ctrl-D sent then could find the terminal closed)
    assert b"bad<FF>/x^[[31m:Q4_1" in term.output and b"\xff" not in term.output and b"\x1b[31m" not in term.output


def test_a_locale_that_is_not_utf8_still_gets_the_reply_in_utf8() -> None:
    """As llama.cpp writes a model's bytes: a prompt shown under ``LANG=…ISO-8859-1`` used to fail on 界."""
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-p", "界 and ☃",
                           "--show-prompt"], capture_output=True, timeout=120, env=_env(PYTHONIOENCODING="latin-1"))
    assert done.returncode == 0, done.stderr
    assert "界 and ☃" in done.stdout.decode("utf-8")


def test_a_model_file_named_in_latin_1_opens_and_text_flags_alone_go_under_the_policy(tmp_path) -> None:
    """A file name's bytes are the file's name, whatever they decode to: ``caf\\xe9.gguf`` (from a Latin-1
    system) was made ``caf\\ufffd.gguf`` by the text policy, a file that is not there, and then passed to
    llama.cpp as UTF-8, which a lone surrogate can't be. ``-p``'s text still gets the policy's warning."""
    model = os.fsencode(tmp_path) + b"/caf\xe9.gguf"
    os.symlink(model_path("smollm2"), model)
    done = subprocess.run([os.fsencode(sys.executable), b"-m", b"rml_chat", model, b"-p", b"Hi \xff", b"-n", b"2",
                           b"--temp", b"0"], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[0] == ("rml-chat: warning: a command-line argument is not valid UTF-8 "
                                                    "(byte 0xff at offset 3); invalid bytes were replaced with U+FFFD")
    assert done.stdout.strip()


def test_a_junit_report_of_a_model_named_with_an_escape_and_a_byte_is_xml_that_parses(tmp_path) -> None:
    """XML 1.0 can hold no ESC and no lone surrogate, not even as a reference: the report a CI reads was
    not XML at all ("not well-formed")."""
    import xml.etree.ElementTree as ET

    model = os.fsencode(tmp_path) + b"/bad\x1b[31m\xff.gguf"
    os.symlink(model_path("smollm2"), model)
    done = subprocess.run([os.fsencode(sys.executable), b"-m", b"rml_chat", b"--check", model, b"--no-reply",
                           b"--junit", os.fsencode(tmp_path / "report.xml")], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    suite = ET.parse(tmp_path / "report.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "bad\\x1b[31m\\udcff"  # (the model is named without .gguf)
