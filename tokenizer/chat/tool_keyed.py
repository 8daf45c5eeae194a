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

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .affix import common_prefix
from .errors import ChatFormatError
from .literals import literal_value, scan
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

    def tag_separator(self) -> str:
        """Where each argument is a tag named by its key: the text the template writes before a tag
        (MiniMax-M3's ``]<]minimax[>[``, before ``</city>``), else "".

            >>> KeyedArgs(">", "]<]m[>[</\3>]<]m[>[<").tag_separator()
            ']<]m[>['
        """
        closing_tag = self.between_args.find("</" + KEY_HOLE)
        return self.between_args[:closing_tag].strip() if closing_tag >= 0 else ""

    def parse(self, text: str, closing: str, piece: Callable[[str], re.Pattern[str]],
              name: str) -> tuple[dict, str]:
        """The arguments at the start of ``text`` (right after the first key's opening), and what follows::

            >>> import re
            >>> k = KeyedArgs("</arg_key>\\n<arg_value>", "</arg_value>\\n<arg_key>")
            >>> k.parse("city</arg_key>\\n<arg_value>Oslo</arg_value>\\n</tool_call>", "</arg_value>\\n</tool_call>",
            ...         lambda t: re.compile(r"\\s*" + re.escape(t.strip())), "get_weather")
            ({'city': 'Oslo'}, '</arg_value>\\n</tool_call>')

        A value written as text is kept as written, less the whitespace the template writes around it
        (Qwen3-Coder's ``<parameter=code>\\n…\\n</parameter>``: code keeps its indents and its own last
        newline); a family that quotes strings has its values read as literals (``literals.py``); a value
        in XML's ``<![CDATA[…]]>`` is its text, whatever markers it holds.
        """
        arguments: dict[str, object] = {}
        key_values = [piece(t) for t in self.separators()]
        value_end = common_prefix(closing, self.between_args, at_marker=True)  # what ends any value ("\\n</parameter>")
        while True:
            found = min((m for m in (p.search(text) for p in key_values) if m), key=lambda m: m.start(), default=None)
            if found is None:
                raise ChatFormatError(f"tool call {name!r}: {self.key_value.strip()!r} expected after an argument's name")
            key, text = text[:found.start()].strip(), text[found.end():]
            between = piece(self.between_args.replace(KEY_HOLE, key))
            ends = [between] + [piece(t.replace(KEY_HOLE, key)) for t in (value_end, closing) if t.strip()]
            ends.append(cut_closing(closing.replace(KEY_HOLE, key)))  # (the turn may end inside the closing)
            if self.quote:
                at = scan(text, self.quote, ends)
                if at < 0:
                    opened = next((q for q in (self.quote, '"', "'") if text.lstrip().startswith(q)), self.quote)
                    raise ChatFormatError(f"tool call {name!r}: the value of {key!r} opens {opened!r} and never closes it")
                arguments[key], text = literal_value(text[:at].strip(), self.quote), text[at:]
            elif text.lstrip().startswith("<![CDATA[") and "]]>" in text:  # (XML's verbatim text: MiniCPM)
                body = text.lstrip()[len("<![CDATA["):]
                arguments[key], text = body[:body.index("]]>")], body[body.index("]]>") + 3:]
            else:
                at = min((m.start() for m in (e.search(text) for e in ends) if m), default=len(text))
                at += len(text[at:]) - len(text[at:].lstrip())  # (the template's own whitespace is cut below)
                arguments[key], text = self._verbatim(text[:at]), text[at:]
            after = between.match(text)
            ended = piece(closing.replace(KEY_HOLE, key)).match(text) if closing.strip() else None
            if after is None or (ended is not None and ended.end() > after.end()):  # (MiniMax-M3's next-key
                return arguments, text.lstrip()  # text is the start of its closing: the longer is meant)
            text = text[after.end():]

    def _verbatim(self, value: str) -> str:
        """A text value less the whitespace the template writes after its key and before what follows it
        (once each), the rest as the model wrote it."""
        lead = self.key_value[len(self.key_value.rstrip()):]
        trail = self.between_args[:len(self.between_args) - len(self.between_args.lstrip())]
        if lead and value.startswith(lead):
            value = value[len(lead):]
        if trail and value.endswith(trail):
            value = value[:-len(trail)]
        return value


@functools.lru_cache(maxsize=64)  # (a pattern a closing, not one a value)
def cut_closing(closing: str) -> re.Pattern[str]:
    """A closing the reply stops inside of: any start of it, then the text's end (Gemma 4's
    ``}<tool_call|>`` of ``}<tool_call|><|tool_response>``, the model's turn ending between the two)."""
    core = closing.strip()
    starts = "|".join(re.escape(core[:n]) for n in range(len(core), 0, -1)) or "(?!)"
    return re.compile(rf"\s*(?:{starts})\s*\Z")


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


