"""The settings table: every flag's name, group, default, allowed values and help, as data.

The command line (``cli.py``) and the REPL's ``/set`` read the same rows, so a value is checked the
same way on both paths, and an error names the flag and what it allows::

    rml-chat: usage: --top-p must be a number from 0 to 1 (1: off), not '5'

Meanings follow llama.cpp's: ``-n -1`` generates until a stop or a full context, ``-c 0`` is the
model's training context, ``--top-k 0`` and ``--min-p 0`` are off, ``--seed -1`` is random.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..engines.base import DRY_BREAKERS, Sampling
from ..engines.sampler_chain import parse_order


class SettingError(ValueError):
    """A value a setting does not allow; str() is the sentence "X must be …, not …"."""


def number(low: float, high: float = math.inf, *, low_open: bool = False, note: str = "",
           special: float | None = None) -> Callable[[str], float]:
    """Finite numbers from ``low`` (to ``high``); ``special``, below ``low``, is allowed too (``-1``: off)."""
    bounds = ("" if low == -math.inf else (f" above {low:g}" if low_open else f" {low:g} or more")) \
        if high == math.inf else f" from {low:g} to {high:g}"
    allowed = (f"{special:g} or " if special is not None else "") + ("a finite number" if low == -math.inf else
                                                                     "a number") + bounds + (f" ({note})" if note else "")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise SettingError(allowed) from None
        if value == special:
            return value
        if not math.isfinite(value) or value < low or value > high or (low_open and value == low):
            raise SettingError(allowed)
        return value

    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


INT32_MAX = 2**31 - 1  # what llama.cpp's int32_t settings hold (top-k, the penalties' windows, the context)


def integer(low: int, high: int = INT32_MAX, *, note: str = "", special: int | None = None) -> Callable[[str], int]:
    """Whole numbers from ``low`` to ``high`` (by default the most a C ``int32_t`` holds: past it, llama.cpp
    would take another number); ``special``, below ``low``, is allowed too (``-1``: auto)."""
    bounds = f"from {low} to {high}"
    allowed = (f"{special} or " if special is not None else "") + f"a whole number {bounds}" + (f" ({note})" if note else "")

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise SettingError(allowed) from None
        if value != special and not low <= value <= high:
            raise SettingError(allowed)
        return value

    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


#: the words llama.cpp's switches take for on, off and auto (``common_arg_utils::is_truthy`` and its kin):
#: ``-fa true`` and ollama's ``--think=false`` mean there what ``-fa on`` and ``--think off`` mean here
SWITCH_WORDS = {**dict.fromkeys(("enabled", "true", "1"), "on"), **dict.fromkeys(("disabled", "false", "0"), "off"),
                "-1": "auto"}


def choice(*options: str, several: bool = False) -> Callable[[str], str]:
    """One of ``options``; with ``several``, also a comma-separated list of them (llama.cpp's --spec-type),
    kept as the text given. A switch (``on``, ``off``, ``auto``) takes llama.cpp's other words for them too,
    and keeps the word it is::

        >>> choice("on", "off")("true"), choice("on", "off", "auto")("-1")
        ('on', 'auto')
    """
    allowed = "one of " + ", ".join(options) + (", or several of them, comma-separated" if several else "")

    def parse(text: str) -> str:
        if not several and SWITCH_WORDS.get(text) in options:
            text = SWITCH_WORDS[text]
        if not all(name in options for name in (text.split(",") if several else [text])):
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
    off_flag: str | None = None    # llama.cpp's ``--no-X``: that flag alone is ``X off``
    off_flag_of: str = "llama.cpp"  # whose flag ``off_flag`` is (ollama's ``--nowordwrap``)

    @property
    def flag(self) -> str:
        return self.flags[-1]

    def check(self, text: str, flag: str | None = None) -> object:
        """The value of ``text``, or SettingError naming the flag and what it allows."""
        try:
            return self.parse(text)
        except SettingError as err:
            raise SettingError(f"{flag or self.flag} must be {err}, not {text!r}") from None


def sampler_order(text: str) -> tuple[str, ...]:
    """``--samplers``/``--sampler-seq``: llama.cpp's sampler names separated by ``;``, or their letters."""
    try:
        return parse_order(text)
    except ValueError as err:
        raise SettingError(str(err)) from None


sampler_order.allowed = "names separated by ; or letters (llama.cpp's)"  # type: ignore[attr-defined]


def token_bias(text: str) -> tuple[int, float]:
    """``--logit-bias ID+BIAS`` or ``ID-BIAS`` (llama.cpp's form; ``ID-inf``: never)."""
    match = re.fullmatch(r"\s*(\d+)\s*([+-])\s*(\S+)\s*", text)
    try:
        bias = float(match.group(3)) if match else math.nan
    except ValueError:
        bias = math.nan
    if match is None or math.isnan(bias) or bias < 0 or int(match.group(1)) > INT32_MAX:
        raise SettingError(token_bias.allowed)  # type: ignore[attr-defined]
    return int(match.group(1)), bias if match.group(2) == "+" else -bias


token_bias.allowed = "TOKEN_ID+BIAS or TOKEN_ID-BIAS (15043+1, 2-inf)"  # type: ignore[attr-defined]


def bias_problem(biases: Iterable[tuple[int, float]], n_vocab: int) -> str:
    """Why a logit bias can't apply to a vocabulary of ``n_vocab`` tokens ("": it can), for the flag and
    ``/set`` alike::

        >>> bias_problem([(5, 1.0), (49152, -1.0)], 49152)
        'logit-bias 49152-1: the vocabulary has 49152 tokens (ids 0 to 49151)'
    """
    for token, bias in biases:
        if token >= n_vocab:
            return f"logit-bias {token}{bias:+g}: the vocabulary has {n_vocab} tokens (ids 0 to {n_vocab - 1})"
    return ""

_D = Sampling()  # llama.cpp's defaults (engines/base.py)
SAMPLING, CONTEXT, OUTPUT = "sampling (llama.cpp's meanings and defaults)", "context and threads", "output"
SETTINGS: tuple[Setting, ...] = (
    Setting("temp", ("--temperature", "--temp"), number(0, note="0: greedy"), _D.temp, SAMPLING, "temperature", True,
            metavar="T"),
    Setting("top_k", ("--top-k",), integer(0, note="0: off"), _D.top_k, SAMPLING, "keep the k most likely tokens", True,
            metavar="K"),
    Setting("top_p", ("--top-p",), number(0, 1, note="1: off"), _D.top_p, SAMPLING,
            "keep the most likely tokens up to this total probability", True, metavar="P"),
    Setting("min_p", ("--min-p",), number(0, 1, note="0: off"), _D.min_p, SAMPLING,
            "drop tokens less likely than this times the most likely one", True, metavar="P"),
    Setting("typical_p", ("--typical-p", "--typical"), number(0, 1, note="1: off"), _D.typical_p, SAMPLING,
            "locally typical sampling", True, metavar="P"),
    Setting("top_n_sigma", ("--top-n-sigma", "--top-nsigma"), number(0, special=-1, note="-1: off"), _D.top_n_sigma,
            SAMPLING, "keep tokens within n standard deviations of the most likely logit", True, metavar="N"),
    Setting("xtc_probability", ("--xtc-probability",), number(0, 1, note="0: off"), _D.xtc_probability, SAMPLING,
            "XTC: how often the most likely tokens are excluded", True, metavar="P"),
    Setting("xtc_threshold", ("--xtc-threshold",), number(0, 1, note="above 0.5: off"), _D.xtc_threshold, SAMPLING,
            "XTC: tokens at least this likely are excluded, all but the least likely of them", True, metavar="T"),
    Setting("repeat_last_n", ("--repeat-last-n",), integer(0, note="0: off"), _D.repeat_last_n, SAMPLING,
            "the last tokens the penalties look at", True, metavar="N"),
    Setting("repeat_penalty", ("--repeat-penalty",), number(0, low_open=True, note="1: off"), _D.repeat_penalty,
            SAMPLING, "penalise tokens already among the last --repeat-last-n", True, metavar="R"),
    Setting("presence_penalty", ("--presence-penalty",), number(-math.inf, note="0: off"), _D.presence_penalty,
            SAMPLING, "subtract this from tokens among the last --repeat-last-n", True, metavar="P"),
    Setting("frequency_penalty", ("--frequency-penalty",), number(-math.inf, note="0: off"), _D.frequency_penalty,
            SAMPLING, "subtract this times their count from tokens among the last --repeat-last-n", True, metavar="F"),
    Setting("dry_multiplier", ("--dry-multiplier",), number(0, note="0: off"), _D.dry_multiplier, SAMPLING,
            "DRY: penalise a token that would extend a repeated sequence", True, metavar="M"),
    Setting("dry_base", ("--dry-base",), number(1), _D.dry_base, SAMPLING,
            "DRY: the penalty grows as base ^ (repeated length - allowed length)", True, metavar="B"),
    Setting("dry_allowed_length", ("--dry-allowed-length",), integer(0), _D.dry_allowed_length, SAMPLING,
            "DRY: repeated sequences this long go unpenalised", True, metavar="N"),
    Setting("dry_penalty_last_n", ("--dry-penalty-last-n",), integer(0, note="0: off"), _D.dry_penalty_last_n,
            SAMPLING, "DRY: the last tokens it looks at", True, metavar="N"),
    Setting("dry_sequence_breakers", ("--dry-sequence-breaker",), nonempty, [], SAMPLING,
            "DRY: a text that ends a repeated sequence; the first one given replaces the defaults, none: no breakers "
            "(repeatable)", True, repeat=True, metavar="TEXT", default_text="'\\n' ':' '\"' '*'"),
    Setting("dynatemp_range", ("--dynatemp-range",), number(0, note="0: off"), _D.dynatemp_range, SAMPLING,
            "dynamic temperature: it varies this much either side of --temp, with the entropy", True, metavar="R"),
    Setting("dynatemp_exp", ("--dynatemp-exp",), number(0), _D.dynatemp_exp, SAMPLING,
            "dynamic temperature: how entropy maps to it", True, metavar="E"),
    Setting("mirostat", ("--mirostat",), integer(0, 2, note="0: off, 1: Mirostat, 2: Mirostat 2.0; top-k, top-p and "
            "the rest are then left out"), _D.mirostat, SAMPLING, "Mirostat sampling", True, metavar="N"),
    Setting("mirostat_lr", ("--mirostat-lr",), number(0, low_open=True), _D.mirostat_lr, SAMPLING,
            "Mirostat's learning rate (eta)", True, metavar="ETA"),
    Setting("mirostat_ent", ("--mirostat-ent",), number(0, low_open=True), _D.mirostat_ent, SAMPLING,
            "Mirostat's target entropy (tau)", True, metavar="TAU"),
    Setting("logit_bias", ("-l", "--logit-bias"), token_bias, [], SAMPLING,
            "add BIAS to a token's logit (repeatable)", True, repeat=True, metavar="ID+BIAS", default_text="none"),
    Setting("samplers", ("--sampler-seq", "--samplers"), sampler_order, _D.samplers, SAMPLING,
            "the samplers and their order", True, metavar="ORDER", default_text=";".join(_D.samplers)),
    Setting("ignore_eos", ("--ignore-eos",), choice("on", "off"), "off", SAMPLING,
            "never sample the model's stop tokens: the reply runs to -n or a full context", True, metavar="on|off",
            bare="on"),
    Setting("backend_sampling", ("-bs", "--backend-sampling"), choice("on", "off"), "off", SAMPLING,
            "llama.cpp's backend sampling (experimental there too): the sampler chain runs in the model's graph, on "
            "the GPU where the model is, instead of on the CPU after it; not with a grammar (docs/sampling.md)",
            True, metavar="on|off", bare="on"),
    Setting("repeat_guard", ("--repeat-guard",), integer(0, note="0: off"), _D.repeat_guard, SAMPLING,
            "rml-chat's own: end a reply whose tail has repeated one span for this many tokens (stop reason "
            "repetition)", True, metavar="N"),
    Setting("seed", ("-s", "--seed"), integer(0, 2**32 - 2, special=-1, note="-1: random; 4294967295 is llama.cpp's "
                                                                     "random too"), _D.seed, SAMPLING,
            "sampling seed", True, metavar="N"),
    Setting("max_tokens", ("-n", "--max-tokens"), integer(0, special=-1, note="-1: until a stop or a full context"),
            _D.max_tokens, SAMPLING, "the reply's length limit", True, metavar="N"),
    Setting("reasoning_budget", ("--reasoning-budget",), integer(0, special=-1, note="-1: no limit, 0: no thought"),
            _D.reasoning_budget, SAMPLING, "reasoning models: thought tokens before the thought is closed and the model answers",
            True, metavar="N"),
    Setting("ctx_size", ("-c", "--ctx-size"), integer(0, note="0: the model's training context"), 4096, CONTEXT,
            "context size in tokens (llama.cpp allocates in steps of 256)", metavar="N"),
    Setting("overflow", ("--overflow",), choice("drop-oldest", "error"), "drop-oldest", CONTEXT,
            "when the conversation outgrows the context: drop the oldest exchanges, or refuse the turn",
            metavar="POLICY"),
    Setting("context_shift", ("--context-shift",), choice("on", "off"), "off", CONTEXT,
            "when a reply fills the context: the oldest exchanges leave the model's window and the reply goes on "
            "(off: the reply is cut)", True, metavar="on|off", bare="on", off_flag="--no-context-shift"),
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
    Setting("flash_attn", ("-fa", "--flash-attn"), choice("on", "off", "auto"), "auto", CONTEXT,
            "flash attention (llama.cpp's meaning and default: auto turns it on where the backend has it)",
            metavar="on|off|auto"),
    Setting("batch_size", ("-b", "--batch-size"), integer(1), 2048, CONTEXT,
            "the most prompt tokens handed to llama.cpp at once, and the room of -np's steps (llama.cpp's "
            "logical batch)", metavar="N"),
    Setting("ubatch_size", ("-ub", "--ubatch-size"), integer(1), 512, CONTEXT,
            "the tokens llama.cpp computes together, at most -b (its physical batch)", metavar="N"),
    Setting("spec_type", ("--spec-type",), choice("none", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod",
                                                  "ngram-cache", "draft-simple", several=True),
            "none", CONTEXT,
            "speculative decoding (llama.cpp's names): tokens drafted from the chat's own history (draft-simple: by "
            "-md's model) and checked by the model in one batch, each with the whole sampler chain; several types, "
            "comma-separated, are asked in that order until one drafts "
            "(docs/performance.md: when it pays, and why a near tie may go the other way); given again, or with "
            "--spec-default, the types add up, as in llama.cpp", True, metavar="TYPE[,TYPE]"),
    Setting("spec_default", ("--spec-default",), choice("on", "off"), "off", CONTEXT,
            "llama.cpp's default speculative setup: --spec-type ngram-mod with n-match 24, n-min 48, n-max 64",
            metavar="on|off", bare="on"),
    Setting("spec_draft_n_max", ("--spec-draft-n-max",), integer(0, special=-1, note="-1: the type's own size"), -1,
            CONTEXT, "the most tokens a draft holds (draft-simple: 3 where -1)", metavar="N"),
    Setting("spec_draft_n_min", ("--spec-draft-n-min",), integer(0), 0, CONTEXT,
            "a draft shorter than this is not checked", metavar="N"),
    Setting("spec_draft_fit", ("--spec-draft-fit",), choice("on", "off"), "on", CONTEXT,
            "each draft cut to the length that pays on this machine, from what a batch costs here and how much "
            "of the reply's drafts the model took (off: checked whole, as llama.cpp checks them)",
            metavar="on|off"),
    Setting("spec_ngram_simple_size_n", ("--spec-ngram-simple-size-n",), integer(1, 1024), 12, CONTEXT,
            "ngram-simple: the last N tokens looked up in the history", metavar="N"),
    Setting("spec_ngram_simple_size_m", ("--spec-ngram-simple-size-m",), integer(1, 1024), 48, CONTEXT,
            "ngram-simple: the M tokens after the match, drafted", metavar="N"),
    Setting("spec_ngram_map_k_size_n", ("--spec-ngram-map-k-size-n",), integer(1, 1024), 12, CONTEXT,
            "ngram-map-k: the last N tokens, the key looked up in the history's map", metavar="N"),
    Setting("spec_ngram_map_k_size_m", ("--spec-ngram-map-k-size-m",), integer(1, 1024), 48, CONTEXT,
            "ngram-map-k: the M tokens after the key, drafted (no more than its last draft had accepted)",
            metavar="N"),
    Setting("spec_ngram_map_k4v_size_n", ("--spec-ngram-map-k4v-size-n",), integer(1, 1024), 12, CONTEXT,
            "ngram-map-k4v: the last N tokens, the key", metavar="N"),
    Setting("spec_ngram_map_k4v_size_m", ("--spec-ngram-map-k4v-size-m",), integer(1, 1024), 48, CONTEXT,
            "ngram-map-k4v: the M tokens after the key, drafted where one kind of them followed it at least "
            "twice as often as the others together", metavar="N"),
    Setting("spec_ngram_map_k4v_min_hits", ("--spec-ngram-map-k4v-min-hits",), integer(1, 16380), 1, CONTEXT,
            "ngram-map-k4v: a key drafts from its N-th lookup on", metavar="N"),
    Setting("spec_ngram_mod_n_match", ("--spec-ngram-mod-n-match",), integer(1, 1024), 24, CONTEXT,
            "ngram-mod: the n-gram that maps to the next token", metavar="N"),
    Setting("spec_ngram_mod_n_min", ("--spec-ngram-mod-n-min",), integer(0, 1024), 48, CONTEXT,
            "ngram-mod: a shorter chain is no draft", metavar="N"),
    Setting("spec_ngram_mod_n_max", ("--spec-ngram-mod-n-max",), integer(0, 1024), 64, CONTEXT,
            "ngram-mod: the longest chain followed", metavar="N"),
    Setting("threads", ("-t", "--threads"), integer(1, 512, special=-1,
                                                    note="-1: the cores other processes leave free, followed as "
                                                         "they change"), -1, CONTEXT,
            "threads for generation", metavar="N"),
    Setting("threads_batch", ("-tb", "--threads-batch"), integer(1, 512, special=-1,
                                                                 note="-1: the same as --threads"),
            -1, CONTEXT, "threads for prompt evaluation", metavar="N"),
    Setting("think", ("--think",), choice("on", "off"), None, OUTPUT,
            "reasoning models whose template has a thinking switch: thinking on or off", True, metavar="on|off",
            default_text="the template's", bare="on"),
    Setting("reasoning_effort", ("--reasoning-effort",), word, None, OUTPUT,
            "reasoning models whose template reads an effort (gpt-oss: low, medium, high): how hard it thinks",
            True, metavar="LEVEL", default_text="the template's"),
    Setting("hide_thinking", ("--hidethinking",), choice("on", "off"), "off", OUTPUT,
            "reasoning models: leave the thought out of what is shown (it stays in --json and the chat)", True,
            metavar="on|off", bare="on"),
    Setting("thinking_display", ("--thinking-display",), choice("full", "line"), "full", OUTPUT,
            "the chat: a thought shown whole and dim, or as one line that follows it (/thought shows it whole)",
            True, metavar="full|line"),
    Setting("markdown", ("--markdown",), choice("on", "off"), "on", OUTPUT,
            "replies drawn as Markdown where stdout is a terminal (headings, lists, tables, highlighted code, "
            "wrapped at spaces); off: the text as written", True, metavar="on|off", off_flag="--nowordwrap",
            off_flag_of="ollama"),
    Setting("stop", ("--stop",), nonempty, [], OUTPUT, "stop when the reply writes this text (repeatable)",
            repeat=True, metavar="TEXT", default_text="the model's stop tokens only"),
)
BY_NAME = {s.name: s for s in SETTINGS}


def settable(name: str) -> Setting | None:
    """The row ``/set NAME`` changes (``top-k``, ``top_k`` and ``--top-k`` all name it), if any."""
    key = name.lstrip("-").replace("-", "_")
    key = {"n": "max_tokens", "hidethinking": "hide_thinking", "temperature": "temp", "typical": "typical_p",
           "top_nsigma": "top_n_sigma", "dry_sequence_breaker": "dry_sequence_breakers", "sampler_seq": "samplers",
           "l": "logit_bias"}.get(key, key)
    row = BY_NAME.get(key)
    return row if row is not None and row.settable else None


#: the Sampling fields that are True or False (``--ignore-eos``, ``-bs``), set by on and off
ON_OFF = tuple(name for name, value in vars(_D).items() if isinstance(value, bool))


def sampling_value(name: str, value: object) -> object:
    """A parsed setting as the ``Sampling`` field of the same name holds it: ``--ignore-eos on`` as True,
    the repeated flags as tuples (``--dry-sequence-breaker``: none given is llama.cpp's defaults, ``none``
    clears those given before it)."""
    if name in ON_OFF:
        return value == "on"
    if BY_NAME[name].repeat:  # a repeated flag's list, or the one value /set gives
        given = value if isinstance(value, list) else [value]
        if name == "dry_sequence_breakers":
            cleared = max((i for i, text in enumerate(given) if text == "none"), default=-1)
            return tuple(given[cleared + 1:]) if given else DRY_BREAKERS
        return tuple(given)
    return value


#: the Sampling fields the table sets (the rest of its rows are the session's and the engine's)
SAMPLING_NAMES = tuple(row.name for row in SETTINGS if hasattr(_D, row.name))
