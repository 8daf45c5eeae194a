"""Replies drawn as Markdown: a real reply (a grammar makes SmolLM2 write it) in a real pty, read off a
terminal emulator (pyte) at 40, 80 and 120 columns and after a resize — headings, a list, a table, a
highlighted Python fence that is folded, never wrapped, and a long paragraph wrapped at spaces; the saved
chat and ``/raw`` hold the model's text byte for byte. The streaming view itself: any cut of the text into
pieces draws the same screen, and what it writes grows with the reply, never with the screen."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time

import pyte
import pytest
from conftest import model_path
from test_repl import Terminal

from rml_chat.frontends.markdown_view import MarkdownView

PARAGRAPH = ("Tea is **simple** to make, but a *good* cup takes care: use `fresh` water, warm the pot first, and "
             "steep it for as long as the leaves ask, never longer.")
CODE_LINE = ('    return f"steeped for {minutes} minutes, " + "which is a line long enough to be folded at every width '
             'we try, even 120"')
REPLY = ("# Making tea\n\n" + PARAGRAPH + "\n\n## Steps\n\n1. Boil the water.\n- Use loose leaves\n\n"
         "| Tea | Time |\n|---|--:|\n| Green | 2 min |\n| Black | 4 min |\n\n"
         "```python\ndef steep(minutes: int) -> str:\n" + CODE_LINE + "\n```\n\nA title \x1b]0;PWNED\x07 stays put.")
TOKENS = 700


def gbnf_literal(text: str) -> str:
    """A GBNF grammar whose one sentence is ``text`` (llama.cpp's string escapes)."""
    escaped = "".join({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\x1b": "\\x1b", "\x07": "\\x07"}.get(c, c) for c in text)
    return f'root ::= "{escaped}"'


class SizedTerminal(Terminal):
    """rml-chat in a pty of ``columns`` x ``lines``, with a terminal that draws (not ``TERM=dumb``)."""

    def __init__(self, tmp_path, columns: int, *args: str, lines: int = 120, env: dict | None = None):
        environment = {name: value for name, value in os.environ.items() if name != "NO_COLOR"}
        environment.update({"RML_CHAT_HISTORY": str(tmp_path / "history"), "TERM": "xterm-256color",
                            "PROMPT_TOOLKIT_NO_CPR": "1", "RML_CHAT_SESSIONS": str(tmp_path / "sessions"), **(env or {})})
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
            os.execve(sys.executable, [sys.executable, "-m", "rml_chat", str(model_path("smollm2")), *args],
                      environment)
        self.output = b""
        self.screen = pyte.Screen(columns, lines)
        self.stream = pyte.ByteStream(self.screen)
        self.fed = 0

    def at_prompt(self, output: bytes) -> bool:
        """prompt_toolkit has drawn the prompt and shown the cursor on its row."""
        if not output.endswith(b"\x1b[?25h"):
            return False
        rows = self.drawn()
        return rows[self.screen.cursor.y].startswith(">")

    def prompt_ready(self) -> None:
        self.read_until(self.at_prompt)
        time.sleep(0.3)

    def ask(self, keys: bytes, answered: bytes) -> None:
        start = len(self.output)
        self.send(keys + b"\r")
        self.read_until(lambda out: answered in out[start:] and self.at_prompt(out))
        time.sleep(0.3)

    def resize(self, columns: int, lines: int = 120) -> None:
        self.drawn()
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))  # (SIGWINCH to it)
        self.screen.resize(lines, columns)

    def drawn(self) -> list[str]:
        """The screen's rows after everything written so far."""
        self.stream.feed(self.output[self.fed:])
        self.fed = len(self.output)
        return [row.rstrip() for row in self.screen.display]


def reply_rows(rows: list[str]) -> list[str]:
    """The rows of the drawn reply: from its first heading to its last line."""
    start = max(i for i, row in enumerate(rows) if row == "Making tea")
    end = max(i for i, row in enumerate(rows) if "stays put." in row)
    return rows[start:end + 1]


def check_drawn(rows: list[str], screen, columns: int) -> None:
    assert all(len(row) < columns for row in rows)  # (one column kept free: no row ends in a pending wrap)
    assert rows[0] == "Making tea" and "Steps" in rows and not any(row.startswith("#") for row in rows)
    text = " ".join(rows)
    assert "**" not in text and "`fresh`" not in text
    start = rows.index("Making tea") + 2
    paragraph = rows[start:rows.index("", start)]
    words = PARAGRAPH.replace("**", "").replace("*", "").replace("`", "").split()
    assert " ".join(paragraph).split() == words  # every word whole, in order: wrapped at spaces only
    if columns < len(PARAGRAPH):
        assert len(paragraph) > 1
    assert "1. Boil the water." in rows and "• Use loose leaves" in rows
    table = [row for row in rows if "│" in row or "┼" in row]
    assert re.fullmatch(r"Tea\s+│\s+Time", table[0]) and re.fullmatch(r"Green\s+│\s+2 min", table[2]), table
    code = rows.index("```python")
    assert rows[code + 1] == "  def steep(minutes: int) -> str:"
    folded = [rows[code + 2]] + [row for row in rows[code + 3:] if row.startswith("↪ ")]
    assert rows[code + 2 + len(folded)] == "```"
    at = max(i for i, row in enumerate(screen.display) if row.rstrip() == folded[0])  # (this reply's, the last)
    unstripped = [row[:columns - 1] for row in screen.display[at:at + len(folded)]]  # (a fold may end in a space)
    unstripped[-1] = unstripped[-1].rstrip()
    assert "".join(row[2:] for row in unstripped) == CODE_LINE  # folded, not one character lost
    assert len(folded) == -(-len(CODE_LINE) // (columns - 3))  # (each row: the width, less a free column and "↪ ")
    assert "A title ^[]0;PWNED^G stays put." in rows[-1] and screen.title == ""


def row_at(screen, text: str) -> int:
    return max(i for i, row in enumerate(screen.display) if row.rstrip() == text)


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_a_reply_is_drawn_wrapped_and_highlighted_at_each_width(tmp_path, columns) -> None:
    term = SizedTerminal(tmp_path, columns, "--grammar", gbnf_literal(REPLY), "-n", str(TOKENS), "--temp", "0")
    term.prompt_ready()
    term.ask(b"How do I make tea?", b"stays put.")
    rows = reply_rows(term.drawn())
    check_drawn(rows, term.screen, columns)
    screen = term.screen
    heading = screen.buffer[row_at(screen, "Making tea")]
    assert heading[0].bold and heading[0].fg != "default"
    header = next(i for i, row in enumerate(screen.display) if re.fullmatch(r"Tea\s+│\s+Time", row.rstrip()))
    assert screen.buffer[header][0].bold
    code_row = screen.buffer[row_at(screen, "  def steep(minutes: int) -> str:")]
    assert code_row[2].fg != "default" and code_row[2].fg != code_row[6].fg  # "def" a keyword, "steep" a name
    saved = tmp_path / "chat.json"
    term.ask(f"/save {saved}".encode(), b"saved 2 messages")
    assert json.loads(saved.read_text())["messages"][1]["content"] == REPLY  # the model's text, byte for byte
    term.ask(b"/raw", b"stays put.")
    raw = term.drawn()
    assert "## Steps" in raw and "| Green | 2 min |" in raw and "```python" in raw
    assert term.finish() == 0


def test_a_resized_terminal_is_followed_and_markdown_off_shows_the_text(tmp_path) -> None:
    term = SizedTerminal(tmp_path, 100, "--grammar", gbnf_literal(REPLY), "-n", str(TOKENS), "--temp", "0")
    term.prompt_ready()
    term.ask(b"How do I make tea?", b"stays put.")
    check_drawn(reply_rows(term.drawn()), term.screen, 100)
    term.resize(50)
    term.ask(b"And again?", b"stays put.")
    check_drawn(reply_rows(term.drawn()), term.screen, 50)
    term.ask(b"/set markdown off", b"markdown")
    term.ask(b"Again?", b"stays put.")
    rows = term.drawn()
    assert "## Steps" in rows and "| Tea | Time |" in rows  # as written
    assert term.finish() == 0


def test_no_color_keeps_the_layout_and_takes_the_colours_out(tmp_path) -> None:
    term = SizedTerminal(tmp_path, 80, "--grammar", gbnf_literal(REPLY), "-n", str(TOKENS), "--temp", "0",
                         env={"NO_COLOR": "1"})
    term.prompt_ready()
    term.ask(b"How do I make tea?", b"stays put.")
    rows = reply_rows(term.drawn())
    check_drawn(rows, term.screen, 80)
    cells = [char for row in term.screen.buffer.values() for char in row.values()]
    assert {char.fg for char in cells} == {"default"}
    assert term.screen.buffer[row_at(term.screen, "Making tea")][0].bold  # (bold is not a colour)
    assert term.finish() == 0


# ----- the view alone ------------------------------------------------------------------------------------

def drawn(text: str, pieces: int, columns: int = 60, color: bool = True) -> tuple[list[str], str]:
    out = io.StringIO()
    view = MarkdownView(out, color=color, columns=lambda: columns)
    for at in range(0, len(text), pieces):
        view.write(text[at:at + pieces])
    view.end()
    screen = pyte.Screen(columns, 400)
    pyte.Stream(screen).feed(out.getvalue().replace("\n", "\r\n"))
    return [row.rstrip() for row in screen.display], out.getvalue()


@pytest.mark.offline
@pytest.mark.parametrize("pieces", [1, 2, 3, 7, 1000])
def test_any_cut_into_pieces_draws_the_same_screen(pieces) -> None:
    assert drawn(REPLY, pieces)[0] == drawn(REPLY, len(REPLY))[0]
    assert "A title ^[]0;PWNED^G stays put." in drawn(REPLY, pieces)[0]


MARKDOWN_PIECES = ["a", "word", " ", "  ", "\n", "\n\n", "*", "**", "_", "`", "```", "```python\n", "# ", "## ", "- ",
                   "  - ", "1. ", "> ", ">", "| a | b |\n", "|---|---|\n", "---\n", "[x](http://e.com)", "~~", "é",
                   "e\u0301", "中文", "👋", "\t", "x" * 30, "http://example.com/a_b", "<", "\\"]


@pytest.mark.offline
def test_random_replies_draw_the_same_screen_whole_and_in_pieces() -> None:
    """Replies put together at random (seeded) from Markdown's marks, words longer than the row and wide
    characters: the screen is the same whether the reply comes whole or in pieces of 1, 2, 3 or 7. (A word
    that does not fit after other text starts the next row either way, and ``> >`` is a quote in a quote.)
    Terminals as narrow as 2 columns too (a split pane): a word moved to the next row is rubbed out where it
    stood, which works only if the terminal never wrapped it there itself."""
    import random

    chance = random.Random(1207)
    for _ in range(400):
        reply = "".join(chance.choice(MARKDOWN_PIECES) for _ in range(chance.randrange(1, 30)))
        columns = chance.choice([2, 5, 10, 11, 20, 33, 80])
        whole = drawn(reply, len(reply), columns)[0]
        for pieces in (1, 2, 3, 7):
            assert drawn(reply, pieces, columns)[0] == whole, (reply, columns, pieces)
    assert [row for row in drawn("See " + "x" * 30, 34, 20)[0] if row] == ["See", "x" * 19, "x" * 11]
    assert [row for row in drawn("> > deep", 8, 20)[0] if row] == ["▌ ▌ deep"]


@pytest.mark.offline
def test_what_is_written_grows_with_the_reply_not_with_the_screen() -> None:
    """A 2,000-line reply written a token at a time: the bytes out stay a small multiple of the bytes in,
    so no token draws the screen (or the reply) again."""
    lines = [f"Line {n} of a **long** reply, with `code` and a [link](https://x.org/{n})." for n in range(1000)]
    code = ["```python"] + [f"value_{n} = compute({n}, 'text')  # a comment" for n in range(998)] + ["```"]
    text = "\n".join(lines + code) + "\n"
    rows, written = drawn(text, 4, columns=100)
    assert text.count("\n") == 2000
    styled_per_line = len(written) / len(text)
    assert styled_per_line < 4, styled_per_line
    plain_rows, plain = drawn(text, 4, columns=100, color=False)
    assert len(plain) < 1.3 * len(text)


@pytest.mark.offline
def test_a_table_with_more_columns_than_the_terminal_has_room_for_is_its_markdown_folded() -> None:
    """Six columns of at least 3 cells and 5 gaps of 3 need 33 columns: at 40 they are columns, at 30 the
    rows are the Markdown, folded at spaces (before, lines wider than the terminal broke the layout)."""
    table = ("| alpha | beta | gamma | delta | epsilon | zeta |\n|---|---|---|---|---|---|\n"
             "| 1 | 2 | 3 | 4 | 5 | a\\|b |\n\nafter\n")
    rows, _ = drawn(table, 3, columns=40, color=False)
    assert rows[:4] == ["alph │ beta │ gamm │ delt │ epsi │ zeta", "a    │      │ a    │ a    │ lon  │",
                        "─────┼──────┼──────┼──────┼──────┼─────", "1    │ 2    │ 3    │ 4    │ 5    │ a|b"]
    rows, _ = drawn(table, 3, columns=30, color=False)
    assert rows[:7] == ["| alpha | beta | gamma |", "delta | epsilon | zeta |", "| --- | --- | --- | --- | ---",
                        "| --- |", "| 1 | 2 | 3 | 4 | 5 | a\\|b |", "", "after"]


@pytest.mark.offline
def test_a_table_that_proves_not_to_be_one_is_text_and_an_unclosed_fence_ends_with_the_reply() -> None:
    rows, _ = drawn("| not a table\nplain **text**\n```sh\nls -l", 2, color=False)
    assert rows[:4] == ["| not a table", "plain text", "```sh", "  ls -l"]
    rows, _ = drawn("* * *\n- item\n10. ten\n> quoted *words*\n", 1, columns=30, color=False)
    assert rows[:4] == ["─" * 29, "• item", "10. ten", "▌ quoted words"]


def test_a_script_draws_on_a_terminal_and_keeps_the_exact_text_in_a_pipe(tmp_path) -> None:
    args = ["--grammar", gbnf_literal(REPLY), "-n", str(TOKENS), "--temp", "0", "-p", "How do I make tea?"]
    term = SizedTerminal(tmp_path, 80, *args)
    term.read_until(lambda out: b"stays put." in out)
    assert term.finish() == 0
    check_drawn(reply_rows(term.drawn()), term.screen, 80)
    piped = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), *args], capture_output=True,
                           timeout=300)
    assert piped.returncode == 0 and piped.stdout == (REPLY + "\n").encode()  # (the model's bytes, not drawn)


