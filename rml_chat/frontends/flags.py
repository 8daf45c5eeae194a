"""The command line's flags: the parser (``core/settings.py`` is the table of the settings among them, which
``/set`` shares), its help and examples, and what some given values become (the text flags under the text
policy, the key of ``--api-key-file``).
"""

from __future__ import annotations

import argparse
import itertools
import re
import shlex
import sys

from .. import text_input
from ..core.paths import user_path
from ..core.settings import CONTEXT, OUTPUT, SAMPLING, SETTINGS, SettingError
from ..errors import EXIT_CODES, UsageError
from .help_screens import HelpAction

ENVIRONMENT = {
    "RML_CHAT_CACHE": "where downloads and built tables are cached (default ~/.cache/rml-chat)",
    "RML_CHAT_TOKENIZER_CACHE": "the tokenizer table cache: a folder, or off",
    "RML_CHAT_FORMAT_CACHE": "the chat-format cache: a folder, or off",
    "RML_CHAT_HISTORY": "the REPL's input history file (default ~/.local/share/rml-chat/history)",
    "RML_CHAT_SESSIONS": "where the REPL autosaves conversations (default ~/.local/share/rml-chat/sessions)",
    "RML_CHAT_SESSIONS_MAX": "the default of --sessions-max (1G)",
    "RML_CHAT_PROMPT_CACHE": "the prompt cache of -p, --batch and --check: a folder, or off (default "
                             "~/.cache/rml-chat/prompt-cache)",
    "RML_CHAT_PROMPT_CACHE_MAX": "its size (2G; the least recently used entry goes first)",
    "RML_CHAT_CPU_REPACK": "on, off or auto: llama.cpp's extra CPU buffers (auto: off on a CPU with AMX, whose kernels crash)",
    "RML_CHAT_ACCEL": "off: the tokenizer's reference path alone (no C loops, numpy readers or table cache)",
    "RML_CHAT_NATIVE": "off: the tokenizer's Python merge loops instead of the C ones",
    "HF_TOKEN": "-hf: your Hugging Face token (sent to the hub alone, never to the host it redirects to)",
    "HF_ENDPOINT": "-hf: the hub to fetch from (a mirror: https://hf-mirror.com)",
    "HF_HOME, HF_HUB_CACHE": "-hf and --models: the Hugging Face cache (default ~/.cache/huggingface/hub)",
    "HF_HUB_OFFLINE": "1: -hf uses the cache alone and says what is missing",
    "HF_HUB_DOWNLOAD_TIMEOUT": "-hf: seconds a stalled download waits before it is tried again (10)",
    "LLAMA_CACHE, OLLAMA_MODELS": "--models: llama.cpp's downloads and ollama's store, when not in their default place",
}
KEYS = """  Enter sends; Alt-Enter adds a line; a message starting with \"\"\" runs until a line ending with \"\"\";
  Ctrl-C stops a reply (the part shown stays); Ctrl-D leaves; Tab completes /commands; /help lists them"""
EXAMPLES = """examples:
  rml-chat                                   chat with the default model (SmolLM2-135M-Instruct)
  rml-chat model.gguf -c 8192 --temp 0.6     any GGUF: tokenizer and chat template from its metadata
  rml-chat -hf ORG/REPO:Q4_K_M               a GGUF from the Hugging Face hub (pip install 'rml-chat[hub]')
  rml-chat --models                          the models already here (HF cache, llama.cpp, LM Studio, ollama)
  rml-chat qwen3:8b                          one of them by name
  rml-chat -p "Name three colors." --temp 0  one turn, the reply on stdout
  echo "Summarise: ..." | rml-chat --json    stdin in, one JSON object out
  rml-chat --show-prompt -p "Hi"             the prompt the model sees, special tokens marked
  rml-chat --check model.gguf                smoke test: tokenizer, chat format and a reply
  rml-chat -p "A user record" -j @user.json  a reply that is JSON following the schema in user.json
  rml-chat --batch prompts.jsonl > out.jsonl  many prompts, one model load
  rml-chat --server http://127.0.0.1:8080 m.gguf   the same chat on a llama-server (docs/beyond-one-machine.md)
  rml-chat --resume                          reopen the last autosaved conversation
  rml-chat --sessions                        list the autosaved chats (then --resume N or NAME)"""


