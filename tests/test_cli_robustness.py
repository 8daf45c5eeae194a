"""The real CLI against bad input on every path: one line, the documented exit code, no traceback, and in
the REPL a conversation that survives.

Table-driven: bad values of every flag of the settings table, invalid bytes in every input path, a closed
output pipe, mismatched and truncated model files, corrupt /load files, a full disk during autosave;
then a bounded fuzz of random argv values and stdin bytes through ``rml-chat -p`` with the real SmolLM2.
"""

from __future__ import annotations

import errno
import io
import json
import os
import random
import resource
import stat
import subprocess
import sys
import threading
import time

import pytest
from conftest import model_path, smollm_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rml_chat.core.conversation import MAX_CHAT_BYTES, Conversation
from rml_chat.core.model import load_model
from rml_chat.core.session import ChatSession
from rml_chat.core.settings import SETTINGS
from rml_chat.errors import EXIT_CODES
from rml_chat.frontends import cli
from rml_chat.frontends.repl import Repl
from rml_chat.text_input import MAX_TEXT_BYTES

ENTER = "\r"


def run(*args: str, stdin: bytes = b"", timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "rml_chat", *args], input=stdin, capture_output=True, timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess[bytes], code: int) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code, (done.returncode, err)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("rml-chat:") and "warning" not in line]
    assert len(lines) == 1, err
    return lines[0]


def run_stdin_closed(*args: str) -> subprocess.CompletedProcess[bytes]:
    """rml-chat with its standard input closed (``<&-``), not merely empty."""
    return subprocess.run(["bash", "-c", 'exec "$0" -m rml_chat "$@" <&-', sys.executable, *args],
                          capture_output=True, timeout=300)


@pytest.mark.offline
@pytest.mark.parametrize("args", [[], ["--batch", "-"], ["--json"]])
def test_a_closed_stdin_is_a_one_line_input_error(args: list[str]) -> None:
    done = run_stdin_closed(*args)
    assert "stdin is closed" in one_line_error(done, 1)
    if args == ["--json"]:
        assert json.loads(done.stdout)["error"]["kind"] == "input"


def test_with_stdin_closed_a_prompt_from_the_flag_still_runs() -> None:
    done = run_stdin_closed("-p", "Say hi.", "-n", "4", "--temp", "0")
    assert done.returncode == 0 and done.stdout.strip(), done.stderr


# ----- flags ------------------------------------------------------------------------------------------

#: (a switch takes llama.cpp's words for on and off: 1, true, enabled; 0, false, disabled; auto: -1)
BAD_VALUES = {"temp": ["-1", "hot", "nan", "inf"], "top_k": ["-3", "1.5", str(2**32 + 1)], "top_p": ["5", "-0.1"],
              "min_p": ["7", "x"], "repeat_penalty": ["0", "-2"], "seed": ["-2", str(2**32), str(2**32 - 1), "abc"],
              "max_tokens": ["-5", "ten"], "ctx_size": ["-5", "4k", str(2**32)], "overflow": ["truncate"],
              "threads": ["0", "-2", "513"], "threads_batch": ["0", "many", "9" * 30], "think": ["maybe", "ON"],
              "stop": [""], "context_shift": ["yes", "2"], "reasoning_budget": ["-2", "lots"],
              "hide_thinking": ["yes"], "reasoning_effort": ["HIGH", "very high", "x" * 30],
              "thinking_display": ["collapsed"], "markdown": ["yes"], "prompt_cache": ["maybe"],
              "n_gpu_layers": ["-2", "all"], "split_mode": ["rows"], "flash_attn": ["2", "enable", "ON"],
              "batch_size": ["0", "-1", "2k"], "ubatch_size": ["0", "half", str(2**31)],
              "parallel": ["0", "65", "four"], "typical_p": ["1.5"], "top_n_sigma": ["-2", "x"],
              "xtc_probability": ["2"], "xtc_threshold": ["-0.5"], "repeat_last_n": ["-1", "all", str(2**31)],
              "presence_penalty": ["inf", "much"], "frequency_penalty": ["nan"], "dry_multiplier": ["-0.8"],
              "dry_base": ["0.5"], "dry_allowed_length": ["-1"], "dry_penalty_last_n": ["-1", str(2**40)],
              "dry_sequence_breakers": [""], "dynatemp_range": ["-1"], "dynatemp_exp": ["-2"],
              "mirostat": ["3", "on"], "mirostat_lr": ["0"], "mirostat_ent": ["-5"],
              "logit_bias": ["15043", "15043*2", "x+1", "15043+nan", f"{2**32}+1"], "samplers": ["top_k;hot", "kqz", ""],
              "ignore_eos": ["yes"], "backend_sampling": ["2", "gpu"], "repeat_guard": ["-1", "lots"],
              "spec_type": ["eagle", "NGRAM-MOD", "ngram-mod,", "draft-eagle3", "ngram-mod;draft-simple"],
              "spec_default": ["yes"], "spec_draft_n_max": ["-2", "many"], "spec_draft_n_min": ["-1"],
              "spec_draft_fit": ["yes", "2"],
              "spec_ngram_simple_size_n": ["0", "1025"], "spec_ngram_simple_size_m": ["0"],
              "spec_ngram_mod_n_match": ["0", "x"], "spec_ngram_mod_n_min": ["-1"], "spec_ngram_mod_n_max": ["2000"],
              "spec_ngram_map_k_size_n": ["0", "1025"], "spec_ngram_map_k_size_m": ["0", "4.5"],
              "spec_ngram_map_k4v_size_n": ["x", "-1"], "spec_ngram_map_k4v_size_m": ["0"],
              "spec_ngram_map_k4v_min_hits": ["0", "16381"]}


@pytest.mark.offline
def test_the_table_above_covers_every_setting() -> None:
    assert set(BAD_VALUES) == {row.name for row in SETTINGS}