# ----- hostile and random replies --------------------------------------------------------------------------

HOSTILE = ["*" * 100_000, "_" * 100_000, "`" * 100_000, "~" * 60_000, "[" * 50_000, "|" * 50_000,
           "> " * 200 + "word " * 50, ">" * 300 + " " + "x" * 5_000, "    " * 100 + "- " + "y" * 3_000,
           "1. " * 500 + "z", "a" * 100_000, "```python\n" + " " * 20_000 + "x\n'" + "\\" * 20_000 + "\n```\n",
           "* " * 5_000, "- - - " * 3_000, "#" * 10_000 + " title", "| a | b |\n|---|---|\n" + "| x |" * 20_000,
           "\u202egnp.exe\u2066 and \x1b]52;c;cHduZWQ=\x07 and \x9b31m and \u200b\u2060", "👩‍💻" * 5_000,
           "\u0301" * 5_000, "\t\r\x00\x7f" * 1_000]
ALPHABET = list("ab *_`~[]()|>#-+1.!\\\n ") + ["```", "**", "\n\n", "\x1b[31m", "\u202e", "漢", "👋", "\u0301"]


def _screen_safe(written: str) -> str:
    """The output less the view's own sequences (SGR, cursor moves, erasing): what else reaches the screen."""
    return re.sub(r"\r?\x1b\[[0-9;]*[mDAJK]", "", written)  # (a code line's redraw starts at the row's start)


