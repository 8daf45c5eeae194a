"""``--help``: one screen of what a newcomer needs, every flag behind ``--help all``, one group of flags
behind ``--help GROUP``.

The full help is over 300 lines: the sampler chain alone has 25 flags. The first screen holds the flags a
first chat and a first script use, with a few examples, and says where the rest is. The texts are the
parser's own (``flags.build_parser``), so the three views never disagree.
"""

from __future__ import annotations

import argparse
import sys
import textwrap

#: the flags of the first screen, in its order (their help is the parser's)
FIRST_SCREEN = ("model", "hf_repo", "list_models", "prompt", "system", "json", "resume", "ctx_size", "max_tokens",
                "temp", "functions", "check")

SHORT_EXAMPLES = """examples:
  rml-chat                                   chat with the default model (SmolLM2-135M-Instruct)
  rml-chat model.gguf -c 8192 --temp 0.6     any GGUF file
  rml-chat -p "Name three colors." --temp 0  one reply on stdout
  rml-chat --resume                          reopen the last chat"""


def render(parser: argparse.ArgumentParser, groups: dict[str, argparse._ArgumentGroup], which: str) -> str:
    """The help ``which`` asks for: "" the first screen, "all" everything, else the group of that name
    (a ``KeyError`` where there is none)."""
    if which == "all":
        return parser.format_help()
    formatter = parser._get_formatter()
    if which:
        group = groups[which]
        formatter.start_section(group.title)
        formatter.add_arguments(group._group_actions)
        formatter.end_section()
        return formatter.format_help()
    formatter.add_usage("rml-chat [MODEL] [flags]", [], [])
    formatter.add_text(parser.description)
    by_dest = {action.dest: action for action in parser._actions}
    formatter.start_section("common flags")
    formatter.add_arguments([by_dest[dest] for dest in FIRST_SCREEN])
    formatter.end_section()
    formatter.add_text(SHORT_EXAMPLES)
    formatter.add_text("\n".join(textwrap.wrap(
        f"more: rml-chat --help all (every flag, the keys, the environment, the exit codes), or --help GROUP for "
        f"one group: {', '.join(groups)}", 80, subsequent_indent="  ")))
    return formatter.format_help()


class HelpAction(argparse.Action):
    """``-h/--help [all|GROUP]``: print that help and exit 0; a GROUP that isn't one is a usage error."""

    def __init__(self, option_strings, dest, groups: dict[str, argparse._ArgumentGroup], **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs="?", const="", default=argparse.SUPPRESS,
                         metavar="all|GROUP", **kwargs)
        self.groups = groups

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        if values not in ("", "all", *self.groups):
            parser.error(f"{option_string} {values}: no such help; all, or a group: {', '.join(self.groups)}")
        sys.stdout.write(render(parser, self.groups, values))
        sys.stdout.flush()  # (here, so that a failed write is the one error line, not argparse's silence)
        parser.exit()
