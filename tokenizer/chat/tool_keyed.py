"""Tool-call arguments written one by one: a key, then its value, between the template's own texts.

Read off the template the way ``tool_calls.py`` reads a call: one call with two arguments is rendered,
and the texts around the keys and values are cut out. Worked example, Qwen3-Coder::

    <function=NAME>\\n<parameter=xq_key>\\nxq_value\\n</parameter>\\n<parameter=xq_beta>\\nxq_two\\n</parameter>\\n</function>
    -> key_value ">\\n", between_args "\\n</parameter>\\n<parameter="   (after_name ">\\n<parameter=")

A value is the text up to the next ``between_args`` or the call's closing, whichever comes first; values
come back as text (the toolbox reads numbers and objects by the tool's schema). Where the text after a
value names its key (MiniMax-M3: ``<xq_key>xq_value</xq_key><xq_beta>…``, each argument a tag named by
its key), the key's place in ``between_args`` and in the call's closing is a hole, ``KEY_HOLE``, filled
with the key just read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .errors import ChatFormatError
from .template import ChatTemplate

TWO_ARGS = {"xq_key": "xq_value", "xq_beta": "xq_two"}
KEY_HOLE = "\3"  # the argument's key again, where the text after its value names it (MiniMax-M3's ``<city>Oslo</city>``)


@dataclass(frozen=True)
class KeyedArgs:
    key_value: str  # between a key and its value
    between_args: str  # from a value to the next key
    key_number: str = ""  # between a key and a value that is no string, where the template says so (DSML)
    quote: str = ""  # around a string value, the rest bare (Gemma 4's <|"|>, LFM2's Python call: ')

    def separators(self) -> list[str]:
        return [self.key_value] + ([self.key_number] if self.key_number and self.key_number != self.key_value else [])

    def parse(self, text: str, closing: str, piece: Callable[[str], re.Pattern[str]],
              name: str) -> tuple[dict, str]:
        """The arguments at the start of ``text`` (right after the first key's opening), and what follows::

            >>> import re
            >>> k = KeyedArgs("</arg_key>\\n<arg_value>", "</arg_value>\\n<arg_key>")
            >>> k.parse("city</arg_key>\\n<arg_value>Oslo</arg_value>\\n</tool_call>", "</arg_value>\\n</tool_call>",
            ...         lambda t: re.compile(r"\\s*" + re.escape(t.strip())), "get_weather")
            ({'city': 'Oslo'}, '</arg_value>\\n</tool_call>')
        """
        arguments: dict[str, str] = {}
        key_values = [piece(t) for t in self.separators()]
        while True:
            found = min((m for m in (p.search(text) for p in key_values) if m), key=lambda m: m.start(), default=None)
            if found is None:
                raise ChatFormatError(f"tool call {name!r}: {self.key_value.strip()!r} expected after an argument's name")
            key, text = text[:found.start()].strip(), text[found.end():]
            between = piece(self.between_args.replace(KEY_HOLE, key))
            end = piece(closing.replace(KEY_HOLE, key)) if closing.strip() else None
            # a string: up to its closing quote, then the next key or the end (a Python call's string in
            # either of Python's quotes: llama.cpp's own tests of LFM2 write city="Paris")
            quote = next((q for q in (self.quote, '"' if self.quote == "'" else "") if q and text.startswith(q)), "")
            if quote:
                stop = text.find(quote, len(quote))
                if stop < 0:
                    raise ChatFormatError(f"tool call {name!r}: the value of {key!r} opens {quote!r} and never closes it")
                arguments[key], text = text[len(quote):stop], text[stop + len(quote):]
                after = between.match(text)
                if after is None:
                    return arguments, text.lstrip()
                text = text[after.end():]
                continue
            ends = [(m.start(), kind, m) for kind, m in (("next", between.search(text)),
                                                        ("end", end.search(text) if end else None)) if m]
            if not ends:
                arguments[key] = text.strip()
                return arguments, ""
            # the earliest; at one place the longer (MiniMax-M3's next-key text is the start of its closing)
            at, kind, match = min(ends, key=lambda e: (e[0], e[2].start() - e[2].end(), e[1] != "next"))
            arguments[key] = text[:at].strip()
            if kind == "end":
                return arguments, text[at:].lstrip()
            text = text[match.end():]


def derive_keyed(template: ChatTemplate, options: Mapping[str, object], common: int, at: int) -> KeyedArgs | str:
    """The texts around keys and values, read off a call with two arguments; or why they can't be."""
    from .tool_calls import CALL_ID, NAMES

    call = {"id": CALL_ID, "type": "function", "function": {"name": NAMES[0], "arguments": TWO_ARGS}}
    try:
        text = template.render([{"role": "user", "content": "Which tool?"},
                                {"role": "assistant", "content": "", "tool_calls": [call]}], False, **options)[common:]
    except ChatFormatError as err:
        return f"the template can't render a call with two arguments ({err})"
    pairs = sorted(((text.find(k, at), k, v) for k, v in TWO_ARGS.items()), key=lambda p: p[0])  # (Gemma 4 sorts keys)
    (key_one, first, first_value), (key_two, second, second_value) = pairs
    value_one = text.find(first_value, key_one)
    value_two = text.find(second_value, key_two)
    if min(key_one, value_one, key_two, value_two) < 0 or value_one > key_two:
        return "the template writes a call's arguments its own way, not as one JSON object (not read yet)"
    key_value = text[key_one + len(first):value_one]
    if text[key_two + len(second):value_two] != key_value or not key_value.strip():
        return "the template writes each argument its own way (not read yet)"
    between = text[value_one + len(first_value):key_two].replace(first, KEY_HOLE)  # (a tag named by the key)
    if not between.strip():
        return "the template writes arguments with nothing between them (not read yet)"
    call["function"]["arguments"] = {"xq_key": "xq_value", "xq_num": 7}  # type: ignore[index]
    try:
        numbered = template.render([{"role": "user", "content": "Which tool?"},
                                    {"role": "assistant", "content": "", "tool_calls": [call]}], False, **options)[common:]
    except ChatFormatError:
        return KeyedArgs(key_value, between)
    key_num = numbered.find("xq_num", at)
    value_num = numbered.find("7", key_num + len("xq_num"))
    if key_num < 0 or value_num < 0:
        return KeyedArgs(key_value, between)
    key_number = numbered[key_num + len("xq_num"):value_num]
    if key_number != key_value and key_value.startswith(key_number):  # strings quoted, the rest bare (Gemma 4, LFM2)
        quote = key_value[len(key_number):]
        if not between.startswith(quote) or not between[len(quote):].strip():
            return "the template quotes string values its own way (not read yet)"
        return KeyedArgs(key_number, between[len(quote):], quote=quote)
    return KeyedArgs(key_value, between, key_number)


def typed(arguments: Mapping[str, object], schema: Mapping[str, object]) -> dict:
    """Keyed arguments read by the tool's schema: a value whose property is no string is JSON (``"3"`` -> 3),
    where it parses; the rest stay text::

        >>> typed({"city": "Oslo", "days": "3"}, {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}})
        {'city': 'Oslo', 'days': 3}
    """
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    out = {}
    for key, value in arguments.items():
        kind = properties.get(key, {}).get("type") if isinstance(properties.get(key), dict) else None  # type: ignore[union-attr]
        if isinstance(value, str) and kind not in (None, "string"):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        out[key] = value
    return out