@pytest.mark.offline
def test_hostile_and_random_replies_end_in_bounded_time_and_drive_nothing() -> None:
    """Runs of a mark 100,000 long, prefixes wider than the row, a 100,000-character word, code that makes
    a lexer backtrack, escapes and format characters, and a thousand random replies, at 20 to 200 columns in
    random pieces: each is drawn within seconds, and no escape, control or format character of the reply
    reaches the screen raw."""
    import random
    import unicodedata

    chance = random.Random(58)
    replies = HOSTILE + ["".join(chance.choice(ALPHABET) for _ in range(chance.randint(1, 400))) for _ in range(1000)]
    for n, reply in enumerate(replies):
        columns = chance.choice([20, 21, 33, 57, 80, 120, 200])
        out = io.StringIO()
        view = MarkdownView(out, color=n % 2 == 0, columns=lambda: columns)  # noqa: B023  (this reply's width)
        began, size = time.monotonic(), chance.choice([1, 3, 7, 64, 4096])
        for at in range(0, len(reply), size):
            view.write(reply[at:at + size])
        view.end()
        assert time.monotonic() - began < 20, (n, reply[:40])  # (a bound on a hang, not a speed test)
        shown = _screen_safe(out.getvalue())
        raw = [c for c in shown if c != "\n" and (unicodedata.category(c) in ("Cc", "Cf") and c not in "\u200c\u200d")]
        assert not raw, (n, reply[:40], raw[:5])


