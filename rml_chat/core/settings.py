"""The settings table: every flag's name, group, default, allowed values and help, as data.

The command line (``cli.py``) and the REPL's ``/set`` read the same rows, so a value is checked the
same way on both paths, and an error names the flag and what it allows::

    rml-chat: usage: --top-p must be a number from 0 to 1 (1: off), not '5'

Meanings follow llama.cpp's: ``-n -1`` generates until a stop or a full context, ``-c 0`` is the
model's training context, ``--top-k 0`` and ``--min-p 0`` are off, ``--seed -1`` is random.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


class SettingError(ValueError):
    """A value a setting does not allow; str() is the sentence "X must be …, not …"."""


def number(low: float, high: float = math.inf, *, low_open: bool = False, note: str = "") -> Callable[[str], float]:
    bounds = (f"above {low:g}" if low_open else f"{low:g} or more") if high == math.inf else f"from {low:g} to {high:g}"
    allowed = f"a number {bounds}" + (f" ({note})" if note else "")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise SettingError(allowed) from None
        if not math.isfinite(value) or value < low or value > high or (low_open and value == low):
            raise SettingError(allowed)
        return value

    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


def integer(low: int, high: int | None = None, *, note: str = "", special: int | None = None) -> Callable[[str], int]:
    """Whole numbers from ``low`` (to ``high``); ``special``, below ``low``, is allowed too (``-1``: auto)."""
    bounds = f"{low} or more" if high is None else f"from {low} to {high}"
    allowed = (f"{special} or " if special is not None else "") + f"a whole number {bounds}" + (f" ({note})" if note else "")

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise SettingError(allowed) from None
        if value != special and (value < low or (high is not None and value > high)):
            raise SettingError(allowed)
        return value

    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


def choice(*options: str) -> Callable[[str], str]:
    allowed = "one of " + ", ".join(options)

    def parse(text: str) -> str:
        if text not in options:
            raise SettingError(allowed)
        return text

    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


def nonempty(text: str) -> str:
    if not text:
        raise SettingError("a text that is not empty")
    return text


nonempty.allowed = "a text that is not empty"  # type: ignore[attr-defined]


def word(text: str) -> str:
    """A lower-case word such as a template's effort levels (``low``, ``no_think``)."""
    if not (0 < len(text) <= 24 and text.replace("_", "").isalpha() and text.islower() and text.isascii()):
        raise SettingError(word.allowed)  # type: ignore[attr-defined]
    return text


word.allowed = "a lower-case word (the template's: gpt-oss takes low, medium, high)"  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Setting:
    name: str                      # the attribute: args.<name>, Sampling.<name>
    flags: tuple[str, ...]
    parse: Callable[[str], object]
    default: object
    group: str                     # the --help group
    help: str
    settable: bool = False         # /set NAME VALUE in the REPL changes it
    repeat: bool = False           # the flag may be given more than once (a list)
    metavar: str = "X"
    default_text: str = ""         # the default as --help says it, when not the value itself
    bare: str | None = None        # what the flag alone means (``--hidethinking`` is ``--hidethinking on``)

    @property
    def flag(self) -> str:
        return self.flags[-1]

    def check(self, text: str, flag: str | None = None) -> object:
        """The value of ``text``, or SettingError naming the flag and what it allows."""
        try:
            return self.parse(text)
        except SettingError as err:
            raise SettingError(f"{flag or self.flag} must be {err}, not {text!r}") from None


