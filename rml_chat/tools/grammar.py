"""The grammar of a tool call: the template's call syntax around one tool's name and the JSON of its
arguments, as that tool's schema allows (llama.cpp's converter makes each schema's rules).

Worked example, one tool ``get_weather`` under Qwen 2.5's syntax::

    root ::= "<tool_call>\\n{\\"name\\": \\"" call "}\\n</tool_call>"
    call ::= t0-call
    t0-call ::= "get_weather" "\\", \\"arguments\\": " t0-root
    t0-root ::= "{" space t0-city-kv "}" space  ...     (the converter's rules, each name prefixed t0-)

Each tool's rules are renamed apart (``t0-``, ``t1-`` …), so that two schemas' ``root`` or ``string``
never meet. An id the template writes is nine letters and digits.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence

from tokenizer.chat.tool_calls import COUNT_HOLE, ID_HOLE, NAME_HOLE, CallSyntax
from tokenizer.chat.tool_keyed import KEY_HOLE

from ..core.gbnf import literal as gbnf_literal
from ..core.gbnf import renamed, text_without
from .functions import Tool


def literal(text: str, markers: Mapping[str, int] | None = None) -> str:
    """Text as GBNF (an id hole as nine letters and digits). Each of ``markers`` in it (the vocabulary's
    control and user-defined tokens the syntax writes: gpt-oss's ``<|channel|>``, Qwen's ``<tool_call>``)
    is its token, ``<[id]>``, so the model writes the one token the real model writes there, never the
    marker's characters one by one::

        >>> literal("<|tool_call_begin|>functions.", {"<|tool_call_begin|>": 5})
        '<[5]> "functions."'
    """
    holes = {ID_HOLE: "[A-Za-z0-9]{9}", COUNT_HOLE: "[0-9]"}
    cut = f"([{ID_HOLE}{COUNT_HOLE}]" + "".join(f"|{re.escape(m)}" for m in sorted(markers or (), key=len, reverse=True)) + ")"
    parts = [holes.get(piece) or (f"<[{markers[piece]}]>" if markers and piece in markers else gbnf_literal(piece))
             for piece in re.split(cut, text) if piece]
    return " ".join(parts) or '""'


def spaced_as_tojson(gbnf: str, prefix: str) -> str:
    """The converter's optional spaces made the one space templates' ``tojson`` writes (``{"a": 1, "b": 2}``),
    so that the call the model writes is the call the template writes back: the cache keeps it."""
    space = f"{prefix}space"
    gbnf = gbnf.replace(f'":" {space}', '": "').replace(f'"," {space}', '", "')
    return re.sub(rf"^{space} ::= .*$", f'{space} ::= ""', gbnf, flags=re.M)


def _keyed_rules(syntax: CallSyntax, tool: Tool, prefix: str, schema_to_gbnf: Callable[[str], str],
                 lit: Callable[[str], str]) -> list[str]:
    """Arguments one by one (tool_keyed.py): a key of the tool's, its separator, its value; a string value
    runs to the first character of what ends it, any other value is JSON as its schema allows."""
    keyed = syntax.keyed
    assert keyed is not None
    ends = [t[:1] for text in (keyed.between_args, syntax.closing) for t in (text.lstrip(" "), text.lstrip())]
    stop = "".join(sorted({"\\n" if c == "\n" else "\\" + c if c in "]^\\-" else c for c in ends if c}))
    properties = tool.parameters.get("properties") or {}
    required = [k for k in properties if k in (tool.parameters.get("required") or [])]
    order = required + [k for k in properties if k not in required]  # each key once: the required first
    pairs = []
    for j, key in enumerate(order):
        schema = properties[key]
        text = not isinstance(schema, dict) or schema.get("type", "string") == "string"
        if text and keyed.quote:  # between its quotes, any text but the quote
            pairs += text_without(keyed.quote, f"{prefix}q{j}")
            value, separator = f"{lit(keyed.quote)} {prefix}q{j}-s0 {lit(keyed.quote)}", keyed.key_value
        elif text:
            value = f"[^{stop}]*" if stop else "[^\\n]*"
            separator = keyed.key_value
        else:
            value = f"{prefix}p{j}-root"
            pairs.append(spaced_as_tojson(renamed(schema_to_gbnf(json.dumps(schema)), f"{prefix}p{j}-"), f"{prefix}p{j}-"))
            separator = keyed.key_number or keyed.key_value
        pairs.append(f"{prefix}kv{j} ::= {lit(key)} {lit(separator)} {value}")
    if KEY_HOLE in keyed.between_args:
        return [*pairs, *_named_chain(syntax, order, len(required), prefix, lit)]
    between = lit(keyed.between_args)
    chain = " ".join(f"{prefix}kv{j}" if j == 0 else f"{between} {prefix}kv{j}" if j < len(required) else
                     f"( {between} {prefix}kv{j} )?" for j in range(len(order)))
    if not required and order:  # (nothing required: the first key is optional too, and the rest follow it)
        chain = f"( {prefix}kv0 " + " ".join(f"( {between} {prefix}kv{j} )?" for j in range(1, len(order))) + " )?"
    return [*pairs, f"{prefix}root ::= {chain or chr(34) * 2}"]


def _named_chain(syntax: CallSyntax, order: Sequence[str], required: int, prefix: str,
                 lit: Callable[[str], str]) -> list[str]:
    """The arguments where the text after each value names its key (MiniMax-M3: ``<city>Oslo</city>``):
    after key ``j``, the next argument or, once the required ones are written, the call's closing, each
    with key ``j`` in its hole. The closing is written here, the key it names being the last one's."""
    assert syntax.keyed is not None
    between, closing = syntax.keyed.between_args, syntax.closing
    rules = []
    for j, key in enumerate(order):
        nexts = range(j + 1, len(order)) if j >= required - 1 else [j + 1]
        ways = [lit(closing.replace(KEY_HOLE, key))] if j >= required - 1 else []
        ways += [f"{lit(between.replace(KEY_HOLE, key))} {prefix}kv{m} {prefix}after{m}" for m in nexts]
        rules.append(f"{prefix}after{j} ::= " + " | ".join(ways))
    firsts = [0] if required else range(len(order))
    root = " | ".join(f"{prefix}kv{m} {prefix}after{m}" for m in firsts) or lit(closing.replace(KEY_HOLE, ""))
    return [*rules, f"{prefix}root ::= {root}"]