#: a word that only a flag can be: one dash, then letters (``-cnv``, ``-mli``; not ``-c4096`` or ``-1``)
_FLAG_WORD = re.compile(r"-[A-Za-z]+(?:-[A-Za-z]+)*")


class _Parser(argparse.ArgumentParser):
    def parse_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        """A flag word that is none of ours is unrecognized, as an unknown ``--word`` is. argparse read it as
        one of ours with its value attached, or as an abbreviation of one: llama-cli's ``-cnv`` was ``-c nv``
        (a complaint about the context size), ``-mli`` a model named ``li``, ``-fit`` a file named ``it``."""
        words = list(sys.argv[1:] if args is None else args)
        for word in itertools.takewhile(lambda word: word != "--", words):
            if _FLAG_WORD.fullmatch(word) and word not in self._option_string_actions:
                self.error(f"unrecognized arguments: {word}")
        return super().parse_args(words, namespace)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _setting_type(row):
    """argparse's type for a row: its parser, with "must be …, not …" as the complaint."""
    def parse(text: str) -> object:
        try:
            return row.parse(text)
        except SettingError as err:
            raise argparse.ArgumentTypeError(f"must be {err}, not {text!r}") from None

    parse.__name__ = row.name
    return parse


def _added_types(earlier: str, later: str) -> str:
    from ..engines.speculative import added_types  # (only where --spec-type is given twice)

    return added_types(earlier, later)


#: the settings whose flag, given again, takes the value of both (the others take the later one)
_AGAIN = {"spec_type": _added_types}  # (llama.cpp adds each --spec-type's types to the ones before)