@pytest.mark.offline
@pytest.mark.parametrize(("flag", "value"), [(row.flag, value) for row in SETTINGS for value in BAD_VALUES[row.name]])
def test_a_bad_value_of_every_flag_is_a_usage_error_naming_the_flag(flag: str, value: str) -> None:
    line = one_line_error(run(flag, value, "-p", "hi"), 2)
    assert flag in line and repr(value) in line and "must be" in line


LONG_NAME = "a" * 5000  # (longer than a path may be: stat() says ENAMETOOLONG, where a missing file says ENOENT)


@pytest.mark.parametrize("args", [[LONG_NAME], ["--functions", LONG_NAME],
                                  ["--weights", LONG_NAME], ["--server", "http://127.0.0.1:9/", LONG_NAME]])
def test_a_name_too_long_for_a_path_is_one_line(args: list[str]) -> None:
    """A name past the system's limit for a path, where a model, a chat or a file is named: pathlib's exists()
    raised OSError for it (it returns False for a file that isn't there), and the run ended in an internal
    error."""
    line = one_line_error(run(*args, "-p", "hi"), 1)
    assert line == "rml-chat: input: " + "a" * 40 + "… (5000 characters): a name too long for a path"


@pytest.mark.parametrize(("args", "words"), [
    (["--chat-format", "lama3", "-p", "x"], "unknown chat format 'lama3'"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["-cnv", "-p", "x"], "unrecognized arguments: -cnv"),  # (llama-cli's; not -c with the value 'nv')
    (["-n"], "expected one argument"),
    (["--check", "-p", "x"], "--check runs its own conversation"),
    (["a.gguf", "b.gguf", "-p", "x"], "one MODEL at a time, not 2 (--check takes several;"),
    (["--strict", "-p", "x"], "--strict, --no-reply and --junit go with --check"),
])
@pytest.mark.offline
def test_other_usage_errors_are_one_line(args: list[str], words: str) -> None:
    assert words in one_line_error(run(*args), 2)


def test_with_json_an_error_is_also_a_json_object_on_stdout() -> None:
    done = run("--json", "--top-p", "9", "-p", "x")
    one_line_error(done, 2)
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["error"]["kind"] == "usage" and "--top-p" in report["error"]["message"]
    done = run("--json", "/no/such.gguf", "-p", "x")
    assert json.loads(done.stdout)["error"] == {"kind": "model", "message": "/no/such.gguf: no such file or directory"}
    done = run("--check", "--json", "/no/such.gguf")
    assert done.returncode == 1 and json.loads(done.stdout)["ok"] is False


@pytest.mark.offline
def test_help_all_is_grouped_with_defaults_examples_environment_and_exit_codes() -> None:
    text = run("--help", "all").stdout.decode()
    for heading in ("model:", "one turn and scripts:", "sampling (llama.cpp", "context and threads:", "output:",
                    "interactive:", "examples:", "environment:", "exit codes:", "interactive keys:"):
        assert heading in text
    flat = " ".join(text.split())
    assert "(default: 0.95)" in flat and "RML_CHAT_SESSIONS" in flat and "141 closed" in flat
    assert all(row.flag in text for row in SETTINGS)


@pytest.mark.offline
def test_help_is_first_one_screen_of_the_common_flags_and_then_a_group_at_a_time() -> None:
    first = run("--help")
    text = first.stdout.decode()
    assert first.returncode == 0 and len(text.splitlines()) <= 50
    for flag in ("MODEL", "-hf", "--models", "-p TEXT", "--json", "--resume", "-c N", "--temp", "--functions",
                 "--check", "--help all", "examples:"):
        assert flag in text, flag
    assert "--dry-base" not in text and "RML_CHAT_SESSIONS" not in text
    sampling = run("-h", "sampling").stdout.decode()
    assert sampling.startswith("sampling (llama.cpp") and "--dry-base" in sampling and "--resume" not in sampling
    assert "-fa on|off|auto" in run("--help", "context").stdout.decode()
    assert one_line_error(run("--help", "colours"), 2).startswith("rml-chat: usage: --help colours: no such help")


@pytest.mark.offline
def test_version_names_all_three() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.decode().startswith("rml-chat ") and "llama-cpp-python 0.3" in done.stdout.decode()
    assert "llama.cpp " in done.stdout.decode()


@pytest.mark.parametrize("broken", ["missing", "library"])
@pytest.mark.parametrize("args", [["-p", "hi"], ["-p", "hi", "-j", '{"type": "string"}'], ["--json", "-p", "hi"]])
def test_llama_cpp_python_missing_or_not_loading_is_one_line_with_its_cure(tmp_path, broken: str,
                                                                            args: list[str]) -> None:
    """Installed with ``--no-deps``, or its library built for another machine: it was an internal error."""
    if broken == "missing":
        start = ("import sys\nclass Absent:\n  def find_spec(name, *_):\n    if name == 'llama_cpp': raise "
                 "ModuleNotFoundError(f'No module named {name!r}', name=name)\nsys.meta_path.insert(0, Absent)\n")
        env = os.environ.copy()
    else:  # llama-cpp-python's own words when its shared library does not load
        (tmp_path / "llama_cpp").mkdir()
        (tmp_path / "llama_cpp" / "__init__.py").write_text("")
        (tmp_path / "llama_cpp" / "llama_cpp.py").write_text(
            "raise RuntimeError(\"Failed to load shared library '/x/libllama.so': libggml.so: cannot open\")\n")
        start, env = "", {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-c", start + "import runpy; runpy.run_module('rml_chat', run_name="
                           "'__main__')", str(model_path("smollm2")), *args],
                          capture_output=True, timeout=120, env=env)
    line = one_line_error(done, 1)
    if broken == "missing":
        assert line == ("rml-chat: model: llama-cpp-python, which runs the model, is not installed: "
                        "pip install llama-cpp-python")
    else:
        assert line == ("rml-chat: model: llama-cpp-python's llama.cpp library could not be loaded (Failed to load "
                        "shared library '/x/libllama.so': libggml.so: cannot open): reinstall it: "
                        "pip install --force-reinstall --no-cache-dir llama-cpp-python")
    if "--json" in args:
        assert json.loads(done.stdout)["error"]["kind"] == "model"