SAMPLING, CONTEXT, OUTPUT = "sampling (llama.cpp's meanings and defaults)", "context and threads", "output"
SETTINGS: tuple[Setting, ...] = (
    Setting("temp", ("--temp",), number(0, note="0: greedy"), 0.8, SAMPLING, "temperature", True, metavar="T"),
    Setting("top_k", ("--top-k",), integer(0, note="0: off"), 40, SAMPLING, "keep the k most likely tokens", True,
            metavar="K"),
    Setting("top_p", ("--top-p",), number(0, 1, note="1: off"), 0.95, SAMPLING,
            "keep the most likely tokens up to this total probability", True, metavar="P"),
    Setting("min_p", ("--min-p",), number(0, 1, note="0: off"), 0.05, SAMPLING,
            "drop tokens less likely than this times the most likely one", True, metavar="P"),
    Setting("repeat_penalty", ("--repeat-penalty",), number(0, low_open=True, note="1: off"), 1.0, SAMPLING,
            "penalise tokens already in the last 64", True, metavar="R"),
    Setting("seed", ("--seed",), integer(0, 2**32 - 1, special=-1, note="-1: random"), -1, SAMPLING,
            "sampling seed", True, metavar="N"),
    Setting("max_tokens", ("-n", "--max-tokens"), integer(0, special=-1, note="-1: until a stop or a full context"),
            -1, SAMPLING, "the reply's length limit", True, metavar="N"),
    Setting("reasoning_budget", ("--reasoning-budget",), integer(0, special=-1, note="-1: no limit, 0: no thought"),
            -1, SAMPLING, "reasoning models: thought tokens before the thought is closed and the model answers",
            True, metavar="N"),
    Setting("ctx_size", ("-c", "--ctx-size"), integer(0, note="0: the model's training context"), 4096, CONTEXT,
            "context size in tokens (llama.cpp allocates in steps of 256)", metavar="N"),
    Setting("overflow", ("--overflow",), choice("drop-oldest", "error"), "drop-oldest", CONTEXT,
            "when the conversation outgrows the context: drop the oldest exchanges, or refuse the turn",
            metavar="POLICY"),
    Setting("context_shift", ("--context-shift",), choice("on", "off"), "off", CONTEXT,
            "when a reply fills the context: the oldest exchanges leave the model's window and the reply goes on "
            "(off: the reply is cut)", True, metavar="on|off"),
    Setting("prompt_cache", ("--prompt-cache",), choice("on", "off"), "on", CONTEXT,
            "-p, --batch and --check: keep llama.cpp's state after a run, and restore the prefix a later prompt "
            "shares with it ($RML_CHAT_PROMPT_CACHE: off, or the folder; $RML_CHAT_PROMPT_CACHE_MAX: its size, 2G)",
            metavar="on|off"),
    Setting("n_gpu_layers", ("-ngl", "--n-gpu-layers"), integer(0, special=-1, note="-1: all of them"), -1, CONTEXT,
            "layers on the GPU, with a GPU build of llama.cpp (llama.cpp's meaning and default)", metavar="N"),
    Setting("split_mode", ("-sm", "--split-mode"), choice("none", "layer", "row"), "layer", CONTEXT,
            "how layers go over several GPUs (llama.cpp's)", metavar="MODE"),
    Setting("parallel", ("-np", "--parallel"), integer(1, 64), 1, CONTEXT,
            "--batch: lines decoded together, each a sequence of one context (llama-server's slots)", metavar="N"),
    Setting("threads", ("-t", "--threads"), integer(1, 512, special=-1, note="-1: all cores"), -1, CONTEXT,
            "threads for generation", metavar="N"),
    Setting("threads_batch", ("-tb", "--threads-batch"), integer(1, 512, special=-1,
                                                                 note="-1: the same as --threads"),
            -1, CONTEXT, "threads for prompt evaluation", metavar="N"),
    Setting("think", ("--think",), choice("on", "off"), None, OUTPUT,
            "reasoning models whose template has a thinking switch: thinking on or off", True, metavar="on|off",
            default_text="the template's"),
    Setting("reasoning_effort", ("--reasoning-effort",), word, None, OUTPUT,
            "reasoning models whose template reads an effort (gpt-oss: low, medium, high): how hard it thinks",
            True, metavar="LEVEL", default_text="the template's"),
    Setting("hide_thinking", ("--hidethinking",), choice("on", "off"), "off", OUTPUT,
            "reasoning models: leave the thought out of what is shown (it stays in --json and the chat)", True,
            metavar="on|off", bare="on"),
    Setting("thinking_display", ("--thinking-display",), choice("full", "line"), "full", OUTPUT,
            "the chat: a thought shown whole and dim, or as one line that follows it (/thought shows it whole)",
            True, metavar="full|line"),
    Setting("stop", ("--stop",), nonempty, [], OUTPUT, "stop when the reply writes this text (repeatable)",
            repeat=True, metavar="TEXT", default_text="the model's stop tokens only"),
)
BY_NAME = {s.name: s for s in SETTINGS}


def settable(name: str) -> Setting | None:
    """The row ``/set NAME`` changes (``top-k``, ``top_k`` and ``--top-k`` all name it), if any."""
    key = name.lstrip("-").replace("-", "_")
    key = {"n": "max_tokens", "hidethinking": "hide_thinking"}.get(key, key)
    row = BY_NAME.get(key)
    return row if row is not None and row.settable else None