def typed(arguments: Mapping[str, object], schema: Mapping[str, object], separator: str = "") -> dict:
    """Keyed arguments read by the tool's schema: a value written as text whose property may be other than
    a string (a type, a list of types, ``anyOf``/``oneOf``, nullable) is JSON where it parses as one of
    those; the rest stay text::

        >>> typed({"city": "Oslo", "days": "3"}, {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}})
        {'city': 'Oslo', 'days': 3}
        >>> union = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
        >>> typed({"limit": "5", "name": "1abc"}, {"properties": {"limit": union, "name": union}})
        {'limit': 5, 'name': '1abc'}

    Where each argument is a tag named by its key (MiniMax-M3), an object or array value may be written
    the same way, nested: ``<real>1.5</real><imaginary>-2</imaginary>``, a list as ``<item>…</item>``s;
    ``separator`` is the text the template writes before each tag (MiniMax-M3's ``]<]minimax[>[``)::

        >>> point = {"properties": {"at": {"type": "object", "properties": {"x": {"type": "number"}}},
        ...                         "tags": {"type": "array", "items": {"type": "string"}}}}
        >>> typed({"at": "<x>1.5</x>", "tags": "<item>a</item>\\n<item>b</item>"}, point)
        {'at': {'x': 1.5}, 'tags': ['a', 'b']}
    """
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    return {key: _typed_value(value, properties.get(key), separator)  # type: ignore[union-attr]
            for key, value in arguments.items()}


def _typed_value(value: object, schema: object, separator: str) -> object:
    kinds = _kinds(schema)
    if not isinstance(value, str) or not kinds or kinds == {"string"}:
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    if _JSON_KINDS.get(type(parsed), "") in kinds or ("number" in kinds and isinstance(parsed, int)):
        return parsed
    if kinds & {"object", "array"} and "string" not in kinds:  # (text may be meant as text: kept)
        nested = _tagged(value.replace(separator, "") if separator else value, schema, kinds)
        if nested is not None:
            return nested
    return value


_TAG = re.compile(r"<([A-Za-z_][\w.\-]*)>")


def _tagged(text: str, schema: object, kinds: set[str]) -> object | None:
    """A value written as nested tags, read by its schema (an array's elements as any tag, an object's
    properties as tags named by their keys); None where the text is no such tags."""
    elements = _elements(text)
    if not elements:
        return None
    options = [schema] + list((schema.get("anyOf") or schema.get("oneOf") or ()) if isinstance(schema, dict) else ())
    if "array" in kinds:
        items = next((o.get("items") for o in options if isinstance(o, dict) and o.get("items")), None)
        if len({name for name, _ in elements}) == 1 and ("object" not in kinds or elements[0][0] == "item"):
            return [_typed_value(inner.strip() if _kinds(items) != {"string"} else inner, items, "") for _, inner in elements]
    if "object" in kinds:
        properties = next((o.get("properties") for o in options if isinstance(o, dict) and o.get("properties")), {})
        return {name: _typed_value(inner, properties.get(name), "") for name, inner in elements}
    return None


def _elements(text: str) -> list[tuple[str, str]] | None:
    """The top-level ``<name>…</name>`` elements of ``text``, in order, with whitespace alone between them;
    None where anything else is there.

        >>> _elements("<a><b>1</b></a>\\n<a>2</a>")
        [('a', '<b>1</b>'), ('a', '2')]
    """
    found, at = [], 0
    while (opened := _TAG.search(text, at)) is not None:
        if text[at:opened.start()].strip():
            return None
        name, depth = opened.group(1), 1
        for tag in re.finditer(rf"<(/?){re.escape(name)}>", text[opened.end():]):
            depth += -1 if tag.group(1) else 1
            if depth == 0:
                found.append((name, text[opened.end():opened.end() + tag.start()]))
                at = opened.end() + tag.end()
                break
        else:
            return None
    return found if found and not text[at:].strip() else None


_JSON_KINDS = {int: "integer", float: "number", bool: "boolean", dict: "object", list: "array", type(None): "null"}


def _kinds(schema: object) -> set[str]:
    """The JSON types a property's schema allows (an empty set where it says none: any, left as text)."""
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
    for way in ("anyOf", "oneOf"):
        for option in schema.get(way) or ():
            kinds |= _kinds(option) or {"string", "integer", "number", "boolean", "object", "array", "null"}
    if schema.get("nullable"):
        kinds.add("null")
    if not kinds and "properties" in schema:
        kinds = {"object"}
    elif not kinds and "items" in schema:
        kinds = {"array"}
    return kinds