# ----- input paths ------------------------------------------------------------------------------------

def test_invalid_utf8_on_stdin_is_replaced_with_one_warning() -> None:
    done = run(str(model_path("smollm2")), "--temp", "0", "-n", "4", "--json", stdin=b"Say \xff\xfe hi \xc3")
    err = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in err
    assert err.count("warning: stdin is not valid UTF-8 (byte 0xff at offset 4)") == 1
    assert json.loads(done.stdout)["prompt_tokens"] > 0


@pytest.mark.parametrize("flag", ["-p", "-sys", "--stop"])
def test_invalid_utf8_in_an_argument_is_replaced_with_one_warning(flag: str) -> None:
    args = [str(model_path("smollm2")), "--temp", "0", "-n", "3", flag, os.fsdecode(b"x\xffy")]
    if flag != "-p":
        args += ["-p", "hi"]
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert b"a command-line argument is not valid UTF-8 (byte 0xff at offset 1)" in done.stderr


def test_a_context_too_big_for_memory_is_refused_before_it_is_taken_in_one_line() -> None:
    line = one_line_error(run(str(model_path("smollm2")), "-c", "20000000", "-p", "hi"), 1)  # a 460 GB cache
    assert "-c 20000000: not enough memory for a 20,000,000-token context: its KV cache needs about 460.8 GB" in line
    assert "GB is available; the largest -c that fits is about" in line
    line = one_line_error(run(str(model_path("smollm2")), "-c", "99999999999", "-p", "hi"), 2)  # once: OOM-killed
    assert "-c/--ctx-size: must be a whole number from 0 to 2147483647" in line  # (the C side's int32_t)
    done = run(str(model_path("smollm2")), "-c", "16384", "-p", "hi", "-n", "1")
    assert done.returncode == 0 and b"past the model's training context (8192)" in done.stderr


def test_an_invalid_byte_in_the_model_path_is_a_clear_error() -> None:
    assert "no such file or directory" in one_line_error(run(os.fsdecode(b"/no/m\xffdel.gguf"), "-p", "x"), 1)


@pytest.mark.parametrize(("args", "line"), [
    (["~no-such-user/m.gguf", "-p", "x"], "model: ~no-such-user/m.gguf: no such file or directory"),
    (["--resume", "~no-such-user/c.json", "-p", "x"], "chat: ~no-such-user/c.json: can't read (No such file"),
    (["-p", "x", "--json-schema", "@~no-such-user/s.json"], "--json-schema: ~no-such-user/s.json: No such file"),
])
def test_a_home_of_no_user_is_a_path_that_is_not_there(args: list[str], line: str) -> None:
    """``~name`` of no user stays as written, as a shell leaves it (it was an internal error)."""
    assert line in one_line_error(run(*args), 2 if "--json-schema" in args else 1)