class _GivenStore(argparse._StoreAction):
    """A setting's flag, noted as given (``given_settings``); given again, the later value, or where
    ``_AGAIN`` says, the value of both."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        again = _AGAIN.get(self.dest) if self.dest in namespace.given_settings else None
        namespace.given_settings = {*namespace.given_settings, self.dest}
        super().__call__(parser, namespace, again(getattr(namespace, self.dest), values) if again else values,
                         option_string)


class _GivenConst(argparse.Action):
    """A flag with no value that sets a setting to ``const``, noted as given: llama.cpp's ``--no-X``."""

    def __init__(self, option_strings, dest, const, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(option_strings, dest, nargs=0, const=const, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        namespace.given_settings = {*namespace.given_settings, self.dest}
        setattr(namespace, self.dest, self.const)


class _GivenAppend(argparse._AppendAction):
    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        namespace.given_settings = {*namespace.given_settings, self.dest}
        super().__call__(parser, namespace, values, option_string)


def _named(text: str) -> str:
    """A value that names something (a file, a model, a key): an empty one is a mistake to say, not a flag
    to drop (``-md "$DRAFT"`` with the variable unset ran without a draft, and said nothing)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value names nothing")
    return text


def _command_line(text: str) -> str:
    """A command with its arguments, quoted as a shell quotes them (``--mcp "python server.py"``)."""
    try:
        words = shlex.split(text)
    except ValueError as err:  # ("No closing quotation")
        raise argparse.ArgumentTypeError(f"{text!r} is no command line: {str(err).lower()}") from None
    if not words:
        raise argparse.ArgumentTypeError("give the server's command, with its arguments")
    return text


def _format_name(text: str) -> str:
    from tokenizer.chat import FORMATS  # only when the flag is given: a run that doesn't name one needn't wait

    if text not in FORMATS:
        raise argparse.ArgumentTypeError(f"unknown chat format {text!r}; known: {', '.join(FORMATS)}")
    return text


def _size(text: str) -> int:
    from ..core.sessions import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"must be {err}") from None


#: the flags whose values are text for the model, read under the text policy (invalid UTF-8 becomes U+FFFD,
#: with a warning). Every other value stays as the system gave it: a file name that is not UTF-8
#: (``caf\\xe9.gguf``, from a Latin-1 system) still names its file, as it does for ls and llama.cpp.
TEXT_FLAGS = ("prompt", "prefill", "system", "stop", "dry_sequence_breakers", "json_schema", "grammar")


def text_under_policy(args: argparse.Namespace) -> None:
    def text(value: str) -> str:
        return text_input.from_str(value, "a command-line argument")

    for dest in TEXT_FLAGS:
        value = getattr(args, dest, None)
        if isinstance(value, str) and not (dest in ("json_schema", "grammar") and value.startswith("@")):
            setattr(args, dest, text(value))  # (an @FILE's name stays a name; its bytes are read under the policy)
        elif isinstance(value, (list, tuple)):
            setattr(args, dest, type(value)(text(v) if isinstance(v, str) else v for v in value))


def api_key(args: argparse.Namespace) -> str | None:
    """The key of ``--api-key`` or the first line of ``--api-key-file``; UsageError without ``--server``."""
    given = [flag for flag, value in (("--api-key", args.api_key), ("--api-key-file", args.api_key_file)) if value]
    if not given:
        return None
    if args.server is None or len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: one key, for --server's llama-server")
    if args.api_key:
        return args.api_key
    path = user_path(args.api_key_file)
    try:
        lines = text_input.from_bytes(text_input.read_limited(path, 64 * 1024), str(path)).splitlines()
    except OSError as err:
        raise UsageError(f"--api-key-file {path}: {err.strerror}") from None
    key = lines[0].strip() if lines else ""
    if not key:
        raise UsageError(f"--api-key-file {path}: its first line holds no key")
    return key


def _format_names() -> str:
    from tokenizer.chat import FORMATS

    return ", ".join(FORMATS)


def build_parser(full_help: bool = True) -> argparse.ArgumentParser:
    """The parser; ``full_help`` False leaves the chat format names out of the help (they cost an import)."""
    env = "\n".join(f"  {name:26} {text}" for name, text in ENVIRONMENT.items())
    codes = "  " + ", ".join(f"{code} {name}" for code, name in EXIT_CODES.items())
    p = _Parser(prog="rml-chat", formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
                description="Chat with a local model in the terminal: our own tokenizer, the model's own prompt\n"
                            "format (verified against its template), llama.cpp for the rest.",
                epilog=f"{EXAMPLES}\n\ninteractive keys:\n{KEYS}\n\nenvironment:\n{env}\n\nexit codes:\n{codes}")
    model = p.add_argument_group("model")
    model.add_argument("model", nargs="*", metavar="MODEL", type=_named,
                       help="a .gguf file, a model folder or a name from --models (default: SmolLM2-135M-Instruct); "
                            "words after it: -p's text (ollama run's); --check takes several")
    model.add_argument("-m", "--model", metavar="FILE", dest="model_flag", action="append", default=[], type=_named,
                       help="the model, as llama.cpp's -m names it: the same as MODEL")
    model.add_argument("-hf", "-hfr", "--hf-repo", metavar="ORG/REPO[:QUANT]", type=_named,
                       help="fetch the model from the Hugging Face hub into its cache (llama.cpp's -hf: QUANT picks the "
                            "file, else Q4_K_M, Q8_0, the first; split GGUFs whole; a rerun fetches nothing)")
    model.add_argument("-hff", "--hf-file", metavar="FILE", type=_named,
                       help="-hf: this file of the repository rather than a QUANT")
    model.add_argument("--models", action="store_true", dest="list_models",
                       help="list the models already here (name, size, quantization, chat format, where) and exit")
    model.add_argument("--weights", metavar="FILE", type=_named, help="the GGUF with the weights, for a model directory")
    model.add_argument("--server", metavar="URL", help="generate on llama.cpp's llama-server at URL (and its RPC "
                       "workers); MODEL gives the tokenizer and chat format only")
    model.add_argument("--api-key", metavar="KEY", type=_named, help="--server: the key its llama-server was started with "
                       "(--api-key there), sent to it alone")
    model.add_argument("--api-key-file", metavar="FILE", type=_named, help="--server: the key, from the first line of FILE (not "
                       "shown in the process list, as --api-key KEY is)")
    model.add_argument("--chat-format", metavar="NAME", type=_format_name,
                       help="use this prompt format instead of the one established from the template"
                            + (f": {_format_names()}" if full_help else ""))
    model.add_argument("-md", "--model-draft", metavar="FILE", default=None, type=_named,
                       help="a smaller model with the same vocabulary that drafts the reply ahead "
                            "(--spec-type draft-simple; docs/performance.md)")
    model.add_argument("-lcs", "--lookup-cache-static", metavar="FILE", default=None, type=_named,
                       help="--spec-type ngram-cache: llama.cpp's lookup cache of a text's 2-grams (llama-lookup-create "
                            "makes one), drafted from where the chat's own n-grams give nothing")
    model.add_argument("-lcd", "--lookup-cache-dynamic", metavar="FILE", default=None, type=_named,
                       help="--spec-type ngram-cache: llama.cpp's lookup cache of earlier text's 1- to 4-grams (as "
                            "llama-lookup saves one); read, not updated, as llama-server reads it")
    run = p.add_argument_group("one turn and scripts")
    run.add_argument("-p", "--prompt", metavar="TEXT", help="one turn: print the reply and exit (stdin works too)")
    run.add_argument("--prefill", metavar="TEXT", help="-p: the reply starts with TEXT and the model goes on from "
                     "it (printed as the reply's start): '--prefill {' for JSON, a first line, a language")
    run.add_argument("-f", "--file", metavar="PATH", action="append", default=[], dest="files", type=_named,
                     help="add a text file (or a pipe: <(git diff)) to the message, fenced and named by its path "
                          "(repeatable; after text piped into stdin, before -p's); in the chat, to the first message")
    run.add_argument("-sys", "--system", "--system-prompt", metavar="TEXT", help="the system message")
    run.add_argument("-sysf", "--system-prompt-file", metavar="FILE", dest="system_file", type=_named,
                     help="the system message, from FILE (one newline at its end dropped, as llama.cpp drops it)")
    run.add_argument("--json", action="store_true", help="print one JSON object: reply, counts, stop reason, timings "
                                                         "(errors too)")
    run.add_argument("--show-prompt", action="store_true", help="print the prompt the model would see, special "
                                                                "tokens marked, and exit")
    run.add_argument("--check", action="store_true", help="the model doctor: what is wrong with each MODEL (tokenizer "
                     "vs llama.cpp, template, stop ids, BOS, pre-tokenizer, a reply), with fixes; exit 1 on an error")
    run.add_argument("--strict", action="store_true", help="--check: a warning fails the check too")
    run.add_argument("--no-reply", action="store_true", help="--check: tokenizer and template only, no weights loaded")
    run.add_argument("--junit", metavar="FILE", type=_named, help="--check: also write a JUnit XML report for CI")
    run.add_argument("--batch", metavar="FILE", type=_named, help="run every line of a JSONL file (- for stdin) with one model "
                     'load: {"prompt", "system", "id", "schema", sampling overrides} or a string per line; '
                     "JSONL out, in order")
    shape = p.add_argument_group("structured output (llama.cpp's grammar sampler)")
    shape.add_argument("-j", "--json-schema", metavar="SCHEMA", help="the reply is JSON following this schema "
                                                                    "(inline JSON, or @FILE)")
    shape.add_argument("-jf", "--json-schema-file", metavar="FILE", type=_named,
                       help="the reply is JSON following the schema in FILE (-j @FILE)")
    shape.add_argument("--format", metavar="json|SCHEMA", dest="ollama_format",
                       help="ollama's: json (any JSON: -j {}) or a JSON schema (-j SCHEMA)")
    shape.add_argument("--grammar", metavar="GBNF", help="the reply follows this GBNF grammar (inline, or @FILE)")
    shape.add_argument("--grammar-file", metavar="FILE", type=_named, help="the reply follows the GBNF grammar in FILE")
    tools = p.add_argument_group("tools (docs/tools.md): the model calls functions; nothing runs without consent")
    tools.add_argument("--functions", metavar="FILE.py", action="append", default=[], type=_named,
                       help="the public functions of a Python file are tools (type hints make their schemas)")
    tools.add_argument("--mcp", metavar='"COMMAND ARGS"', action="append", default=[], type=_command_line,
                       help='the tools of an MCP server run over stdio (the mcp SDK: pip install "rml-chat[mcp]")')
    tools.add_argument("--tools-approve", action="store_true",
                       help="-p and --batch: run the calls the model makes (without it each is refused)")
    tools.add_argument("--tool-choice", choices=("auto", "required", "none"), default="auto",
                       help="auto: the model decides; required: the reply is a call (a grammar from the tools' "
                            "schemas); none: no call runs (default: auto)")
    groups = {SAMPLING: p.add_argument_group(SAMPLING), CONTEXT: p.add_argument_group(CONTEXT),
              OUTPUT: p.add_argument_group(OUTPUT)}
    p.set_defaults(given_settings=set())  # the rows a flag of this run set (their values win over the model's)
    for row in SETTINGS:
        groups[row.group].add_argument(*row.flags, dest=row.name, type=_setting_type(row), default=row.default,
                                       action=_GivenAppend if row.repeat else _GivenStore, metavar=row.metavar,
                                       **({"nargs": "?", "const": row.bare} if row.bare else {}),
                                       help=f"{row.help}; {row.parse.allowed} (default: "
                                            f"{row.default_text or row.default})")
        if row.off_flag:
            groups[row.group].add_argument(row.off_flag, dest=row.name, action=_GivenConst, const="off",
                                           help=f"{row.flag} off, as {row.off_flag_of} names it")
    groups[OUTPUT].add_argument("--jinja", action="store_true",
                                help="llama.cpp's flag, accepted so its commands run here: rml-chat always writes the "
                                     "prompt the model's Jinja template writes")
    groups[OUTPUT].add_argument("--verbose", action="store_true",
                                help="show the format and how it was established, stop ids, llama.cpp's log")
    chat = p.add_argument_group("interactive")
    chat.add_argument("--resume", nargs="?", const="last", metavar="N|NAME|FILE",
                      help="reopen a chat: the newest autosaved one, N as --sessions numbers them, a name given "
                           "with /name, or a file saved with /save")
    chat.add_argument("--sessions", action="store_true", help="list the autosaved chats, newest first, and exit")
    chat.add_argument("--delete-session", metavar="N|NAME", help="delete an autosaved chat and its state, and exit")
    chat.add_argument("--sessions-max", metavar="SIZE", type=_size, default=None,
                      help="the most llama.cpp's saved states may take together; the oldest go first "
                           "(default: $RML_CHAT_SESSIONS_MAX or 1G; 0: keep none)")
    info = p.add_argument_group("information")
    help_groups = {"model": model, "scripts": run, "structured": shape, "tools": tools, "sampling": groups[SAMPLING],
                   "context": groups[CONTEXT], "output": groups[OUTPUT], "interactive": chat, "information": info}
    info.add_argument("-h", "--help", action=HelpAction, groups=help_groups,
                      help="show the common flags and exit; --help all: every flag, the keys, the environment and "
                           "the exit codes; --help GROUP: one group of flags")
    info.add_argument("--version", action="store_true", help="show the versions of rml-chat, llama-cpp-python and "
                                                             "llama.cpp")
    return p