def _block(rows: list[str], command: str) -> list[str]:
    """The rows a command printed: after the prompt's row that typed it, up to the next prompt."""
    start = max(i for i, row in enumerate(rows) if row == f"> {command}") + 1
    end = next(i for i in range(start, len(rows)) if rows[i].startswith(">"))
    return rows[start:end]


def test_the_apps_own_lines_fold_at_spaces_as_a_reply_does(tmp_path) -> None:
    """/help and /info, and a note, at 40 columns: every row fits, and the words are those a 200-column
    terminal shows, in order and each whole but one wider than a row (a terminal left to fold them cuts
    words where its rows end)."""
    commands = {"/help": b"Ctrl-D     leave", "/info": b"autosave:", "/set top-k lots": b"'lots'"}
    blocks = {}
    for columns in (200, 40):
        term = SizedTerminal(tmp_path, columns, "-n", "8", lines=400)
        term.prompt_ready()
        for command, said in commands.items():
            term.ask(command.encode(), said)
        rows = term.drawn()
        blocks[columns] = {command: _block(rows, command) for command in commands}
        assert term.finish() == 0
    for command in commands:
        narrow, wide = ([re.sub(r"\d", "0", row) for row in blocks[size][command]] for size in (40, 200))  # (the
        # autosave's name holds the time)
        assert all(len(row) < 40 for row in narrow), narrow
        assert "".join(" ".join(narrow).split()) == "".join(" ".join(wide).split()), command  # (nothing lost)
        whole, too_wide = set(" ".join(wide).split()), [word for word in " ".join(wide).split() if len(word) > 39]
        assert all(word in whole or any(word in wider for wider in too_wide) for word in " ".join(narrow).split())
        assert len(narrow) > len(wide)
    said = blocks[40]["/help"]
    assert said[said.index(next(row for row in said if row.strip().startswith("/regen"))) + 1].startswith("    ")