def test_a_closed_output_pipe_is_one_line_and_exit_141() -> None:
    reader = subprocess.Popen([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-p",
                               "Write a long story about the sea.", "--temp", "0", "-n", "300"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.read(5)
    reader.stdout.close()  # what `| head -c 5` does
    err = reader.stderr.read().decode()
    assert reader.wait(120) == 141 and "Traceback" not in err and "Exception ignored" not in err
    assert err.strip().splitlines()[-1] == "rml-chat: closed: the output was closed before everything was written"


@pytest.mark.parametrize("args", [["-p", "hi", "-n", "3"], ["-p", "hi", "-n", "3", "--json"], ["--models"],
                                  ["--version"], ["--help"], ["--help", "all"]])
def test_an_output_with_no_room_is_one_line_and_exit_1(args: list[str]) -> None:
    """stdout on a full device (``> /dev/full``): one line, not "internal error" (nor, for --help, exit 0
    with nothing written)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "rml_chat", *args], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == "rml-chat: output: can't write to stdout (No space left on device)"


@pytest.mark.parametrize("redirect", ["2>&-", "2</dev/null"], ids=["closed", "open for reading"])
def test_with_stderr_closed_a_run_writes_its_reply_and_nothing_else(redirect: str) -> None:
    """``2>&-`` (and a descriptor 2 that can't be written, as a launcher started with it closed may leave):
    the notes go nowhere, the reply to stdout, exit 0. Before, the first note failed (EBADF): exit 1."""
    done = subprocess.run(["bash", "-c", f'exec "$0" -m rml_chat "$@" {redirect}', sys.executable, "-p", "Say hi.",
                           "-n", "4", "--temp", "0", "--verbose"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() and done.stderr == "", done
    assert "rml-chat" not in done.stdout and "loading" not in done.stdout


def test_with_stdout_closed_there_is_one_line_and_exit_141() -> None:
    done = subprocess.run(["bash", "-c", 'exec "$0" -m rml_chat "$@" >&-', sys.executable, "-p", "hi"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 141 and done.stderr == "rml-chat: closed: stdout is closed: nowhere to write\n"


# ----- model files ------------------------------------------------------------------------------------

def test_a_tokenizer_that_does_not_fit_the_weights_is_caught_before_the_first_token() -> None:
    line = one_line_error(run(str(model_path("smollm2")), "--weights", str(model_path("gemma3")), "-p", "hi"), 1)
    assert "the tokenizer (49152 tokens" in line and "does not fit the weights (262144 tokens)" in line


@pytest.mark.parametrize("keep", [0.02, 0.5])
def test_a_truncated_model_file_gives_llama_cpps_reason(tmp_path, keep: float) -> None:
    data = model_path("smollm2").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:int(len(data) * keep)])
    line = one_line_error(run(str(cut), "-p", "hi"), 1)
    assert "cut.gguf" in line and ("not within the file bounds" in line or "offset" in line)


# ----- the REPL ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def session() -> ChatSession:
    with smollm_session(1024, 6) as made:
        yield made


def drive(session: ChatSession, keys: list[str], tmp_path, capsys) -> str:
    """Keys into a REPL through a pipe, a pause between groups (Tab completion answers asynchronously)."""
    with create_pipe_input() as pipe:
        def feed() -> None:
            for group in keys:
                pipe.send_text(group)
                time.sleep(1.0 if group == "\t" else 0.3)  # completions come asynchronously, slower on a busy machine
            pipe.close()

        threading.Thread(target=feed, daemon=True).start()
        repl = Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history",
                    autosave=tmp_path / "autosave.json")
        assert repl.run() == 0
    captured = capsys.readouterr()
    return captured.out + captured.err


CORRUPT = {"not JSON": b"{nope", "not a conversation": b"[1, 2]", "a bad message": b'{"messages": [{"role": 3}]}',
           "binary": bytes(range(256)), "nested": b"[" * 100000, "empty": b"",
           "bad UTF-8 inside": b'{"messages": [{"role": "user", "content": "caf\xe9"}]}'}


def test_corrupt_load_files_are_one_line_and_the_conversation_survives(session, tmp_path, capsys) -> None:
    session.conversation = Conversation(None, [{"role": "user", "content": "keep me"},
                                               {"role": "assistant", "content": "kept"}])
    paths = []
    for name, data in CORRUPT.items():
        path = tmp_path / f"{name.replace(' ', '_')}.json"
        path.write_bytes(data)
        paths.append(path)
    out = drive(session, [f"/load {p}" + ENTER for p in paths[:-1]] + [f"/load {tmp_path}/missing.json" + ENTER],
                tmp_path, capsys)
    assert out.count("error: ") == len(paths) and "Traceback" not in out and "internal error" not in out
    assert [m.content for m in session.conversation.messages] == ["keep me", "kept"]
    out = drive(session, [f"/load {paths[-1]}" + ENTER], tmp_path, capsys)  # readable once decoded: loaded
    assert "not valid UTF-8" in out and session.conversation.messages[0].content == "caf\ufffd"


def test_files_that_never_end_or_are_not_files_are_one_line_and_the_conversation_survives(session, tmp_path,
                                                                                          capsys) -> None:
    """A file past its bound read as a chat, a schema or a grammar is refused once the bound is read (zeros
    in sparse files here; /dev/zero in a child process below); /save onto a FIFO is refused (renamed over, a
    FIFO or a device would be lost); /save through a link writes the file it names."""
    session.conversation = Conversation(None, [{"role": "user", "content": "keep me"},
                                               {"role": "assistant", "content": "kept"}])
    chat, text = tmp_path / "huge.json", tmp_path / "huge.txt"
    for path, size in ((chat, MAX_CHAT_BYTES + 1), (text, MAX_TEXT_BYTES + 1)):
        with path.open("wb") as sparse:
            sparse.truncate(size)
    fifo, real, link = tmp_path / "fifo", tmp_path / "real.json", tmp_path / "link.json"
    os.mkfifo(fifo)
    real.write_text("{}")
    link.symlink_to(real)
    out = drive(session, [f"/load {chat}" + ENTER, f"/schema @{text}" + ENTER, f"/grammar @{text}" + ENTER,
                          f"/save {fifo}" + ENTER, f"/save {link}" + ENTER], tmp_path, capsys)
    assert f"error: {chat}: can't read (more than 134,217,728 bytes)" in out
    assert f"error: /schema: {text}: more than 8,388,608 bytes" in out
    assert f"error: /grammar: {text}: more than 8,388,608 bytes" in out
    assert f"error: {fifo}: not a regular file (a folder, a FIFO or a device); give a file's path" in out
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    assert [m["content"] for m in json.loads(real.read_text())["messages"]] == ["keep me", "kept"]
    assert [m.content for m in session.conversation.messages] == ["keep me", "kept"]
    assert "Traceback" not in out and "internal error" not in out


@pytest.mark.parametrize(("args", "line"), [
    (["--grammar-file", "/dev/zero"], "rml-chat: usage: --grammar-file: /dev/zero: more than 8,388,608 bytes "
                                     "(rml-chat --help lists the flags)"),
    (["-j", "@/dev/zero"], "rml-chat: usage: --json-schema: /dev/zero: more than 8,388,608 bytes "
                               "(rml-chat --help lists the flags)"),
    (["--resume", "/dev/zero"], "rml-chat: chat: /dev/zero: can't read (more than 134,217,728 bytes)")])
def test_a_flag_naming_a_file_that_never_ends_is_one_line(args: list[str], line: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", *args, "-p", "hi"], capture_output=True, text=True,
                          timeout=120, preexec_fn=_memory_capped)
    assert done.stderr.strip() == line and done.returncode == (2 if "usage" in line else 1), done.stderr


@pytest.mark.parametrize("parallel", ["1", "2"])
def test_a_batch_line_that_never_ends_is_its_own_error_and_the_inputs_end(parallel: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--batch", "/dev/zero", "-np", parallel], text=True,
                          capture_output=True, timeout=120, preexec_fn=_memory_capped)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{"id": None, "line": 1, "ok": False, "error": {
        "kind": "input", "message": "more than 134,217,728 bytes with no newline (a line holds one prompt or one "
                                    "conversation); the lines after it were not read"}}]
    assert done.stderr.strip() == "rml-chat: batch: 0 of 1 line ran cleanly; not: line 1"


@pytest.mark.parametrize(("args", "line"), [
    (["{fifo}"], "rml-chat: model: {fifo}: not a .gguf file or a model directory"),
    (["{fifo}.gguf"], "rml-chat: model: {fifo}.gguf: not a regular file (a folder, a FIFO or a device), not weights"),
    (["--weights", "{fifo}"], "rml-chat: model: {fifo}: not a regular file (a folder, a FIFO or a device), not "
                              "weights"),
    (["-md", "{fifo}"], "rml-chat: model: -md {fifo}: {fifo}: not a regular file (a folder, a FIFO or a device), "
                        "not a GGUF file"),
    (["-md", "/dev/zero"], "rml-chat: model: -md /dev/zero: /dev/zero: not a regular file (a folder, a FIFO or a "
                           "device), not a GGUF file")], ids=["model", "model.gguf", "weights", "draft", "draft device"])
def test_a_model_file_that_is_a_fifo_or_a_device_is_one_line_not_a_wait(args: list[str], line: str,
                                                                         tmp_path) -> None:
    """Opening a FIFO waits for a writer for ever: a model, its weights or a draft model named by a FIFO
    waited so, before anything was said."""
    fifo = tmp_path / "model"
    os.mkfifo(fifo)
    os.mkfifo(tmp_path / "model.gguf")
    done = subprocess.run([sys.executable, "-m", "rml_chat", *(a.format(fifo=fifo) for a in args), "-p", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.strip() == line.format(fifo=fifo), done.stderr


def _memory_capped() -> None:
    """In the child: 4 GB of address space, so a regression that reads without bound fails, not the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


def test_a_look_back_longer_than_the_context_takes_the_contexts_memory_and_gives_its_reply() -> None:
    """``--repeat-last-n`` and ``--dry-penalty-last-n`` at their largest: llama.cpp allocates a ring of that
    many ids up front (8.6 GB and 17 GB; here, under a 4 GB cap, the allocation failed and the process
    died). No chain sees more than the context, so the same reply comes from a look-back of the context's size."""
    def reply(last_n: str) -> str:
        done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-c", "512", "-p",
                               "List ten fruits.", "-n", "40", "--temp", "0", "--repeat-penalty", "1.3",
                               "--repeat-last-n", last_n, "--dry-multiplier", "0.8", "--dry-penalty-last-n", last_n],
                              capture_output=True, text=True, timeout=120, preexec_fn=_memory_capped)
        assert done.returncode == 0, done.stderr[-400:]
        return done.stdout

    assert reply("2147483647") == reply("512")


def test_a_turn_that_fails_unexpectedly_does_not_end_the_session(session, tmp_path, capsys, monkeypatch) -> None:
    session.conversation = Conversation()

    def broken(*args, **kwargs):
        raise RuntimeError("the GPU caught fire")
        yield

    monkeypatch.setattr(session.engine, "generate", broken)
    out = drive(session, ["first" + ENTER, "/help" + ENTER], tmp_path, capsys)
    assert "internal error (RuntimeError: the GPU caught fire); the conversation is kept" in out
    assert "/regen" in out  # the REPL went on
    monkeypatch.undo()


def test_the_repl_autosaves_every_turn_and_survives_a_full_disk(session, tmp_path, capsys, monkeypatch) -> None:
    session.conversation = Conversation()
    out = drive(session, ["one" + ENTER], tmp_path, capsys)
    saved = json.loads((tmp_path / "autosave.json").read_text())
    assert [m["role"] for m in saved["messages"]] == ["user", "assistant"] and saved["model"]

    real_fsync, failures = os.fsync, [2]

    def full_then_freed(fd: int) -> None:  # the disk is full for two saves, then has room again
        if failures[0]:
            failures[0] -= 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_then_freed)
    out = drive(session, ["two" + ENTER, "three" + ENTER, "four" + ENTER], tmp_path, capsys)
    assert out.count("autosave failed") == 1 and "No space left on device" in out and "autosave works again" in out
    assert len(session.conversation.messages) == 8  # nothing was lost in memory …
    assert len(json.loads((tmp_path / "autosave.json").read_text())["messages"]) == 8  # … nor on disk, once saved


