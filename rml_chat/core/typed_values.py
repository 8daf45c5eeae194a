"""Arguments read by the tool's schema: values written as text typed (a number, a boolean, JSON, or an
object or array written as nested tags, MiniMax-M3), and all the arguments taken out of one wrapper the
tool does not declare.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping


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


def unwrapped(arguments: dict, schema: Mapping[str, object]) -> dict:
    """The arguments, where the model wrapped them all in one key the tool does not declare (``input``,
    ``arguments``, ``parameters``), holding the object or its JSON text, and every wrapped key is one of the
    tool's: the wrapped object. Anything else is as written::

        >>> weather = {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
        >>> unwrapped({"input": {"city": "Oslo"}}, weather), unwrapped({"arguments": '{"city": "Oslo", "days": 2}'}, weather)
        ({'city': 'Oslo'}, {'city': 'Oslo', 'days': 2})
        >>> unwrapped({"city": {"name": "Oslo"}}, weather), unwrapped({"input": {"town": "Oslo"}}, weather)
        ({'city': {'name': 'Oslo'}}, {'input': {'town': 'Oslo'}})
    """
    properties = schema.get("properties")
    if len(arguments) != 1 or not isinstance(properties, Mapping) or not properties:
        return arguments
    ((key, value),) = arguments.items()
    if key in properties:
        return arguments
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return arguments
    if isinstance(value, dict) and value and all(k in properties for k in value):
        return value
    return arguments


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