def call_grammar(syntax: CallSyntax, tools: Sequence[Tool], schema_to_gbnf: Callable[[str], str],
                 several: bool = False, whole: bool = False, markers: Mapping[str, int] | None = None) -> str:
    """A call of ``tools`` as the template writes it, nothing after (``several``: one or more, where the
    template writes several in one message; a small model may then never stop). It starts at the call's
    trigger (a lazy grammar's start), or ``whole``: at the reply's start, with all the template writes
    there (gpt-oss's leading space, Qwen3's empty thought). ``markers``: the syntax's special tokens, each
    written as its token (``CallSyntax.markers``)."""
    lit = functools.partial(literal, markers=markers)
    rules = []
    for i, tool in enumerate(tools):
        arguments = f"t{i}-root"
        if syntax.keyed is not None:
            rules += _keyed_rules(syntax, tool, f"t{i}-", schema_to_gbnf, lit)
        elif syntax.quoted:  # the arguments are a JSON string holding the JSON: any string
            arguments = f"t{i}-quoted"
            rules.append(f't{i}-quoted ::= "\\"" ([^"\\\\] | "\\\\" ["\\\\/bfnrtu])* "\\""')
        else:
            rules.append(spaced_as_tojson(renamed(schema_to_gbnf(json.dumps(tool.parameters)), f"t{i}-"), f"t{i}-"))
        rules.append(f"t{i}-call ::= {lit(tool.name)} {lit(syntax.after_name.replace(NAME_HOLE, tool.name))} "
                     f"{arguments}")
    calls = " | ".join(f"t{i}-call" for i in range(len(tools)))
    named = syntax.keyed is not None and KEY_HOLE in syntax.keyed.between_args  # the closing is the arguments'
    more = f" ( {lit(syntax.between)} call )*" if several and syntax.between is not None and not named else ""
    start = syntax.lead + syntax.opening if whole else syntax.trigger() + syntax.opening.strip()[len(syntax.trigger()):]
    if not whole and syntax.text_lead:  # a recipient template's call may open with its name alone (the reply's start)
        start_rule = f"( {lit(start)} )?"
    else:
        start_rule = lit(start)
    head = f"root ::= {start_rule} call{more} {lit('' if named else syntax.closing)}\ncall ::= {calls}\n"
    return head + "\n".join(rules) + "\n"
