"""How a template writes a tool call, read off its own renderings (a reply's calls are read by that shape in
``rml_chat.core.call_reader``).

Nothing here is a list of families. The template renders an assistant message holding one call and one
holding two, with a tool name, arguments and an id no template writes (``NAME``, ``ARGS``, ``ID``
below), after the same user message with the generation prompt. Where the renderings part from that
prompt, the call's text begins; it is cut around the name and the arguments' JSON::

    Qwen 2.5   <tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call><|im_end|>\\n
    Llama 3.2  {"name": "NAME", "parameters": ARGS}<|eot_id|>
    Mistral    [TOOL_CALLS]NAME[ARGS]ARGS</s>
    -> opening '<tool_call>\\n{"name": "', after_name '", "arguments": ', closing '}\\n</tool_call>'

``between`` is the text from the first call's arguments to the second call's name (``}\\n</tool_call>\\n
<tool_call>\\n{"name": "`` for Qwen; ``", {"name": "`` where calls share one list). The closing stops
where the template ends the turn (the stop texts given). An id the template writes (Solar Open, Mistral
Nemo) is a hole that takes any id the model writes.

Arguments are written as one JSON object (``tojson``), or one by one, a key and its value between the
template's own texts (Qwen3-Coder's ``<parameter=city>``, GLM's ``<arg_key>``: ``tool_keyed.py``); a
template that writes them its own way (a Python call) is named as such by ``derive``'s reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import ChatFormatError
from .markers import leading
from .probe import CALL_ID, render, shared_start, word
from .template import ChatTemplate
from .tool_keyed import KEY_HOLE, KeyedArgs, derive_keyed

NAMES = (word("tool_one"), word("tool_two"))  # (the probe's words: ``probe.py``)
ARGS = ({word("key"): word("value")}, {word("key"): word("other")})
TEXT = word("text")  # an assistant's plain text
ID_HOLE = "\0"
COUNT_HOLE = "\1"  # a call's number (0, 1, …)
NAME_HOLE = "\2"  # the tool's name again (muse's ``to=NAME<|message|>…<atem:invoke name="NAME">``)
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
RENDERS_NO_CALLS = "the template renders no tool calls"
_PROBE_TOOLS = [{"type": "function", "function": {"name": n, "description": "A probe.", "parameters": {
    "type": "object", "properties": {word("key"): {"type": "string", "description": "A key."},
                                     word("beta"): {"type": "string", "description": "A beta."},
                                     word("num"): {"type": "integer", "description": "A number."}},
    "required": [word("key")]}}} for n in NAMES]  # every part described, as transformers' get_json_schema writes


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict
    id: str = ""


@dataclass(frozen=True)
class OpenCall:
    """A call still being written, in a reply read before its end: its name, its arguments' text so far as
    the model writes them (JSON, for a syntax of JSON arguments), and the id it wrote."""

    name: str
    arguments: str = ""
    id: str = ""


@dataclass(frozen=True)
class CallSyntax:
    """One template's call shape: ``opening NAME after_name ARGS (between NAME after_name ARGS)* closing``
    (an id hole, ``\\0``, in any piece takes an id); ``quoted``: the arguments are written as a JSON string
    of JSON. How the template takes a call's message, where it takes only OpenAI's own shape:
    ``string_arguments``, the arguments as a JSON string (written as they are, DeepSeek R1's distills, or
    quoted); ``content_none``, content None beside the calls (so a call's message keeps no text)."""

    opening: str
    after_name: str
    closing: str
    between: str | None = None  # None: one call per message
    quoted: bool = False
    lead: str = ""  # what the template writes before the opening that the model does not (an empty thought)
    keyed: KeyedArgs | None = None  # the arguments one by one (Qwen3-Coder's <parameter=…>), not one JSON object
    string_arguments: bool = False
    content_none: bool = False
    #: a known family's syntax, for a template that renders no calls (``tool_table.py``): the call stays
    #: in the message's content, where the template writes it back
    in_content: bool = False
    #: a template whose model writes a recipient first (functionary v3.2, its prompt ending ``>>>``): the
    #: recipient of text (``all\n``); a call has no opening but its tool's name, and after text ``between``
    text_lead: str = ""

    def markers(self, specials: Mapping[str, int]) -> dict[str, int]:
        """The vocabulary's special tokens (``specials``: text -> id) that this syntax writes: the grammar
        writes each as its token, and the reply parser reads each as part of a call.

            >>> CallSyntax("<tool_call>\\n{", "", "}\\n</tool_call>").markers({"<tool_call>": 5, "<s>": 1})
            {'<tool_call>': 5}
        """
        texts = [self.lead, self.opening, self.after_name, self.closing, self.between or ""]
        if self.keyed is not None:
            texts += [self.keyed.key_value, self.keyed.between_args, self.keyed.key_number, self.keyed.quote]
        written = "\n".join(texts)
        return {text: token for text, token in specials.items() if len(text) > 1 and text in written}

    def trigger(self) -> str:
        """The text that opens a call, up to an id hole (what a lazy grammar waits for); a recipient
        template's: what opens a call after text (a call that starts the reply opens with its name)."""
        if self.text_lead:
            return (self.between or "").strip()
        return re.split(f"[{ID_HOLE}{COUNT_HOLE}]", self.opening.strip())[0]



def _counted(first: str, second: str) -> str:
    """``first`` with a call's number in it made a hole, where the second call's text differs from it
    only there (Kimi K2's ``functions.NAME:0`` and ``:1``)."""
    a, b = re.sub(r"\d+", COUNT_HOLE, first), re.sub(r"\d+", COUNT_HOLE, second)
    return a if a == b and first != second else first


def _counted_ends(first: str, second: str) -> tuple[str, str]:
    """The opening and ``between``, a call's number made a hole in both where they end alike but for it
    (Command R7B's ``{"tool_call_id": "0", "tool_name": "`` and ``"1"``)."""
    i, j, differ = len(first) - 1, len(second) - 1, []
    while i >= 0 and j >= 0 and (first[i] == second[j] or (first[i].isdigit() and second[j].isdigit())):
        if first[i] != second[j]:
            differ.append((i, j))
        i, j = i - 1, j - 1
    for i, j in differ:
        first, second = first[:i] + COUNT_HOLE + first[i + 1:], second[:j] + COUNT_HOLE + second[j + 1:]
    return first, second


def _call(i: int, arguments: object) -> dict:
    return {"id": CALL_ID, "type": "function", "function": {"name": NAMES[i], "arguments": arguments}}


#: the shapes a call's message is tried in, in order: (content, arguments quoted). Transformers hands the
#: arguments as an object and most templates take that; OpenAI's API writes content None and the
#: arguments as a JSON string, and a few templates take only that.
_SHAPES = (("", False), ("", True), (None, False), (None, True))


def _renders(template: ChatTemplate, bos: str, eos: str) -> tuple[str, str, str | None, bool, bool] | str:
    """(the generation prompt's rendering, one call's, two calls', arguments quoted, content None), or why
    none: the first shape of ``_SHAPES`` in which the template writes a call."""
    user = [{"role": "user", "content": "Which tool?"}]
    options = {"bos": bos, "eos": eos, "tools": _PROBE_TOOLS}
    try:
        prompt = render(template, user, True, **options)
    except ChatFormatError as err:
        return f"the template refuses tools ({err})"
    why, took = "", False  # took: some shape rendered, with no call in it
    for content, quoted in _SHAPES:
        args = [json.dumps(a) if quoted else a for a in ARGS]
        try:
            one = render(template, user + [{"role": "assistant", "content": content, "tool_calls": [_call(0, args[0])]}],
                         False, **options)
        except ChatFormatError as err:
            why = f"the template can't render a call ({err})"
            continue
        if NAMES[0] not in one[reply_start(prompt, one):]:  # (the tool list names it too: not a call)
            took = True
            continue
        try:
            two = render(template, user + [{"role": "assistant", "content": content, "tool_calls": [
                _call(0, args[0]), _call(1, args[1])]}], False, **options)
        except ChatFormatError:
            two = None
        return prompt, one, two, quoted, content is None
    return RENDERS_NO_CALLS if took else why


def reply_start(prompt: str, rendered: str) -> int:
    """Where an assistant message's own text starts in ``rendered``, the conversation with it, after
    ``prompt``, the same conversation with the generation prompt: where they part, or, where the prompt
    opens what the message does not (a thought), the end of the line or marker before that."""
    common = shared_start(prompt, rendered)
    if common < len(prompt):
        common = max(prompt.rfind("\n", 0, common), prompt.rfind(">", 0, common)) + 1
    return common


def answer_lead(template: ChatTemplate, bos: str = "<s>", eos: str = "</s>") -> str:
    """What the template writes before an assistant's text that its generation prompt does not, which the
    model then writes itself; "" for most. Functionary v3.2's prompt ends with ``>>>``, the recipient
    then written by the model: ``all\\n`` before text (the lead), a tool's name before a call::

        prompt  …<|start_header_id|>assistant<|end_header_id|>\\n\\n>>>
        text    …<|start_header_id|>assistant<|end_header_id|>\\n\\n>>>all\\nHello<|eot_id|>   -> "all\\n"
    """
    user = [{"role": "user", "content": "Which tool?"}]
    try:
        prompt = render(template, user, True, bos=bos, eos=eos)
        text = render(template, user + [{"role": "assistant", "content": TEXT}], False, bos=bos, eos=eos)
    except ChatFormatError:
        return ""
    common = reply_start(prompt, text)
    at = text.find(TEXT, common)
    return text[common + len(_late_turn(prompt, common, text[common:])[0]):at] if at >= 0 else ""


def answer_close(template: ChatTemplate, bos: str = "<s>", eos: str = "</s>") -> str:
    """The marker the template writes right after an assistant's text, which the model then writes to end
    its answer; "" where none follows it at once::

        Command R7B  …<|START_RESPONSE|>Hello<|END_RESPONSE|><|END_OF_TURN_TOKEN|>   -> "<|END_RESPONSE|>"
        Qwen 2.5     …<|im_start|>assistant\\nHello<|im_end|>\\n                       -> "<|im_end|>"
    """
    user = [{"role": "user", "content": "Which tool?"}]
    try:
        text = render(template, user + [{"role": "assistant", "content": TEXT}], False, bos=bos, eos=eos)
    except ChatFormatError:
        return ""
    at = text.rfind(TEXT)
    marker = leading(text[at + len(TEXT):]) if at >= 0 else None
    return marker.group(1) if marker else ""


def derive(template: ChatTemplate, stops: Sequence[str] = (), bos: str = "<s>", eos: str = "</s>",
           thought_close: str = "") -> tuple[CallSyntax | None, str]:
    """The template's call shape, or (None, why not). ``stops``: the texts that end a reply (the turn's
    end is cut from the closing); ``thought_close``: a reasoning template's close marker (an empty thought
    the template writes before a call is not the model's to write)."""
    renders = _renders(template, bos, eos)
    if isinstance(renders, str):
        return None, renders
    prompt, one, two, as_string, content_none = renders
    common = reply_start(prompt, one)
    header, late = _late_turn(prompt, common, one[common:])
    text = one[common + len(header):].replace(CALL_ID, ID_HOLE)
    at = text.find(NAMES[0])
    keyed = None
    quoted = as_string and _json_span(text, json.dumps(json.dumps(ARGS[0])), at)[0] >= 0  # a string the template quotes

    def spelling(args: dict) -> str:
        return json.dumps(json.dumps(args)) if quoted else json.dumps(args)

    spelled = spelling(ARGS[0])
    if _json_span(text, spelled, at)[0] < 0:
        if not (word("key") in text and word("value") in text):
            return None, "the template writes a call's arguments its own way, not as one JSON object (not read yet)"
        keyed = derive_keyed(template, {"bos": bos, "eos": eos, "tools": _PROBE_TOOLS}, common, at)
        if isinstance(keyed, str):
            return None, keyed
    start, end = _span(text, at, 0, keyed, spelled)
    lead, opening = "", text[:at]
    if thought_close and thought_close.strip() in opening:
        cut = opening.index(thought_close.strip()) + len(thought_close.strip())
        lead, opening = opening[:cut], opening[cut:]
    after_name, tail = text[at + len(NAMES[0]):start].replace(NAMES[0], NAME_HOLE), text[end:]
    ends = [tail.find(s) for s in stops if s and tail.find(s) >= 0] + [_late_start(tail, late, prompt[:common])]
    closing = tail[:min(e for e in ends if e >= 0)] if max(ends) >= 0 else tail
    between = None
    if two is not None:
        second = two[common + len(header):].replace(CALL_ID, ID_HOLE)
        first_end = _span(second, at, 0, keyed, spelled)[1]
        name_two = second.find(NAMES[1], first_end)
        if first_end > 0 and name_two >= 0:
            between = second[first_end:name_two]
            second_start = _span(second, name_two, 1, keyed, spelling(ARGS[1]))[0]
            after_name = _counted(after_name, second[name_two + len(NAMES[1]):second_start].replace(NAMES[1], NAME_HOLE))
    if between is not None:
        opening, between = _counted_ends(opening, between)
    if keyed is not None and keyed.quote:  # the probe's last value was a string: its closing quote is the value's
        closing = closing[len(keyed.quote):] if closing.startswith(keyed.quote) else closing
        between = between[len(keyed.quote):] if between and between.startswith(keyed.quote) else between
    if keyed is not None and KEY_HOLE in keyed.between_args:  # the closing names the last argument's key too
        closing, between = closing.replace(word("key"), KEY_HOLE), between and between.replace(word("key"), KEY_HOLE)
    if keyed is not None and word("") in after_name + closing + (between or "") + keyed.between_args:
        return None, "the template writes each argument as a tag named by its key (not read yet)"
    recipient = ""
    if not opening.strip() and not after_name.strip():
        recipient = answer_lead(template, bos, eos)  # (the model writes a recipient: a tool's, or text's)
        if not (recipient.strip() and between and between.strip()) or keyed is not None:
            return None, "the template writes a call with nothing around its name"
    return CallSyntax(opening, after_name, closing, between, quoted, lead, keyed, as_string, content_none,
                      text_lead=recipient), ""


def _late_turn(prompt: str, common: int, text: str) -> tuple[str, str]:
    """Where the generation prompt writes a whole turn before the reply's header, a turn the template
    writes after a call's message instead (Command R+'s instructions, written last in every prompt):
    (the reply's header, which the generation prompt ends with and the call's message opens with; the
    late turn's first line, where the call's text ends). ("", "") for the rest::

        prompt  …<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Write 'Action:'…<|END_OF_TURN_TOKEN|>
                <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>
        call    …<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>\\nAction:…]```\\n<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Write…
        -> ("<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>Write 'Action:' followed by…")
    """
    rest = prompt[common:]
    header = next((text[:n] for n in range(min(len(rest), len(text)), 0, -1) if rest.endswith(text[:n])), "")
    late = rest[:len(rest) - len(header)].split("\n")[0]
    return (header, late) if header and late.strip() and late in text[len(header):] else ("", "")


def _late_start(tail: str, late: str, before: str) -> int:
    """Where the late turn (``_late_turn``) starts in ``tail``, its opening as ``before`` ends (the turn's
    opening the two renderings share): -1 where it is not there."""
    found = tail.find(late) if late else -1
    if found < 0:
        return -1
    shared = next((n for n in range(min(found, len(before)), 0, -1) if tail[:found].endswith(before[-n:])), 0)
    return found - shared


def _json_span(text: str, spelled: str, at: int) -> tuple[int, int]:
    """Where the JSON ``spelled`` is written in ``text`` from ``at`` on, in any spacing (Command R+ writes
    ``tojson(indent=4)``): (start, end), or (-1, 0)."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[^\s"]', spelled) if spelled else []
    found = re.compile(r"\s*".join(re.escape(t) for t in tokens)).search(text, max(at, 0)) if tokens else None
    return (found.start(), found.end()) if found else (-1, 0)


def _span(text: str, at: int, call: int, keyed: KeyedArgs | None, spelled: str) -> tuple[int, int]:
    """Where call ``call``'s arguments are in ``text``, from ``at`` (its name) on: (start, end); (-1, 0)."""
    if keyed is None:
        return _json_span(text, spelled, at)
    start = text.find(word("key"), at)
    value = ARGS[call][word("key")]
    end = text.find(value, start)
    return (start, end + len(value)) if start >= 0 and end >= 0 else (-1, 0)


def render_calls(calls: Sequence[ToolCall], as_string: bool = False) -> list[dict]:
    """Calls as a message's ``tool_calls`` (OpenAI's shape; the arguments an object, as transformers hands
    them, or ``as_string``, a JSON string, for a template that takes only that: ``CallSyntax.string_arguments``)."""
    return [{"id": c.id or f"call{i:05d}", "type": "function", "function": {
        "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False) if as_string else c.arguments}}
        for i, c in enumerate(calls)]


def tool_message(call: ToolCall, result: str) -> dict:
    """A tool's result as the message templates read it (``tool_call_id`` and ``name`` for those that ask)."""
    return {"role": "tool", "content": result, "tool_call_id": call.id or "call00000", "name": call.name}

