"""Known call syntaxes, for a template that tells the model of its tools but renders no call.

Most tool templates render a call, and ``tool_calls.derive`` reads the syntax off that rendering. A few
list the tools and leave the call to the model's training: LFM2-8B-A1B's and LFM2.5-Instruct's write
``List of tools: [...]`` and hand an assistant message's content back as it is. Their family's newer
template (LFM2.5-8B-A1B's) does render the call its models write, and llama.cpp reads all three with one
parser (``common/parsers/lfm2.cpp``). Such a template gets its family's syntax from this table, and the
session names it at start. The call then stays in the message's content (``CallSyntax.in_content``),
where the template writes it back as the model wrote it::

    <|tool_call_start|>[get_weather(city='Oslo', days=3)]<|tool_call_end|>

Each entry is data: a name, the template texts that mark the family, and the syntax. A test holds each
one to the family's own rendering (LFM2.5-8B-A1B's template, read by ``derive``) and to llama.cpp's own
test strings. Nothing here is used where the template renders a call, or marks no family.
"""

from __future__ import annotations

from dataclasses import dataclass

from .template import ChatTemplate
from .tool_calls import CallSyntax
from .tool_keyed import KeyedArgs


@dataclass(frozen=True)
class KnownSyntax:
    name: str
    markers: tuple[str, ...]  # any of these in the template's source marks the family
    syntax: CallSyntax


KNOWN = (
    KnownSyntax("LFM2's Python call", ("<|tool_list_start|>", "List of tools: ["), CallSyntax(
        "<|tool_call_start|>[", "(", ")]<|tool_call_end|>", "), ", keyed=KeyedArgs("=", ", ", quote="'"),
        in_content=True)),
)


def known_syntax(template: ChatTemplate) -> KnownSyntax | None:
    """The table's syntax for a template of a family it knows (call it only where the template renders
    no call), or None."""
    return next((k for k in KNOWN if any(m in template.source for m in k.markers)), None)
