"""Tool-call arguments written one by one: a key, then its value, between the template's own texts.

Read off the template the way ``tool_calls.py`` reads a call: one call with two arguments is rendered,
and the texts around the keys and values are cut out. Worked example, Qwen3-Coder::

    <function=NAME>\\n<parameter=xq_key>\\nxq_value\\n</parameter>\\n<parameter=xq_beta>\\nxq_two\\n</parameter>\\n</function>
    -> key_value ">\\n", between_args "\\n</parameter>\\n<parameter="   (after_name ">\\n<parameter=")

A reply's arguments are read by ``rml_chat.core.keyed_reader``: a value is the text up to the next
``between_args`` or the call's closing, whichever comes first. Where the text after a value names its key
(MiniMax-M3: ``<xq_key>xq_value</xq_key><xq_beta>…``, each argument a tag named by its key), the key's
place in ``between_args`` and in the call's closing is a hole, ``KEY_HOLE``, filled with the key just read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ChatFormatError
from .probe import CALL_ID, render, word
from .template import ChatTemplate

TWO_ARGS = {word("key"): word("value"), word("beta"): word("two")}
KEY_HOLE = "\3"  # the argument's key again, where the text after its value names it (MiniMax-M3's ``<city>Oslo</city>``)


@dataclass(frozen=True)
class KeyedArgs:
    key_value: str  # between a key and its value
    between_args: str  # from a value to the next key
    key_number: str = ""  # between a key and a value that is no string, where the template says so (DSML)
    quote: str = ""  # around a string value, the rest bare (Gemma 4's <|"|>, LFM2's Python call: ')

    def separators(self) -> list[str]:
        return [self.key_value] + ([self.key_number] if self.key_number and self.key_number != self.key_value else [])

    def tag_separator(self) -> str:
        """Where each argument is a tag named by its key: the text the template writes before a tag
        (MiniMax-M3's ``]<]minimax[>[``, before ``</city>``), else "".

            >>> KeyedArgs(">", "]<]m[>[</\3>]<]m[>[<").tag_separator()
            ']<]m[>['
        """
        closing_tag = self.between_args.find("</" + KEY_HOLE)
        return self.between_args[:closing_tag].strip() if closing_tag >= 0 else ""



def derive_keyed(template: ChatTemplate, options: Mapping[str, object], common: int, at: int) -> KeyedArgs | str:
    """The texts around keys and values, read off a call with two arguments; or why they can't be."""
    from .tool_calls import NAMES

    call = {"id": CALL_ID, "type": "function", "function": {"name": NAMES[0], "arguments": TWO_ARGS}}
    try:
        text = render(template, [{"role": "user", "content": "Which tool?"},
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
    call["function"]["arguments"] = {word("key"): word("value"), word("num"): 7}  # type: ignore[index]
    try:
        numbered = render(template, [{"role": "user", "content": "Which tool?"},
                                     {"role": "assistant", "content": "", "tool_calls": [call]}], False, **options)[common:]
    except ChatFormatError:
        return KeyedArgs(key_value, between)
    key_num = numbered.find(word("num"), at)
    value_num = numbered.find("7", key_num + len(word("num")))
    if key_num < 0 or value_num < 0:
        return KeyedArgs(key_value, between)
    key_number = numbered[key_num + len(word("num")):value_num]
    if key_number != key_value and key_value.startswith(key_number):  # strings quoted, the rest bare (Gemma 4, LFM2)
        quote = key_value[len(key_number):]
        if not between.startswith(quote) or not between[len(quote):].strip():
            return "the template quotes string values its own way (not read yet)"
        return KeyedArgs(key_number, between[len(quote):], quote=quote)
    return KeyedArgs(key_value, between, key_number)


