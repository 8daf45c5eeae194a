"""Tool-call arguments written one by one, read out of a reply: a key, then its value, between the texts
the template writes (``KeyedArgs``, read off the template by ``tokenizer.chat.tool_keyed``).

A value is the text up to the next argument or the call's closing, whichever comes first, kept as the
model wrote it less the template's own whitespace; where the family quotes strings it is read as a literal
(``literals.py``); ``typed_values`` then types it by the tool's schema.
"""

from __future__ import annotations

import json

from tokenizer.chat import markers
from tokenizer.chat.errors import ChatFormatError
from tokenizer.chat.probe import common_prefix
from tokenizer.chat.tool_keyed import KEY_HOLE, KeyedArgs

from .literals import literal_value, scan
from .text_patterns import cut_closing, piece


def read_keyed(keyed: KeyedArgs, text: str, closing: str, name: str) -> tuple[dict, str]:
    """The arguments at the start of ``text`` (right after the first key's opening), and what follows::

        >>> k = KeyedArgs("</arg_key>\\n<arg_value>", "</arg_value>\\n<arg_key>")
        >>> read_keyed(k, "city</arg_key>\\n<arg_value>Oslo</arg_value>\\n</tool_call>", "</arg_value>\\n</tool_call>",
        ...            "get_weather")
        ({'city': 'Oslo'}, '</arg_value>\\n</tool_call>')

    A value written as text is kept as written, less the whitespace the template writes around it
    (Qwen3-Coder's ``<parameter=code>\\n…\\n</parameter>``: code keeps its indents and its own last
    newline); a family that quotes strings has its values read as literals (``literals.py``); a value
    in XML's ``<![CDATA[…]]>`` is its text, whatever markers it holds.
    """
    arguments: dict[str, object] = {}
    key_values = [piece(t) for t in keyed.separators()]
    value_end = common_prefix(closing, keyed.between_args, at_marker=True)  # what ends any value ("\\n</parameter>")
    # Where the model left a value's close out (Qwen3-Coder's "<parameter=a>\\n1\\n<parameter=b>"), the next
    # key's opening or the call's close ends the value all the same.
    left_out = [t for t in (keyed.between_args[len(value_end):], closing[len(value_end):])
                if KEY_HOLE not in t and markers.TAG_START.match(t.lstrip()) and t.strip() != closing.strip()]
    next_key = piece(left_out[0]) if left_out and KEY_HOLE not in keyed.between_args else None
    while True:
        found = min((m for m in (p.search(text) for p in key_values) if m), key=lambda m: m.start(), default=None)
        if found is None:
            raise ChatFormatError(f"tool call {name!r}: {keyed.key_value.strip()!r} expected after an argument's name")
        as_json = bool(keyed.key_number) and keyed.key_number != keyed.key_value and found.re is key_values[-1]
        key, text = text[:found.start()].strip(), text[found.end():]
        between = piece(keyed.between_args.replace(KEY_HOLE, key))
        ends = [between] + [piece(t.replace(KEY_HOLE, key)) for t in (value_end, closing) if t.strip()]
        ends.append(cut_closing(closing.replace(KEY_HOLE, key)))  # (the turn may end inside the closing)
        if keyed.quote:
            at = scan(text, keyed.quote, ends)
            if at < 0:
                opened = next((q for q in (keyed.quote, '"', "'") if text.lstrip().startswith(q)), keyed.quote)
                raise ChatFormatError(f"tool call {name!r}: the value of {key!r} opens {opened!r} and never closes it")
            arguments[key], text = literal_value(text[:at].strip(), keyed.quote), text[at:]
        elif text.lstrip().startswith("<![CDATA[") and "]]>" in text:  # (XML's verbatim text: MiniCPM)
            body = text.lstrip()[len("<![CDATA["):]
            arguments[key], text = body[:body.index("]]>")], body[body.index("]]>") + 3:]
        else:
            at = min((m.start() for m in (e.search(text) for e in [*ends, *map(piece, left_out)]) if m),
                     default=len(text))
            at += len(text[at:]) - len(text[at:].lstrip())  # (the template's own whitespace is cut below)
            arguments[key], text = _verbatim(keyed, text[:at]), text[at:]
            if as_json:  # (the syntax's own "this value is JSON": DeepSeek V3.2's string="false")
                arguments[key] = _json_or_text(str(arguments[key]))
        after = between.match(text)
        if after is None and next_key is not None and (skipped := next_key.match(text)) is not None:
            text = text[skipped.end():]  # (the value's close left out: the next key's opening follows at once)
            continue
        ended = piece(closing.replace(KEY_HOLE, key)).match(text) if closing.strip() else None
        # MiniMax-M3's text for the next key is the start of its closing: the longer one is meant.
        if after is None or (ended is not None and ended.end() > after.end()):
            return arguments, text.lstrip()
        text = text[after.end():]

def _json_or_text(value: str) -> object:
    """A value the syntax marks as JSON, read as JSON; as written where it is none."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _verbatim(keyed: KeyedArgs, value: str) -> str:
    """A text value less the whitespace the template writes after its key and before what follows it
    (once each), the rest as the model wrote it."""
    lead = keyed.key_value[len(keyed.key_value.rstrip()):]
    trail = keyed.between_args[:len(keyed.between_args) - len(keyed.between_args.lstrip())]
    if lead and value.startswith(lead):
        value = value[len(lead):]
    if trail and value.endswith(trail):
        value = value[:-len(trail)]
    return value