def test_a_sessions_folder_that_is_a_file_is_said_once_in_plain_words(session, tmp_path, capsys) -> None:
    session.conversation = Conversation()
    folder = tmp_path / "sessions"
    folder.write_text("not a folder")
    with create_pipe_input() as pipe:
        pipe.send_text("one" + ENTER + "two" + ENTER)
        pipe.close()
        repl = Repl(session, input=pipe, output=DummyOutput(), history=tmp_path / "history",
                    autosave=folder / "chat.json")
        assert repl.run() == 0
    out = capsys.readouterr().out
    assert out.count("note: autosave failed") == 1
    assert (f"note: autosave failed (the sessions folder {folder}: a file, not a folder); the conversation is "
            "still here — /save FILE keeps it") in out.replace("\n", " ")
    assert len(session.conversation.messages) == 4


@pytest.mark.whitebox
def test_tab_completes_commands_and_system_alone_shows_it(session, tmp_path, capsys) -> None:
    from prompt_toolkit.document import Document

    from rml_chat.frontends.repl import _SlashCompleter

    completer = _SlashCompleter(["/help", "/system", "/schema", "/save"])
    assert [c.text for c in completer.get_completions(Document("/sy"), None)] == ["/system"]
    assert [c.text for c in completer.get_completions(Document("/s"), None)] == ["/system", "/schema", "/save"]
    assert list(completer.get_completions(Document("hello /s"), None)) == []
    session.conversation = Conversation("Be brief.")
    out = drive(session, ["/sys", "\t", ENTER, "/he", "\t", ENTER], tmp_path, capsys)
    assert "system message: 'Be brief.'" in out and "keys:" in out and "Alt-Enter" in out


