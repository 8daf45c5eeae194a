"""What a marker is, in one place: the texts templates write around a turn, a thought, an answer or a call
(``<|im_start|>``, ``<think>``, ``<｜tool▁calls▁begin｜>``, ``</function>``, ``[TOOL_CALLS]``, ``[/THINK]``), and
the families' own tags that are known by name. The template probes (``probe``), the readers of a template's
thought and calls (``reasoning.derive``, ``tool_calls.derive``), the reply's stream (``rml_chat.core``'s
thoughts, channels, call reader) and the doctor all read markers with what is here.

A marker is a tag in angle brackets or a name in square brackets; where a stricter reading is needed it is
a tag with no whitespace in it, or a name in capitals (never JSON's ``[{…}]`` or a list ``["a"]``)::

    >>> [m.group() for m in ANY.finditer('<|open|>message role="assistant"<|sep|>[BEGIN FINAL RESPONSE]')]
    ['<|open|>', '<|sep|>', '[BEGIN FINAL RESPONSE]']
    >>> leading(' [TOOL_CALLS][{"name": ').group(1), leading('[{"name": ') is None
    ('[TOOL_CALLS]', True)
    >>> is_marked('<function='), is_marked('", "')
    (True, False)
"""

from __future__ import annotations

import re

#: any marker: a tag in angle brackets, or a name in square brackets (spaces allowed: Apriel's
#: ``[BEGIN FINAL RESPONSE]``)
ANY = re.compile(r"<[^<>]+>|\[[^\[\]]+\]")
#: a marker with no whitespace in it: what a trigger, a closing or a call list opens with
TIGHT = re.compile(r"<[^<>\s]+>|\[[^\[\]\s]+\]")
#: a tag with no whitespace, or a name in capitals in square brackets (``[TOOL_CALLS]``, ``[/THINK]``)
STRICT = r"<[^<>\s]+>|\[/?[A-Z_]+\]"
#: how a marker starts: ``<`` then a word, ``|`` or ``/``; ``[`` then a capital (or ``/`` and one)
START = re.compile(r"<[\w|/]|\[/?[A-Z]")
#: how a tag starts (a value's tag, an argument's: ``<parameter=``, ``</arg_value>``)
TAG_START = re.compile(r"<[\w/|]")
#: the characters a marker ends with, and starts with
ENDS, STARTS = ">]", "<["
#: where one marker ends and the next starts at once (``</arg_value><arg_key>``)
BETWEEN_TWO = r"(?<=[>\]])(?=[<\[])"
#: texts that look like a chat marker where a vocabulary's tokens are looked through (the doctor): the
#: families' own shapes, not any tag (``<0x0A>`` is a byte, ``<a>`` HTML)
LOOKS_SPECIAL = re.compile(r"<\|[^\s<>|]+\|>|<[a-z_]+>|</[a-z_]+>|\[/?[A-Z_]{3,}\]|<｜[^｜\s]+｜>")

#: a thought's tags where a template names them but renders no thought of its own (each family's)
INLINE_TAGS = (("<think>", "</think>"), ("[THINK]", "[/THINK]"), ("<seed:think>", "</seed:think>"),
               ("<|channel>thought", "<channel|>"))
#: the tags an answer is wrapped in where a template's instructions ask for them (Granite 3.3: "write your
#: response between <response></response>") and its rendering of an answer does not write them
ANSWER_TAGS = (("<response>", "</response>"),)
#: the thought's tags most families write (DeepSeek R1, Qwen3, SmolLM3): what a named format strips
THINK_OPEN, THINK_CLOSE = INLINE_TAGS[0]


def leading(text: str) -> re.Match[str] | None:
    """The marker ``text`` starts with (after whitespace, and the whitespace after it), its text as
    group 1; None where it starts with none (``STRICT``)."""
    return re.match(rf"\s*({STRICT})\s*", text)


def is_marked(text: str) -> bool:
    """Whether ``text`` holds a marker of its own (a tag, a tag that takes a name, ``<name=``, or a name in
    capitals), not only glue (``", "``)."""
    return bool(re.search(rf"{STRICT}|<[\w|:]+=", text))


def named_after(text: str) -> list[int]:
    """Where a marker that a name follows starts in ``text`` (Kimi K3's ``<|open|>response``)::

        >>> named_after("<|close|>think<|sep|><|open|>response<|sep|>")
        [0, 21]
    """
    return [m.start() for m in re.finditer(rf"(?:{ANY.pattern})\w", text)]
