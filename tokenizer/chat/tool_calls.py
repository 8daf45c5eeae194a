"""How a template writes a tool call, read off its own renderings, and a reply parsed by that shape.

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
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .affix import common_prefix, common_suffix
from .errors import ChatFormatError
from .template import ChatTemplate
from .tool_keyed import KEY_HOLE, KeyedArgs, cut_closing, derive_keyed

NAMES = ("xq_tool_one", "xq_tool_two")
ARGS = ({"xq_key": "xq_value"}, {"xq_key": "xq_other"})
CALL_ID = "xq1234567"  # nine letters and digits: Mistral's templates refuse any other id
_ID_HOLE = "\0"
_COUNT_HOLE = "\1"  # a call's number (0, 1, …)
NAME_HOLE = "\2"  # the tool's name again (muse's ``to=NAME<|message|>…<atem:invoke name="NAME">``)
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
RENDERS_NO_CALLS = "the template renders no tool calls"
_PROBE_TOOLS = [{"type": "function", "function": {"name": n, "description": "A probe.", "parameters": {
    "type": "object", "properties": {"xq_key": {"type": "string", "description": "A key."},
                                     "xq_beta": {"type": "string", "description": "A beta."},
                                     "xq_num": {"type": "integer", "description": "A number."}},
    "required": ["xq_key"]}}} for n in NAMES]  # every part described, as transformers' get_json_schema writes


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict
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
    _patterns: dict = field(default_factory=dict, compare=False, repr=False)

    def _piece(self, text: str) -> re.Pattern[str]:
        """``text`` as a pattern that takes any whitespace where the template writes some, or between two
        markers (``</arg_value><arg_key>`` as ``</arg_value>\\n<arg_key>``); holes take what the model
        writes there, the first id and count as groups."""
        made = self._patterns.get(text)
        if made is None:
            holes = {_ID_HOLE: r"(?P<id>[\w\-]+)", _COUNT_HOLE: r"(?P<count>\d+)", KEY_HOLE: r"[\w.\-]+"}
            parts = []
            for part in _split_hole(text.strip()):
                parts.append(holes.pop(part, None) or {_ID_HOLE: r"[\w\-]+", _COUNT_HOLE: r"\d+"}.get(part) or re.escape(part))
            made = self._patterns[text] = re.compile(r"\s*" + r"\s*".join(parts) if text.strip() else "")
        return made

    def _openings(self) -> list[str]:
        """What may open a call: the opening as written; where a call list is wrapped, each call's own
        opening (the end of it that ``between`` ends with too: Kimi K2's ``<|tool_call_begin|>functions.``
        without ``<|tool_calls_section_begin|>``); and the opening less a first marker that another
        follows (Qwen3-Coder's ``<function=`` without ``<tool_call>``), as llama.cpp reads them."""
        found = [self.opening]
        if self.text_lead or not self.opening.strip():
            return found
        if self.between is not None:
            own = common_suffix(self.opening, self.between, at_marker=True)
            if own.strip() and _is_marked(own):
                found.append(own)
        first = re.match(r"\s*(<[^<>\s]+>|\[[A-Z_]+\])\s*", self.opening)
        if first and re.match(r"<[\w|]|\[[A-Z]", self.opening[first.end():]):
            found.append(self.opening[first.end():])
        return list(dict.fromkeys(t for t in found if t.strip()))

    def trigger(self) -> str:
        """The text that opens a call, up to an id hole (what a lazy grammar waits for); a recipient
        template's: what opens a call after text (a call that starts the reply opens with its name)."""
        if self.text_lead:
            return (self.between or "").strip()
        return re.split(f"[{_ID_HOLE}{_COUNT_HOLE}]", self.opening.strip())[0]

    def opens_at(self, text: str) -> int:
        """Where the first call starts in ``text``; -1 where none opens."""
        first = self._first(text)
        return first[0] if first else -1

    def _first(self, text: str) -> tuple[int, re.Pattern[str]] | None:
        """(where the first call starts, the piece that opens it), in any spacing (as written, or
        llama.cpp's test of Command R+: ``Action:\\n```json\\n[{"tool_name": …}]``); a recipient template's
        call opens with its name at the reply's start, or with ``between`` after text."""
        if not self.text_lead:
            pieces = [self._piece(t) for t in self._openings() if t.strip()]
            found = [(m.start(), p) for p in pieces for m in [p.search(text)] if m]
            return min(found, key=lambda f: f[0]) if found else None
        if self._addressed(text, 0):
            return 0, re.compile("")
        piece = self._piece(self.between or "")
        return next(((m.start(), piece) for m in piece.finditer(text) if self._addressed(text, m.end())), None)

    def _addressed(self, text: str, at: int) -> bool:
        """Whether a call's name starts at ``at``: a name, the text after it, then the arguments' JSON
        (not the recipient of text: ``all\\n``)::

            >>> s = CallSyntax("", "\\n", "", ">>>", text_lead="all\\n")
            >>> s._addressed('get_weather\\n{"city": "Oslo"}', 0), s._addressed("all\\nHi", 0), s._addressed("Hi\\nthere", 0)
            (True, False, False)
        """
        name = _NAME_RE.match(text, at)
        if name is None or name.group() == self.text_lead.strip():
            return False
        glue = self._piece(self.after_name).match(text, name.end())
        return glue is not None and text[glue.end():].lstrip().startswith("{")

    def parse(self, text: str) -> tuple[str, list[ToolCall]]:
        """(the text before the first call and after the last, the calls), or (text, []) where no call
        opens. A call whose arguments are no JSON object raises ChatFormatError naming it::

            >>> s = CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>')
            >>> s.parse('Let me look.\\n<tool_call>\\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\\n</tool_call>')
            ('Let me look.', [ToolCall(name='get_weather', arguments={'city': 'Oslo'}, id='')])

        Read as tolerantly as llama.cpp reads: any whitespace between markers, a call list's wrapper left
        out (each call's own opening alone), a closing the reply stops inside of, and no arguments at all
        (``<function=get_time>\\n</function>``). The id a model writes (Mistral's ``"id": "…"``, Kimi K2's
        ``functions.get_weather:0``, Command R7B's ``"tool_call_id": "0"``) is the call's.
        """
        if self.text_lead and text.startswith(self.text_lead):  # (the recipient of text, where it was kept)
            text = text[len(self.text_lead):]
        first = self._first(text)
        if first is None:
            return text, []
        (start, piece), calls = first, []
        content, at = text[:start].rstrip(), start
        pieces = [piece]
        while True:
            found = next((m for m in (p.match(text, at) for p in pieces) if m), None)
            if found is None:
                break
            at = found.end() + len(text[found.end():]) - len(text[found.end():].lstrip()) if found.end() > at else at
            call, at = self._one_call(text, at, found)
            calls.append(call)
            if self.between is None:
                break
            pieces = [self._piece(t) for t in [self.between, *self._openings()[1:]] if t.strip()]
        closed = self._closing_end(text, at)
        for shorter in _marker_prefixes(self.closing) if closed is None else ():  # (the text after the calls
            closed = self._closing_end(text, at, shorter)  # follows a closing that leaves out its turn's end:
            if closed is not None:  # Ling's "</tool_call>" without "<|role_end|>")
                break
        after = text[closed:] if closed is not None else ""
        return (content + after.rstrip() if after.strip() else content), calls

    def _one_call(self, text: str, at: int, opened: re.Match[str]) -> tuple[ToolCall, int]:
        """The call whose name starts at ``at``, and where it ends."""
        name = _NAME_RE.match(text, at)
        if name is None:
            raise ChatFormatError(f"a tool call opens but names no tool: {text[at:at + 40]!r}")
        glue = self._piece(self.after_name.replace(NAME_HOLE, name.group())).match(text, name.end())
        if glue is None:
            empty = self._no_arguments(text, name.end())
            if empty is not None:
                return ToolCall(name.group(), {}, _model_id(text, opened)), empty
            raise ChatFormatError(f"tool call {name.group()!r}: {self.after_name.strip()!r} expected after the name")
        if self.keyed is not None:
            empty = self._no_arguments(text, name.end())
            if empty is not None:
                return ToolCall(name.group(), {}, _model_id(text, opened, glue)), empty
            ends = os.path.commonprefix([self.closing, self.between]) if self.between else self.closing
            arguments, rest = self.keyed.parse(text[glue.end():], ends, self._piece, name.group())
        else:
            arguments, rest = _json_arguments(text[glue.end():].lstrip(), self.quoted, name.group())
        end = len(text) - len(rest)  # (Mistral Nemo writes the id after the arguments)
        after = [self._piece(t).match(text, end) for t in (self.between or "", self.closing) if t.strip()]
        return ToolCall(name.group(), arguments, _model_id(text, opened, glue, *after)), end

    def _no_arguments(self, text: str, at: int) -> int | None:
        """Where a call with no arguments ends, written from ``at`` (right after its name): what the
        template writes after a name less what opens the first argument, then the closing less what
        ends the last value (Qwen3-Coder's ``>`` then ``</function>``); None where that is not there."""
        if self.keyed is None:
            return None
        between = self.keyed.between_args
        head = self.after_name[:len(self.after_name) - len(common_suffix(self.after_name, between, at_marker=True))]
        heads = {head} | {self.after_name[:at + 1] for at, c in enumerate(self.after_name) if c == ">"}
        # (or cut after any marker of it, where MiniMax-M3's "]<]minimax[>[" blurs where one ends)
        tails = [self.closing[len(common_prefix(self.closing, between, at_marker=True)):]]
        if KEY_HOLE in self.closing:  # the last value ends with its key's tag (MiniMax-M3's </city>)
            tails.append(self.closing[self.closing.index(">", self.closing.index(KEY_HOLE)) + 1:])
        for head in sorted(heads, key=len, reverse=True):
            head_match = self._piece(head).match(text, at) if head.strip() else None
            if head.strip() and head_match is None:
                continue
            for tail in tails:
                end = self._closing_end(text, head_match.end() if head_match else at, tail)
                if end is not None:
                    return end
        return None

    def _closing_end(self, text: str, at: int, closing: str | None = None) -> int | None:
        """Where the call's closing ends, from ``at``: written whole, or the reply stops inside it (the
        model ended its turn with a token the closing goes on with); None where it is not there."""
        closing = self.closing if closing is None else closing
        if not closing.strip():
            return at
        whole = self._piece(closing).match(text, at)
        if whole is not None:
            return whole.end()
        cut = cut_closing(closing).match(text, at)
        return len(text) if cut and text[at:].strip() else None


def _marker_prefixes(closing: str) -> list[str]:
    """The starts of a closing that end with one of its markers, longest first, less the whole.

        >>> _marker_prefixes("</arg_value>\\n</tool_call><|role_end|>")
        ['</arg_value>\\n</tool_call>', '</arg_value>']
    """
    ends = [m.end() for m in re.finditer(r"<[^<>]+>|\[[^\[\]]+\]", closing) if m.end() < len(closing.rstrip())]
    return [closing[:end] for end in reversed(ends)]


def _is_marked(text: str) -> bool:
    """Whether ``text`` holds a marker of its own (``<…>``, ``<name=`` or ``[…]``), not only glue (``", "``)."""
    return bool(re.search(r"<[^<>\s]+>|<[\w|:]+=|\[[A-Z_]+\]", text))


def _model_id(text: str, *found: re.Match[str] | None) -> str:
    """The id the model wrote in a call: an id hole's text; else the text around a call's number, as far
    as it runs in letters, digits and ``._:-`` (Kimi K2's ``functions.get_weather:0``), or a number alone
    written as an id (Command R7B's ``"tool_call_id": "0"``)."""
    for match in found:
        if match is not None and "id" in match.re.groupindex and match.group("id") is not None:
            return match.group("id")
    for match in found:
        if match is not None and "count" in match.re.groupindex and match.group("count") is not None:
            start, end = match.span("count")
            while start > 0 and re.match(r"[\w.:\-]", text[start - 1]):
                start -= 1
            if start < match.start("count") or re.search(r"id[\"']?\s*[:=]\s*[\"']?$", text[:start]):
                return text[start:end]  # (a number alone is an id where it is said to be one, not Kimi K3's index)
    return ""


def _split_hole(text: str) -> list[str]:
    """``text`` in the parts a pattern joins with optional whitespace: at whitespace, between two markers
    (``>`` then ``<``, ``]`` then ``[``), and around holes."""
    parts: list[str] = []
    for i, part in enumerate(re.split(f"([{_ID_HOLE}{_COUNT_HOLE}{KEY_HOLE}])", text)):
        parts += [part] if i % 2 else [p for p in re.split(r"\s+|(?<=[>\]])(?=[<\[])", part) if p]
    return parts


def _counted(first: str, second: str) -> str:
    """``first`` with a call's number in it made a hole, where the second call's text differs from it
    only there (Kimi K2's ``functions.NAME:0`` and ``:1``)."""
    a, b = re.sub(r"\d+", _COUNT_HOLE, first), re.sub(r"\d+", _COUNT_HOLE, second)
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
        first, second = first[:i] + _COUNT_HOLE + first[i + 1:], second[:j] + _COUNT_HOLE + second[j + 1:]
    return first, second


def _json_arguments(text: str, quoted: bool, name: str) -> tuple[dict, str]:
    """The arguments' JSON at the start of ``text``, and what follows it."""
    try:
        value, end = json.JSONDecoder().raw_decode(text)
        if quoted and isinstance(value, str):
            value = json.loads(value)
    except json.JSONDecodeError as err:
        raise ChatFormatError(f"tool call {name!r}: its arguments are not JSON ({err.msg} at {err.pos})") from None
    if not isinstance(value, dict):
        raise ChatFormatError(f"tool call {name!r}: its arguments are {type(value).__name__}, not an object")
    return value, text[end:]


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
    options = {"bos_token": bos, "eos_token": eos, "tools": _PROBE_TOOLS}
    try:
        prompt = template.render(user, True, **options)
    except ChatFormatError as err:
        return f"the template refuses tools ({err})"
    why, took = "", False  # took: some shape rendered, with no call in it
    for content, quoted in _SHAPES:
        args = [json.dumps(a) if quoted else a for a in ARGS]
        try:
            one = template.render(user + [{"role": "assistant", "content": content, "tool_calls": [_call(0, args[0])]}],
                                  False, **options)
        except ChatFormatError as err:
            why = f"the template can't render a call ({err})"
            continue
        if NAMES[0] not in one[reply_start(prompt, one):]:  # (the tool list names it too: not a call)
            took = True
            continue
        try:
            two = template.render(user + [{"role": "assistant", "content": content, "tool_calls": [
                _call(0, args[0]), _call(1, args[1])]}], False, **options)
        except ChatFormatError:
            two = None
        return prompt, one, two, quoted, content is None
    return RENDERS_NO_CALLS if took else why


def reply_start(prompt: str, rendered: str) -> int:
    """Where an assistant message's own text starts in ``rendered``, the conversation with it, after
    ``prompt``, the same conversation with the generation prompt: where they part, or, where the prompt
    opens what the message does not (a thought), the end of the line or marker before that."""
    common = 0
    while common < min(len(prompt), len(rendered)) and prompt[common] == rendered[common]:
        common += 1
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
        prompt = template.render(user, True, bos_token=bos, eos_token=eos)
        text = template.render(user + [{"role": "assistant", "content": "xq_text"}], False, bos_token=bos, eos_token=eos)
    except ChatFormatError:
        return ""
    common = reply_start(prompt, text)
    at = text.find("xq_text", common)
    return text[common + len(_late_turn(prompt, common, text[common:])[0]):at] if at >= 0 else ""


def answer_close(template: ChatTemplate, bos: str = "<s>", eos: str = "</s>") -> str:
    """The marker the template writes right after an assistant's text, which the model then writes to end
    its answer; "" where none follows it at once::

        Command R7B  …<|START_RESPONSE|>Hello<|END_RESPONSE|><|END_OF_TURN_TOKEN|>   -> "<|END_RESPONSE|>"
        Qwen 2.5     …<|im_start|>assistant\\nHello<|im_end|>\\n                       -> "<|im_end|>"
    """
    user = [{"role": "user", "content": "Which tool?"}]
    try:
        text = template.render(user + [{"role": "assistant", "content": "xq_text"}], False, bos_token=bos, eos_token=eos)
    except ChatFormatError:
        return ""
    at = text.rfind("xq_text")
    marker = re.match(r"\s*(<[^<>\s]+>|\[[A-Z_/]+\])", text[at + len("xq_text"):]) if at >= 0 else None
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
    text = one[common + len(header):].replace(CALL_ID, _ID_HOLE)
    at = text.find(NAMES[0])
    keyed = None
    quoted = as_string and _json_span(text, json.dumps(json.dumps(ARGS[0])), at)[0] >= 0  # a string the template quotes

    def spelling(args: dict) -> str:
        return json.dumps(json.dumps(args)) if quoted else json.dumps(args)

    spelled = spelling(ARGS[0])
    if _json_span(text, spelled, at)[0] < 0:
        if not ("xq_key" in text and "xq_value" in text):
            return None, "the template writes a call's arguments its own way, not as one JSON object (not read yet)"
        keyed = derive_keyed(template, {"bos_token": bos, "eos_token": eos, "tools": _PROBE_TOOLS}, common, at)
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
        second = two[common + len(header):].replace(CALL_ID, _ID_HOLE)
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
        closing, between = closing.replace("xq_key", KEY_HOLE), between and between.replace("xq_key", KEY_HOLE)
    if keyed is not None and "xq_" in after_name + closing + (between or "") + keyed.between_args:
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
    start = text.find("xq_key", at)
    value = ARGS[call]["xq_key"]
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