def test_resume_reopens_the_newest_autosave(tmp_path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    Conversation(None, [{"role": "user", "content": "old"}, {"role": "assistant", "content": "x"}]).save(folder / "a.json")
    time.sleep(0.05)
    Conversation(None, [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}],
                 str(model_path("smollm2"))).save(folder / "b.json")
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--resume", "-p", "And 3+3?", "--temp", "0", "-n", "8",
                           "--json"], capture_output=True, timeout=300,
                          env={**os.environ, "RML_CHAT_SESSIONS": str(folder)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    model = load_model(str(model_path("smollm2")))
    conversation = [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
                    {"role": "user", "content": "And 3+3?"}]
    assert report["prompt_tokens"] == len(model.encoder.encode(model.encoder.format(conversation)))
    saved = json.loads((folder / "b.json").read_text())["messages"]  # (the turn went into the chat, and it says so)
    assert [m["content"] for m in saved[:3]] == ["What is 2+2?", "4", "And 3+3?"] and saved[3]["content"] == report["reply"]
    assert b"note: saved in the chat (4 messages" in done.stderr


def test_resume_says_when_the_model_is_not_found_and_which_tools_are_missing(tmp_path) -> None:
    call = {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
    chat = tmp_path / "chat.json"
    Conversation(None, [{"role": "user", "content": "Weather in Paris?"},
                        {"role": "assistant", "content": "", "tool_calls": [call]},
                        {"role": "tool", "content": "sunny", "name": "get_weather"},
                        {"role": "assistant", "content": "Sunny."}], str(tmp_path / "gone" / "model.gguf")).save(chat)
    done = subprocess.run([sys.executable, "-m", "rml_chat", "--resume", str(chat), "-p", "Thanks!", "-n", "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (f"warning: the chat was held with {tmp_path / 'gone' / 'model.gguf'}, which is not found from here; it "
            "goes on with SmolLM2-135M-Instruct.Q4_1 (chat format smollm2)") in done.stderr
    assert ("warning: the chat called get_weather, which is not among the tools given now (none are: --functions FILE "
            "or --mcp COMMAND gives tools); the model sees the earlier calls but can't call them again") in done.stderr


# ----- a bounded fuzz through the real CLI, in process -----------------------------------------------

_FLAGS = [row.flag for row in SETTINGS] + ["--chat-format", "-sys", "--json", "--show-prompt", "--weights", "-p", "-lcs",
                                          "-lcd"]
_JUNK = ["0", "-1", "1", "2", "0.5", "-0.0", "1e309", "nan", "", " ", "on", "off", "chatml", "raw", "\x00",
         "\udcff", "9" * 30, "-c", "--", "drop-oldest", "error", "日本", "/dev/null", "3.5", "256"]
_VALID = {"--temp": ["0", "0.7", "2"], "--top-k": ["0", "1", "40"], "--top-p": ["0.1", "1"], "--min-p": ["0", "0.9"],
          "--repeat-penalty": ["0.5", "1.3"], "--seed": ["-1", "0", "7"], "--max-tokens": ["0", "2"],
          "--ctx-size": ["256", "300", "0"], "--overflow": ["drop-oldest", "error"], "--threads": ["-1", "1", "2"],
          "--threads-batch": ["-1", "1"], "--think": ["on", "off"], "--context-shift": ["on", "off"],
          "--flash-attn": ["on", "off", "auto"], "--batch-size": ["1", "64", "2048"], "--ubatch-size": ["1", "512"],
          "--reasoning-budget": ["-1", "0", "5"], "--hidethinking": ["on", "off"],
          "--stop": ["\n", "a", "Hello"],
          "--spec-type": ["none", "ngram-simple", "ngram-mod", "ngram-map-k", "ngram-map-k4v", "ngram-cache",
                          "ngram-cache,ngram-mod", "none,ngram-mod"],
          "--spec-default": ["on", "off"], "--spec-draft-n-max": ["-1", "0", "3"], "--spec-draft-n-min": ["0", "2"],
          "--spec-draft-fit": ["on", "off"],
          "--spec-ngram-simple-size-n": ["1", "12"], "--spec-ngram-simple-size-m": ["1", "48"],
          "--spec-ngram-mod-n-match": ["1", "24"], "--spec-ngram-mod-n-min": ["0", "48"],
          "--spec-ngram-mod-n-max": ["0", "64"], "--spec-ngram-map-k-size-n": ["1", "12"],
          "--spec-ngram-map-k-size-m": ["1", "48"], "--spec-ngram-map-k4v-size-n": ["2"],
          "--spec-ngram-map-k4v-size-m": ["8"], "--spec-ngram-map-k4v-min-hits": ["1", "2"],
          "-lcs": ["EMPTY_CACHE"], "-lcd": ["EMPTY_CACHE"],  # (an empty lookup cache file, made by the test)
          "--chat-format": ["chatml", "raw", "llama2", "gemma", "phi3"], "-sys": ["Be brief.", "\udcff\x01", ""],
          "-p": ["hi", "<|im_end|>", "\x1b[2J", ""]}


def _call(argv: list[str], stdin: bytes, monkeypatch) -> tuple[int, str]:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    monkeypatch.setattr(sys, "stderr", err)
    code = cli.main(argv)
    return code, err.getvalue()


def test_fuzz_random_argv_and_stdin_never_give_a_traceback(monkeypatch, tmp_path) -> None:
    """300 cases, mostly valid values (so that most reach the model), some junk; a few tokens each."""
    rng = random.Random(2026)
    model = str(model_path("smollm2"))
    (tmp_path / "empty.bin").write_bytes(b"")
    codes: dict[int, int] = {}
    for case in range(300):
        argv = [model, "-n", str(rng.randint(0, 3)), "-c", "256"]
        for _ in range(rng.randint(0, 4)):
            flag = rng.choice(_FLAGS)
            good = _VALID.get(flag)
            if flag in ("--json", "--show-prompt"):
                argv.append(flag)
                continue
            value = rng.choice(good) if good and rng.random() < 0.7 else rng.choice(_JUNK)
            argv += [flag, str(tmp_path / "empty.bin") if value == "EMPTY_CACHE" else value]
        stdin = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.5:
            argv += ["-p", stdin.decode("utf-8", "surrogateescape")]
        code, err = _call(argv, stdin, monkeypatch)
        monkeypatch.undo()
        assert code in EXIT_CODES, (case, argv, code, err)
        assert "Traceback" not in err and "internal error" not in err, (case, argv, err)
        codes[code] = codes.get(code, 0) + 1
    assert codes.get(0, 0) >= 90 and codes.get(2, 0) >= 30, codes  # both kinds were reached (0: about a third)


# ----- what a scripted run says besides the reply -------------------------------------------------------

def _notes(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [line for line in done.stderr.decode().splitlines() if line.startswith("note:")]


def test_a_reply_cut_by_n_a_full_context_or_a_stop_string_says_so_on_stderr() -> None:
    smollm = str(model_path("smollm2"))
    cut = run(smollm, "--temp", "0", "-n", "3", "-p", "Count from one to twenty.")
    assert cut.returncode == 0 and _notes(cut) == ["note: reply cut at -n 3 tokens"]
    full = run(smollm, "--temp", "0", "-c", "256", "-p", "word " * 140 + "Now write a long story about the sea.")
    assert _notes(full) == ["note: reply cut: the context is full (256 tokens); -c/--ctx-size gives a larger one"]
    stopped = run(smollm, "--temp", "0", "--stop", "o", "-p", "Say hello.")
    assert _notes(stopped) == ["note: reply stopped at the stop string 'o'"] and b"o" not in stopped.stdout
    whole = run(smollm, "--temp", "0", "-p", "Say hello.")
    assert whole.returncode == 0 and _notes(whole) == []  # a reply the model ended: nothing to say
    as_json = json.loads(run(smollm, "--temp", "0", "-n", "3", "-p", "Count.", "--json").stdout)
    assert as_json["stop_reason"] == "length" and as_json["stop_note"] == "reply cut at -n 3 tokens"  # the object says it
    assert json.loads(run(smollm, "--temp", "0", "-p", "Say hello.", "--json").stdout)["stop_note"] is None


def test_an_empty_reply_under_a_grammar_is_noted() -> None:
    done = run(str(model_path("smollm2")), "--grammar", "root ::= ", "-p", "hi")
    assert done.returncode == 0 and done.stdout == b"\n"
    assert _notes(done) == ["note: the reply is empty: the model ended its turn at once (its grammar or schema "
                            "allows an empty reply)"]


def test_a_byte_order_mark_on_stdin_is_no_part_of_the_prompt_and_show_prompt_takes_json() -> None:
    done = run(str(model_path("smollm2")), "--show-prompt", "--json", stdin="\ufeffhi".encode())
    shown = json.loads(done.stdout)
    assert shown["ok"] and "user\nhi<|im_end|>" in shown["prompt"] and "\ufeff" not in shown["prompt"]
    assert shown["tokens"] == len(shown["ids"]) and shown["chat_format"] == "smollm2"
    assert shown["control_tokens"][0] == {"at": 0, "id": 1, "text": "<|im_start|>"}


def test_think_on_a_model_without_a_template_says_why_it_does_not_apply() -> None:
    done = run(str(model_path("gemma3")), "--think", "on", "--show-prompt", "-p", "hi")
    assert done.returncode == 0
    assert "note: --think on does not apply: the model has no chat template (prompts are plain text)" in _notes(done)


def test_batch_line_errors_say_as_much_as_the_flags_do() -> None:
    lines = [{"prompt": "x", "temp": "hot"}, {"prompt": "x", "tmep": 1}]
    cut_short = '{"prompt": "Say hi.", "dry_allowed_l\n{"prompt": "Say hi."\r\n'  # (its line ending is no part of it)
    stdin = "\n".join(map(json.dumps, lines)) + "\n" + cut_short
    done = run(str(model_path("smollm2")), "--batch", "-", stdin=stdin.encode())
    out = [json.loads(line)["error"]["message"] for line in done.stdout.decode().splitlines()]
    assert out[0] == 'temp must be a number 0 or more (0: greedy), not "hot"'
    assert out[1].startswith("unknown key 'tmep'; a line takes id, prompt, system, schema, grammar, messages, temp, top_k")
    assert out[2:] == ["not JSON (Unterminated string starting at: line 1 column 23 (char 22))",
                       "not JSON (Expecting ',' delimiter: line 1 column 21 (char 20))"]


#: runs argv and prints its exit code and peak RSS (KB), from a fresh small interpreter: a child forked
#: from pytest itself would count pytest's own pages in its peak
_PEAK = ("import os, subprocess, sys; child = subprocess.Popen(sys.argv[1:]); _, status, usage = os.wait4(child.pid, 0); "
         "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)")


def test_an_absurd_context_is_refused_before_memory_grows() -> None:
    done = subprocess.run([sys.executable, "-c", _PEAK, sys.executable, "-m", "rml_chat", str(model_path("smollm2")),
                           "-c", "99999999999", "-p", "hi"], capture_output=True, timeout=120)
    code, peak_kb = map(int, done.stdout.split())
    assert code == 2 and b"-c/--ctx-size: must be a whole number from 0 to 2147483647" in done.stderr
    assert peak_kb < 1_000_000, peak_kb  # the interpreter, the tables and the mapped weights (~170 MB); no cache


def test_text_piped_in_with_p_goes_first_and_the_instruction_after_it(tmp_path) -> None:
    """``cat notes.txt | rml-chat -p "Summarize the text above"``: both in one user message, the piped text
    first; a file redirected to stdin is read the same way; /dev/null or a terminal adds nothing."""
    model = str(model_path("smollm2"))
    done = run(model, "--show-prompt", "--json", "-p", "Summarize the text above.", stdin=b"The sea is blue.\n\n")
    prompt = json.loads(done.stdout)["prompt"]
    assert "user\nThe sea is blue.\n\nSummarize the text above.<|im_end|>" in prompt
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"Line one.\r\nLine two.\n")
    with notes.open("rb") as stdin:
        redirected = subprocess.run([sys.executable, "-m", "rml_chat", model, "--show-prompt", "--json", "-p", "Count."],
                                    stdin=stdin, capture_output=True, timeout=300)
    assert "user\nLine one.\r\nLine two.\n\nCount.<|im_end|>" in json.loads(redirected.stdout)["prompt"]
    alone = subprocess.run([sys.executable, "-m", "rml_chat", model, "--show-prompt", "--json", "-p", "Count."],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    assert "user\nCount.<|im_end|>" in json.loads(alone.stdout)["prompt"]


def test_numbers_that_are_not_ascii_digits_are_one_line_each(session, tmp_path, capsys) -> None:
    """``²`` passes ``str.isdigit`` and fails ``int``: each command that takes a number says what it takes."""
    session.conversation = Conversation(None, [{"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": "```\ncode\n```"}])
    out = drive(session, [f"/{command} ²" + ENTER for command in ("edit", "branch", "copy")], tmp_path, capsys)
    assert "Traceback" not in out and "internal error" not in out
    assert "/edit N: N is one of your messages" in out and "/branch: no branches yet" in out
    assert "/copy N: N counts the last reply's code blocks (it has 1)" in out
    assert len(session.conversation.messages) == 2


@pytest.mark.parametrize("flag", ["--resume", "--delete-session"])
def test_a_listing_number_that_is_not_ascii_digits_is_a_name_not_found(flag: str, tmp_path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    done = subprocess.run([sys.executable, "-m", "rml_chat", flag, "²", *(["-p", "hi"] if flag == "--resume" else [])],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "RML_CHAT_SESSIONS": str(tmp_path)})
    assert done.returncode == 1 and done.stderr.strip() == f"rml-chat: chat: no chat named '²' in {tmp_path} (rml-chat " \
                                                           "--sessions lists them)", done.stderr


def test_stdin_that_never_ends_is_refused_in_one_line_once_the_cap_is_read() -> None:
    """``yes | rml-chat -p …``: stdin is read up to the bound every text input has (-f's), then one line."""
    endless = subprocess.Popen(["yes", "more"], stdout=subprocess.PIPE)
    try:
        done = subprocess.run([sys.executable, "-m", "rml_chat", "-p", "Summarize the text above", "--json"],
                              stdin=endless.stdout, capture_output=True, text=True, timeout=120)
    finally:
        endless.kill()
        endless.wait()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("rml-chat: input: stdin holds more than 8,388,608 bytes, more text than any "
                                   "context takes; pass a part of it (head -c, or -f FILE for a file)")
    assert json.loads(done.stdout)["error"]["kind"] == "input"


ESCAPING = ["Hello there ", "\x1b]52;c;cHduZWQ=\x07", " and then ", "\x1b[2J\x1b[31mred", " \x9b31m", " done\u202e."]
RAW = [b"\x1b]52", b"\x1b[2J", b"\x1b[31m", b"\xc2\x9b", "\u202e".encode()]


@pytest.mark.parametrize("args", [["--markdown", "on"], ["--markdown", "off"], ["-p", "hi"]], ids=["repl, markdown",
                                                                                               "repl, plain", "-p"])
def test_a_model_that_writes_terminal_escapes_reaches_no_terminal_raw(args: list[str], tmp_path) -> None:
    """A real model whose reply is set in its weights (scripted_model.py) writes a clipboard write (OSC 52),
    a screen clear, a colour, a C1 CSI and a bidi override, token by token through the engine and the
    stream: in a real pty, the REPL and ``-p`` show each as visible text, and none reaches the terminal as a
    byte it would act on. (To a pipe, ``-p`` hands on the model's bytes as they are: test_rendering.py.)"""
    from scripted_model import scripted_model
    from test_repl import Terminal

    model = scripted_model(tmp_path / "model.gguf", "Qwen-Qwen2.5-7B-Instruct", ESCAPING, ["(not reached)"])
    term = Terminal(tmp_path, str(model), "--temp", "0", "-n", "16", *args, model=False)
    if "-p" in args:
        term.read_until(lambda out: b"done" in out and out.endswith(b".\r\n"))
    else:
        term.prompt_ready()
        term.ask(b"hi", b"evaluated")
    assert term.finish() == 0
    shown = term.output.split(b"Hello there", 1)[1].split(b"done", 1)[0] + b"done"
    assert not [raw for raw in RAW if raw in term.output], shown
    assert b"^[]52;c;cHduZWQ=^G" in shown and b"^[[2J^[[31mred" in shown and b"<U+009B>31m" in shown, shown


@pytest.mark.parametrize("flag", ["-hf", "--weights", "-md", "-lcs", "--junit", "--batch", "--grammar-file", "-f",
                                  "--functions", "--api-key"])
def test_an_empty_value_that_should_name_something_is_a_usage_line_not_a_flag_dropped(flag: str) -> None:
    """``-md "$DRAFT"`` with the variable unset ran without a draft and said nothing (so did -hf, --weights,
    -lcs, --junit, --api-key); others said something about the current folder."""
    done = run(flag, "", "-p", "hi")
    assert done.returncode == 2
    assert done.stderr.decode().endswith(": an empty value names nothing (rml-chat --help lists the flags)\n")
