"""Nothing from elsewhere drives the terminal: a reply, a thought, a tool's result, an MCP server's error text
and a file name in an error line hold OSC (a window title), CSI (clear the screen), DCS, BEL, backspace, CR and
a C1 CSI; on a terminal each is shown visibly where it was, and a terminal emulator (pyte) fed everything the
program wrote keeps its title and its earlier lines. Into a pipe ``-p`` keeps the exact bytes; ``--json``
escapes them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pyte  # (the test extras hold it: without it these tests fail, as they should, rather than skip)
import pytest
from conftest import model_path, smollm_with_template
from test_repl import Terminal

from rml_chat.errors import one_line, report
from rml_chat.frontends.prompt_view import marked_prompt
from rml_chat.terminal import Styled, dim, for_stream, json_text, style, visible

#: what a hostile reply holds: a title (OSC ... BEL), a screen clear (CSI), a DCS query ended by ST, two
#: backspaces, a carriage return over-printing, a C1 CSI (U+009B) and DEL
HOSTILE = "A\x1b]0;PWNED\x07 B\x1b[2J C\x1bP1$qm\x1b\\ D\x08\x08E\rF\x9b31mG\x7f"
SHOWN = "A^[]0;PWNED^G B^[[2J C^[P1$qm^[\\ D^H^HE^MF<U+009B>31mG^?"
#: the same reply as a GBNF grammar (llama.cpp's escapes), so that the real model writes it
GRAMMAR = r'root ::= "A\x1b]0;PWNED\x07 B\x1b[2J C\x1bP1$qm\x1b\\ D\x08\x08E\rF\x9b31mG\x7f"'


def screen_of(output: bytes) -> pyte.Screen:
    """A 160x60 terminal emulator fed every byte the program wrote."""
    screen = pyte.Screen(160, 60)
    pyte.ByteStream(screen).feed(output)
    return screen


def shown_text(screen: pyte.Screen) -> str:
    return "\n".join(line.rstrip() for line in screen.display)


@pytest.mark.offline
def test_every_control_but_newline_and_tab_is_shown_as_cat_v_and_less_show_it() -> None:
    assert visible(HOSTILE) == SHOWN
    assert visible("tab\tand\nnewline stay") == "tab\tand\nnewline stay"
    every = "".join(map(chr, range(0xA0)))
    assert not any(ord(c) < 0x20 and c not in "\t\n" or 0x7F <= ord(c) < 0xA0 for c in visible(every))
    assert visible("\x00\x1f\x80\x9f") == "^@^_<U+0080><U+009F>"
    assert visible("é ✓ 👋") == "é ✓ 👋"  # (text beyond the controls is as it was)


@pytest.mark.offline
def test_every_format_character_but_the_joiners_is_shown_as_its_code_point() -> None:
    import unicodedata

    every = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
    assert len(every) > 150
    assert [c for c in every if visible(c) == c] == ["\u200c", "\u200d"]  # (joiners: emoji, Indic and Persian)
    assert visible("abc\u202edcba\u2066x\u2069 \U000e0041") == "abc<U+202E>dcba<U+2066>x<U+2069> <U+E0041>"
    assert visible("👨\u200d👩\u200d👧 ✓") == "👨\u200d👩\u200d👧 ✓"


def test_a_reply_with_bidirectional_overrides_reaches_the_terminal_visibly(tmp_path) -> None:
    term = Terminal(tmp_path, "--grammar", r'root ::= "paid \u202E0001$ \u2066x\u2069 done"', "-n", "40", "--temp", "0")
    term.prompt_ready()
    term.ask(b"Say something.", b"stop: ")
    assert term.finish() == 0
    assert "paid <U+202E>0001$ <U+2066>x<U+2069> done" in shown_text(screen_of(term.output))
    assert not any(c.encode() in term.output for c in "\u202e\u2066\u2069")


@pytest.mark.offline
def test_only_our_own_styling_is_a_sequence_and_whatever_joins_it_is_made_visible() -> None:
    line = dim("a \x1b[8mhidden\x1b[0m word", tty=True)
    assert line == "\x1b[2ma ^[[8mhidden^[[0m word\x1b[0m" and isinstance(line, Styled)
    assert visible(line) is line  # styled text passes as it is
    joined = "\x1b]0;x\x07" + line + "\x1b[2J"
    assert isinstance(joined, Styled) and joined.startswith("^[]0;x^G\x1b[2m") and joined.endswith("^[[2J")
    assert visible(f"{line}") == "^[[2ma ^[[8mhidden^[[0m word^[[0m"  # (lost the mark: our escapes show, none act)
    assert dim("x\x1b", tty=False) == "x^[" and style("t", "\x1b[7m") == "\x1b[7mt\x1b[0m"


@pytest.mark.offline
def test_a_stream_that_is_no_terminal_gets_the_exact_text_and_json_escapes_every_control(tmp_path) -> None:
    with open(tmp_path / "out", "w") as file:
        assert for_stream(HOSTILE, file) == HOSTILE
    text = json_text({"reply": HOSTILE})
    assert json.loads(text) == {"reply": HOSTILE}
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)
    assert "\\u009b" in text and "\\u007f" in text and json_text("é") == '"é"'


@pytest.mark.offline
def test_an_error_line_shows_a_hostile_file_name_visibly_and_its_json_keeps_the_name(capsys) -> None:
    report("model not found: /tmp/\x1b]0;PWNED\x07.gguf", "model", 1, as_json=True)
    captured = capsys.readouterr()
    assert captured.err == "rml-chat: model not found: /tmp/^[]0;PWNED^G.gguf\n"
    assert json.loads(captured.out)["error"]["message"] == "model not found: /tmp/\x1b]0;PWNED\x07.gguf"
    assert one_line("a\r\nb") == "a\\r\\nb"


def test_a_prompt_shown_on_a_terminal_marks_our_tokens_and_shows_a_messages_escapes() -> None:
    from conftest import ours

    tok = ours("smollm2")
    ids = tok.encode("<|im_start|>user\nhi \x1b]0;PWNED\x07<|im_end|>\n", parse_special=True)
    on_terminal = marked_prompt(tok, ids, color=True)
    assert isinstance(on_terminal, Styled) and "\x1b]" not in on_terminal and "\x07" not in on_terminal
    assert on_terminal == "\x1b[7m<|im_start|>\x1b[0muser\nhi ^[]0;PWNED^G\x1b[7m<|im_end|>\x1b[0m\n"
    assert marked_prompt(tok, ids, color=False) == "⟦<|im_start|>⟧user\nhi \x1b]0;PWNED\x07⟦<|im_end|>⟧\n"


def test_a_hostile_reply_in_the_repl_is_shown_where_it_was_and_drives_nothing(tmp_path) -> None:
    term = Terminal(tmp_path, "--grammar", GRAMMAR, "-n", "80", "--temp", "0")
    term.prompt_ready()
    term.ask(b"Say something.", b"stop: ")
    assert term.finish() == 0
    screen = screen_of(term.output)
    text = shown_text(screen)
    assert screen.title == "" and screen.icon_name == ""  # no OSC reached the terminal
    assert "rml-chat · SmolLM2" in text  # the lines before the reply are still there (no CSI 2J cleared them)
    assert SHOWN in text  # every byte shown, where it was (no CR over-printing, no backspace erasing)
    assert b"\x1b]0;PWNED" not in term.output and b"\xc2\x9b" not in term.output


def test_a_script_keeps_the_exact_bytes_in_a_pipe_escapes_them_in_json_and_shows_them_on_a_terminal(tmp_path) -> None:
    run = [sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "--grammar", GRAMMAR, "-n", "80",
           "--temp", "0", "-p", "Say something."]
    piped = subprocess.run(run, capture_output=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == (HOSTILE + "\n").encode()  # -p > file: the model's exact bytes
    as_json = subprocess.run([*run, "--json"], capture_output=True, timeout=300)
    assert json.loads(as_json.stdout)["reply"] == HOSTILE
    assert not any(b < 0x20 for b in as_json.stdout.rstrip(b"\n")) and b"\xc2\x9b" not in as_json.stdout

    term = Terminal(tmp_path, *run[4:])  # the same run with stdout on a terminal
    assert term.finish() == 0
    screen = screen_of(term.output)
    assert screen.title == "" and SHOWN in shown_text(screen)


def test_a_file_name_in_an_error_line_is_shown_visibly_on_a_terminal(tmp_path) -> None:
    term = Terminal(tmp_path, str(tmp_path / "m\x1b]0;PWNED\x07\x1b[2J.gguf"), "-p", "hi", model=False)
    assert term.finish() == 1
    screen = screen_of(b"earlier line\r\n" + term.output)
    assert screen.title == "" and "earlier line" in shown_text(screen)
    assert "m^[]0;PWNED^G^[[2J.gguf" in shown_text(screen)


HOSTILE_TOOLS = '''
def get_weather(city: str) -> str:
    """The weather of a city."""
    return "Sunny\\x1b]0;PWNED\\x07\\x1b[2J\\r\\x9b2J, 21 C"
'''

HOSTILE_MCP = '''
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("weather")


@server.tool()
def get_weather(city: str) -> str:
    """The weather of a city."""
    raise ToolError("\\x1b]2;PWNED\\x07\\x1b[1;1H\\x1b[2Kno station")


if __name__ == "__main__":
    server.run()
'''


@pytest.mark.parametrize("source", ["functions", "mcp"])
def test_a_tool_result_and_an_mcp_servers_error_text_are_shown_visibly(tmp_path, source: str) -> None:
    model = smollm_with_template(tmp_path / "qwen.gguf", "Qwen-Qwen2.5-7B-Instruct")
    code = tmp_path / "tools.py"
    code.write_text(HOSTILE_TOOLS if source == "functions" else HOSTILE_MCP)
    tools = ["--functions", str(code)] if source == "functions" else ["--mcp", f"{sys.executable} {code}"]
    term = Terminal(tmp_path, model, *tools, "--tool-choice", "required", "--tools-approve", "-n", "40",
                    "--temp", "0", "-p", "What is the weather in Paris?", model=False)
    assert term.finish() == 0, term.output[-2000:]
    screen = screen_of(b"earlier line\r\n" + term.output)
    text = shown_text(screen)
    assert screen.title == "" and "earlier line" in text
    expected = ("Sunny^[]0;PWNED^G^[[2J^M<U+009B>2J, 21 C" if source == "functions"
                else "^[]2;PWNED^G^[[1;1H^[[2Kno station")
    assert "tool call: get_weather(" in text and expected in text.replace("\n", "")


@pytest.mark.offline
@pytest.mark.whitebox  # (the download line's own class, drawn without a download)
@pytest.mark.parametrize("columns", [20, 40, 48, 80])
def test_a_line_redrawn_in_place_never_wraps_and_keeps_its_figures(columns, monkeypatch, capsys) -> None:
    """A progress line longer than the row wraps, and ``\\r`` then clearing takes back only its last row:
    the first stays above every reply. So each fits the row, its figures kept before any name."""
    import io

    from rml_chat.frontends.progress import EvalProgress
    from rml_chat.models.hub_blob import _Progress
    from rml_chat.terminal import cells

    monkeypatch.setenv("COLUMNS", str(columns))

    class Screen(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Screen()
    EvalProgress(out, after_s=0)(48, 48, 1.2)
    line = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\r", "", out.getvalue())
    assert cells(line) < columns and ("48/48" in line or columns < 24)
    bar = _Progress("org/repo/SmolLM2-135M-Instruct-a-rather-long-name-Q4_1.gguf", 98_400_000, 0)
    bar.show(98_400_000, final=True)
    drawn = capsys.readouterr().err
    shown = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\r", "", drawn).rstrip("\n")
    assert cells(shown) < columns and ("98.4/98.4 MB" in shown or columns < 24)
