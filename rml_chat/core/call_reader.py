"""Tool calls read out of a reply by the call syntax its template writes (``CallSyntax``, read off the
template by ``tokenizer.chat.tool_calls``), as tolerantly as llama.cpp reads them.

The syntax is data: the texts around a call's name and arguments, as the template writes them. Reading
takes each of those texts as a pattern (``text_patterns.piece``: any whitespace between markers) and
accepts what models really write beside the template's own rendering: a call list's wrapper left out, a
first marker left out where another follows, no arguments at all, a closing the turn ends inside of, the
id the model wrote. Worked example, Qwen 2.5, its second call written without the wrapper's newlines::

    >>> qwen = CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>',
    ...                   '}\\n</tool_call>\\n<tool_call>\\n{"name": "')
    >>> parse_calls(qwen, 'Sure.<tool_call>\\n{"name": "a", "arguments": {}}\\n</tool_call>'
    ...                   '<tool_call>{"name": "b", "arguments": {"x": 1}}')
    ('Sure.', [ToolCall(name='a', arguments={}, id=''), ToolCall(name='b', arguments={'x': 1}, id='')])

Arguments written one by one (Qwen3-Coder's ``<parameter=city>``) are read by ``keyed_reader``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

from tokenizer.chat import markers
from tokenizer.chat.errors import ChatFormatError
from tokenizer.chat.probe import common_prefix, common_suffix
from tokenizer.chat.tool_calls import ID_HOLE, NAME_HOLE, CallSyntax, OpenCall, ToolCall
from tokenizer.chat.tool_keyed import KEY_HOLE

from .keyed_reader import read_keyed
from .text_patterns import cut_closing, piece
from .thoughts import prefix_tail

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")


def parse_calls(syntax: CallSyntax, text: str, problems: list[str] | None = None) -> tuple[str, list[ToolCall]]:
    """(the text before the first call and after the last, the calls) in ``text``, an answer; (text, [])
    where no call opens. A call whose arguments are no JSON object raises ChatFormatError naming it; given
    ``problems``, it is named there instead and the calls after it are read all the same."""
    return _reader(syntax).parse(text, problems)


def opens_at(syntax: CallSyntax, text: str) -> int:
    """Where the first call starts in ``text``; -1 where none opens."""
    first = _reader(syntax)._first(text)
    return first[0] if first else -1


def addressed_start(syntax: CallSyntax, text: str) -> bool | None:
    """Whether a reply that starts with ``text`` opens with a call addressed by its tool's name, as
    ``parse_calls`` reads the whole reply where the model writes a recipient first (functionary v3.2): True,
    False, or None while what follows may still make it either. Any name is a call's, as llama.cpp reads
    one (a tool that does not exist is the call's error), but the recipient of text::

        >>> f = CallSyntax("", "\\n", "", ">>>", text_lead="all\\n")
        >>> [addressed_start(f, t) for t in ("get_wea", "get_weather\\n", 'get_weather\\n{"', "Hi there", "all\\nHi")]
        [None, None, True, False, False]
    """
    body = text.lstrip()
    if _reader(syntax)._addressed(body, 0):
        return True
    name = _NAME_RE.match(body)
    if not body or (name is not None and name.end() == len(body)):
        return None  # (a name, so far)
    if name is None or name.group() == syntax.text_lead.strip():
        return False
    written, due = re.sub(r"\s+", "", body[name.end():]), re.sub(r"\s+", "", syntax.after_name) + "{"
    return None if len(written) < len(due) and due.startswith(written) else False


def call_triggers(syntax: CallSyntax) -> tuple[str, ...]:
    """The literal texts a call may open with, as far as they run before a hole (what a stream holds back
    while it may be a call's start): each opening the reader accepts, and ``between`` after text where the
    model writes a recipient first::

        >>> call_triggers(CallSyntax("<tool_call>\\n<function=", ">\\n", "</function>\\n</tool_call>"))
        ('<tool_call>', '<function=')
    """
    texts = [syntax.trigger()] + [t for t in _reader(syntax)._accepted if not syntax.text_lead]
    firsts = (re.split(r"\s|[\x00-\x08]", t.strip(), maxsplit=1)[0] for t in texts)
    return tuple(dict.fromkeys(t for t in firsts if t))


def opened_calls(syntax: CallSyntax, text: str, start: int = 0) -> list[tuple[int, str]]:
    """(where its name starts, name) of each call that opens in ``text`` from ``start`` on and whose name is written whole
    (something follows it): what a stream can say of a call before its arguments are in::

        >>> qwen = CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>')
        >>> opened_calls(qwen, '<tool_call>\\n{"name": "get_weather", "argu'), opened_calls(qwen, '<tool_call>\\n{"name": "get_w')
        ([(22, 'get_weather')], [])
    """
    reader = _reader(syntax)
    between = reader._betweens
    found: dict[int, str] = {}
    for opener in (piece(t) for t in [*reader._accepted, *between] if t.strip()):
        for match in opener.finditer(text, start):
            at = match.end() + len(text[match.end():]) - len(text[match.end():].lstrip())
            name = _NAME_RE.match(text, at)
            if name is not None and name.end() < len(text):
                found[name.start()] = name.group()  # (two openings of one call name it at one place)
    first = len(text) - len(text.lstrip())
    if syntax.text_lead and first >= start and reader._addressed(text, first):  # (a recipient's call at the start)
        found[first] = _NAME_RE.match(text, first).group()  # type: ignore[union-attr]
    spans = reader.objects_out_of_order(text, start)
    found.update((o.name_at, o.name) for o in spans if o.name)
    # An opening without the namespace reads the namespace as the name; the other reading wins.
    named = sorted((at, name) for at, name in found.items() if not any(at < other < at + len(name) for other in found))
    kept: list[tuple[int, str]] = []
    inside = [(o.begin, o.end, o.name_at) for o in spans]
    for at, name in named:  # (a "name" key in a call's arguments opens no call: Llama 3.1's {"name": "Bob"})
        if not any(begin < at < end and at != own for begin, end, own in inside):
            kept.append((at, name))
            inside.append((at, reader.arguments_end(text, at + len(name), name), at))
    return kept


def unfinished_call(syntax: CallSyntax, text: str) -> tuple[int, OpenCall] | None:
    """(where it opens, the call) of the last call in ``text`` whose name is written whole but whose
    closing is not: what a reply read before its end is still writing; None where there is none::

        >>> qwen = CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>')
        >>> unfinished_call(qwen, 'Hi<tool_call>\\n{"name": "f", "arguments": {"a":')
        (2, OpenCall(name='f', arguments='{"a":', id=''))
        >>> unfinished_call(qwen, 'Hi<tool_call>\\n{"name": "f", "arguments": {"a": 1}}\\n</tool_call>') is None
        True
    """
    return _reader(syntax).unfinished(text)


def undecided_from(syntax: CallSyntax, text: str, start: int = 0) -> int:
    """Where, from ``start`` on, a call may be opening with its name not yet whole: the start of a tail
    that begins an opening, or of an opening whose name runs to the text's end (a stream gives the calls'
    text up to there, so that the next call's name is said before its text); the text's end where none is::

        >>> qwen = CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>')
        >>> text = '{"a": 1}}\\n</tool_call>\\n'
        >>> undecided_from(qwen, text + '<tool_c') == len(text), undecided_from(qwen, text) == len(text)
        (True, True)
    """
    reader = _reader(syntax)
    texts = [t.strip() for t in [*reader._accepted, *reader._betweens] if t.strip()]
    literal = [part for t in texts for part in re.split(r"[\x00-\x08]", t)[-1:] if part.strip()]  # (after a hole)
    at = len(text) - prefix_tail(text[start:], literal)
    for opener in (piece(t) for t in texts):  # (an opening may have begun before ``start``: its hole's text)
        for match in opener.finditer(text, max(start - 256, len(text) - 1024, 0)):
            name_at = match.end() + len(text[match.end():]) - len(text[match.end():].lstrip())
            name = _NAME_RE.match(text, name_at)
            if (name.end() if name is not None else name_at) >= len(text):
                at = min(at, max(match.start(), start))
    return at


@functools.lru_cache(maxsize=64)
def _reader(syntax: CallSyntax) -> _Reader:
    return _Reader(syntax)


class _Reader:
    """One syntax's reading, with the openings it accepts worked out once."""

    def __init__(self, syntax: CallSyntax):
        self.syntax = syntax
        self._accepted = self._openings()
        between = syntax.between or ""
        self._betweens = list(dict.fromkeys([between, _without_namespace(between)] if between.strip() else []))
        self._object = _object_form(syntax)
        if self._object is not None:  # (its keys in the other order open a call too)
            self._accepted.append(f'{self._object[0]}"{self._object[2]}": ')
        self._empty = self._empty_forms()

    def _openings(self) -> list[str]:
        """What may open a call: the opening as written; where a call list is wrapped, each call's own
        opening (the end of it that ``between`` ends with too: Kimi K2's ``<|tool_call_begin|>functions.``
        without ``<|tool_calls_section_begin|>``); and the opening less a first marker that another
        follows (Qwen3-Coder's ``<function=`` without ``<tool_call>``), as llama.cpp reads them."""
        opening, between = self.syntax.opening, self.syntax.between
        found = [opening]
        if self.syntax.text_lead or not opening.strip():
            return found
        if between is not None:
            own = common_suffix(opening, between, at_marker=True)
            if own.strip() and markers.is_marked(own):
                found.append(own)
        first = markers.leading(opening)
        if first and markers.START.match(opening, first.end()):
            found.append(opening[first.end():])
        found += [bare for t in found if (bare := _without_namespace(t)) != t]  # (after the namespaced: they win ties)
        return list(dict.fromkeys(t for t in found if t.strip()))

    def _first(self, text: str) -> tuple[int, re.Pattern[str]] | None:
        """(where the first call starts, the pattern that opens it), in any spacing (as written, or
        llama.cpp's test of Command R+: ``Action:\\n```json\\n[{"tool_name": …}]``); a recipient template's
        call opens with its name at the reply's start, or with ``between`` after text."""
        if not self.syntax.text_lead:
            openers = [piece(t) for t in self._accepted if t.strip()]
            found = [(m.start(), p) for p in openers for m in [p.search(text)] if m]
            return min(found, key=lambda f: f[0]) if found else None
        if self._addressed(text, 0):
            return 0, re.compile("")
        after_text = piece(self.syntax.between or "")
        return next(((m.start(), after_text) for m in after_text.finditer(text) if self._addressed(text, m.end())), None)

    def _addressed(self, text: str, at: int) -> bool:
        """Whether a call's name starts at ``at``: a name, the text after it, then the arguments' JSON
        (not the recipient of text: ``all\\n``)::

            >>> s = _Reader(CallSyntax("", "\\n", "", ">>>", text_lead="all\\n"))
            >>> s._addressed('get_weather\\n{"city": "Oslo"}', 0), s._addressed("all\\nHi", 0), s._addressed("Hi\\nthere", 0)
            (True, False, False)
        """
        name = _NAME_RE.match(text, at)
        if name is None or name.group() == self.syntax.text_lead.strip():
            return False
        glue = piece(self.syntax.after_name).match(text, name.end())
        return glue is not None and text[glue.end():].lstrip().startswith("{")

    def parse(self, text: str, problems: list[str] | None = None) -> tuple[str, list[ToolCall]]:
        """(the text before the first call and after the last, the calls), or (text, []) where no call
        opens. A call whose arguments are no JSON object raises ChatFormatError naming it::

            >>> s = CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>')
            >>> parse_calls(s, 'Let me look.\\n<tool_call>\\n{"name": "get_weather", "arguments": {"city": "Oslo"}}')
            ('Let me look.', [ToolCall(name='get_weather', arguments={'city': 'Oslo'}, id='')])

        Read as tolerantly as llama.cpp reads: any whitespace between markers, a call list's wrapper left
        out (each call's own opening alone), a closing the reply stops inside of, and no arguments at all
        (``<function=get_time>\\n</function>``). The id a model writes (Mistral's ``"id": "…"``, Kimi K2's
        ``functions.get_weather:0``, Command R7B's ``"tool_call_id": "0"``) is the call's.
        """
        lead = self.syntax.text_lead
        if lead and text.startswith(lead):  # (the recipient of text, where it was kept)
            text = text[len(lead):]
        text = self.in_order(text)
        first = self._first(text)
        if first is None:
            return text, []
        (start, opener), calls = first, []
        content, at = text[:start].rstrip(), start
        openers = [opener]
        while True:
            found = next((m for m in (p.match(text, at) for p in openers) if m), None)
            if found is None:
                break
            at = found.end() + len(text[found.end():]) - len(text[found.end():].lstrip()) if found.end() > at else at
            try:
                call, at = self._one_call(text, at, found)
            except ChatFormatError as err:
                if problems is None:
                    raise
                problems.append(str(err))  # (named; the calls after it are read all the same)
                at = self._next_opening(text, at)
                openers = [piece(t) for t in [*self._betweens, *self._accepted] if t.strip()]
                if at >= len(text):
                    break
                continue
            calls.append(call)
            if self.syntax.between is None:
                break
            # After a call that wrote its whole closing, the next opens as the first did: one with no
            # arguments, or the model's own way.
            openers = [piece(t) for t in [*self._betweens, *self._accepted] if t.strip()]
        closed = self._closing_end(text, at)
        # The text after the calls may follow a closing that leaves out its turn's end (Ling's
        # "</tool_call>" without "<|role_end|>").
        for shorter in _marker_prefixes(self.syntax.closing) if closed is None else ():
            closed = self._closing_end(text, at, shorter)
            if closed is not None:
                break
        after = text[closed:] if closed is not None else ""
        return (content + after.rstrip() if after.strip() else content), calls

    def unfinished(self, text: str) -> tuple[int, OpenCall] | None:
        """``unfinished_call``: the last opening whose name is whole (the namespaced reading where an
        opening without it reads the namespace as the name), then whether its call ends."""
        text = self.in_order(text)
        last: tuple[re.Match[str], re.Match[str]] | None = None
        for opener in (piece(t) for t in [*self._accepted, *self._betweens] if t.strip()):
            for opened in opener.finditer(text):
                at = opened.end() + len(text[opened.end():]) - len(text[opened.end():].lstrip())
                name = _NAME_RE.match(text, at)
                if name is not None and name.end() < len(text) and (last is None or at > last[1].start()):
                    last = opened, name
        if last is None:
            return None
        opened, name = last
        try:
            _, end = self._one_call(text, name.start(), opened)
            if piece(self.syntax.closing).match(text, end) is not None or not self.syntax.closing.strip():
                return None  # (its closing is written: the call is whole)
        except ChatFormatError:
            pass  # (its arguments are not whole yet)
        glue = piece(self.syntax.after_name.replace(NAME_HOLE, name.group())).match(text, name.end())
        arguments = text[glue.end() if glue else name.end():].lstrip()
        own = "" if ID_HOLE in self.syntax.closing else _model_id(text, opened, glue)  # (Mistral writes it after)
        return opened.start(), OpenCall(name.group(), arguments, own)

    def objects_out_of_order(self, text: str, start: int = 0) -> list[_OutOfOrder]:
        """Each call object written with its arguments before its name (``{"arguments": {…}, "name": "f"}``)
        from ``start`` on; [] for a syntax that is not a JSON object of two keys."""
        if self._object is None:
            return []
        begin, name_key, _ = self._object
        found = []
        for opened in piece(f'{begin}"{self._object[2]}": ').finditer(text, start):
            brace = text.rindex("{", opened.start(), opened.end())
            value, end = _json_object(text, brace)
            name = value.get(name_key) if value is not None else None
            if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
                found.append(_OutOfOrder(brace, len(text) if value is None else end))
                continue
            found.append(_OutOfOrder(brace, end, text.rfind(f'"{name}"', brace, end) + 1, name, value))
        return found

    def arguments_end(self, text: str, name_end: int, name: str) -> int:
        """Where the JSON arguments of the call whose name ends at ``name_end`` end: where the JSON ends, or
        where the call's closing starts if it is not JSON, the text's end while they are open; ``name_end``
        for a syntax whose arguments are not JSON."""
        if self.syntax.keyed is not None:
            return name_end
        glue = piece(self.syntax.after_name.replace(NAME_HOLE, name)).match(text, name_end)
        if glue is None:
            return name_end
        at = glue.end() + len(text[glue.end():]) - len(text[glue.end():].lstrip())
        try:
            return json.JSONDecoder().raw_decode(text, at)[1]
        except json.JSONDecodeError:  # (not whole yet, or malformed: up to what ends the call, if it is there)
            ends = [m.start() for t in (self.syntax.closing, self.syntax.between or "") if t.strip()
                    for m in [piece(t).search(text, at)] if m is not None]
            return min(ends, default=len(text))

    def in_order(self, text: str) -> str:
        """``text`` with each call object written in the other order of its keys rewritten in the
        template's (``{"arguments": {…}, "name": "f"}`` as ``{"name": "f", "arguments": {…}}``), other keys
        (an id) after them, so that it reads as the template's."""
        if self._object is None:
            return text
        _, name_key, arguments_key = self._object
        for found in reversed(self.objects_out_of_order(text)):
            brace, end, name, value = found.begin, found.end, found.name, found.value
            if not name or value is None or arguments_key not in value:
                continue
            rest = "".join(f", {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in value.items()
                           if k not in (name_key, arguments_key))
            arguments = json.dumps(value[arguments_key], ensure_ascii=False)
            text = f'{text[:brace]}{{"{name_key}": "{name}", "{arguments_key}": {arguments}{rest}}}{text[end:]}'
        return text

    def _next_opening(self, text: str, at: int) -> int:
        """Where the next call opens after a malformed one at ``at`` (its own opening, or the one between
        two calls); ``len(text)`` where none does."""
        found = [m.start() for t in [*self._betweens, *self._accepted] if t.strip()
                 for m in [piece(t).search(text, at + 1)] if m is not None]
        return min(found, default=len(text))

    def _one_call(self, text: str, at: int, opened: re.Match[str]) -> tuple[ToolCall, int]:
        """The call whose name starts at ``at``, and where it ends."""
        syntax = self.syntax
        name = _NAME_RE.match(text, at)
        if name is None:
            raise ChatFormatError(f"a tool call opens but names no tool: {text[at:at + 40]!r}")
        glue = piece(syntax.after_name.replace(NAME_HOLE, name.group())).match(text, name.end())
        if glue is None:
            empty = self._no_arguments(text, name.end())
            if empty is not None:
                return ToolCall(name.group(), {}, _model_id(text, opened)), empty
            raise ChatFormatError(f"tool call {name.group()!r}: {syntax.after_name.strip()!r} expected after the name")
        if syntax.keyed is not None:
            empty = self._no_arguments(text, name.end())
            if empty is not None:
                return ToolCall(name.group(), {}, _model_id(text, opened, glue)), empty
            ends = common_prefix(syntax.closing, syntax.between) if syntax.between else syntax.closing
            arguments, rest = read_keyed(syntax.keyed, text[glue.end():], ends, name.group())
        else:
            arguments, rest = _json_arguments(text[glue.end():].lstrip(), syntax.quoted, name.group())
        end = len(text) - len(rest)  # (Mistral Nemo writes the id after the arguments)
        after = [piece(t).match(text, end) for t in (syntax.between or "", syntax.closing) if t.strip()]
        # Where the id is written after the arguments (Mistral), the id in the opening that followed a call is
        # that call's: the one after this call's arguments is this one's.
        if ID_HOLE in syntax.closing:
            return ToolCall(name.group(), arguments, _model_id(text, *after, opened, glue)), end
        return ToolCall(name.group(), arguments, _model_id(text, opened, glue, *after)), end

    def _no_arguments(self, text: str, at: int) -> int | None:
        """Where a call with no arguments ends, written from ``at`` (right after its name): one of the
        ``_empty_forms``; None where none is there."""
        heads, tails = self._empty
        for head in heads:
            head_match = piece(head).match(text, at) if head.strip() else None
            if head.strip() and head_match is None:
                continue
            for tail in tails:
                end = self._closing_end(text, head_match.end() if head_match else at, tail)
                if end is not None:
                    return end
        return None

    def _empty_forms(self) -> tuple[list[str], list[str]]:
        """How a call with no arguments is written, worked out once: what the template writes after a name
        less what opens the first argument (longest first), then the closing less what ends the last value
        (Qwen3-Coder's ``>`` then ``</function>``); nothing for a syntax of JSON arguments."""
        if self.syntax.keyed is None:
            return [], []
        after_name, closing, between = self.syntax.after_name, self.syntax.closing, self.syntax.keyed.between_args
        head = after_name[:len(after_name) - len(common_suffix(after_name, between, at_marker=True))]
        heads = {head} | {after_name[:i + 1] for i, c in enumerate(after_name) if c == ">"}
        # (or cut after any marker of it, where MiniMax-M3's "]<]minimax[>[" blurs where one ends)
        tails = [_after_value(closing, between)]
        # Where another call follows: the part of the closing that the next call's text shares, cut at a line
        # or at a marker.
        if self.syntax.between:
            shared = common_prefix(tails[0], _after_value(self.syntax.between, between))
            tails += [shared[:shared.rfind("\n") + 1], common_prefix(tails[0], shared, at_marker=True)]
        return sorted(heads, key=lambda h: (-len(h), h)), list(dict.fromkeys(t for t in tails if t.strip()))

    def _closing_end(self, text: str, at: int, closing: str | None = None) -> int | None:
        """Where the call's closing ends, from ``at``: written whole, or the reply stops inside it (the
        model ended its turn with a token the closing goes on with); None where it is not there."""
        closing = self.syntax.closing if closing is None else closing
        if not closing.strip():
            return at
        whole = piece(closing).match(text, at)
        if whole is not None:
            return whole.end()
        cut = cut_closing(closing).match(text, at)
        return len(text) if cut and text[at:].strip() else None


@dataclass(frozen=True)
class _OutOfOrder:
    """A call object with its arguments before its name: where it starts, where it ends (the text's end
    while it is open), where its name is, its name and the object ("", None while it is open)."""

    begin: int
    end: int
    name_at: int = -1
    name: str = ""
    value: dict | None = None


def _object_form(syntax: CallSyntax) -> tuple[str, str, str] | None:
    """Where a call is one JSON object of a name and its arguments (Hermes' ``{"name": "f", "arguments":
    {…}}``, Mistral's, Llama 3.1's ``"parameters"``): (the opening up to the object's brace, the name's key,
    the arguments' key); None for any other syntax.

        >>> _object_form(CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>'))
        ('<tool_call>\\n{', 'name', 'arguments')
    """
    if syntax.keyed is not None or syntax.quoted or syntax.text_lead:
        return None
    name = re.search(r'\{\s*"(\w+)"\s*:\s*"$', syntax.opening)
    arguments = re.fullmatch(r'"\s*,\s*"(\w+)"\s*:\s*', syntax.after_name)
    if name is None or arguments is None:
        return None
    return syntax.opening[:name.start() + 1], name.group(1), arguments.group(1)


def _json_object(text: str, at: int) -> tuple[dict | None, int]:
    """(the JSON object at ``at``, where it ends), or (None, ``at``) where none is there whole."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, at)
    except json.JSONDecodeError:
        return None, at
    return (value, end) if isinstance(value, dict) else (None, at)


def _without_namespace(text: str) -> str:
    """An opening less the namespace it writes before the name (Kimi K2's ``functions.``), where a model
    may leave it out; the opening as it is where it writes none.

        >>> _without_namespace("<|tool_call_begin|>functions."), _without_namespace("<tool_call>\\n<function=")
        ('<|tool_call_begin|>', '<tool_call>\\n<function=')
    """
    bare = re.sub(rf"(?<=[{re.escape(markers.ENDS)}])[A-Za-z_]\w*\.$", "", text)
    return bare if bare.strip() else text


def _after_value(text: str, between_args: str) -> str:
    """``text`` (a call's closing, or the text between two calls) less what ends the last value: what it
    shares with the text between two arguments, or up to the value's tag where the tag names its key
    (MiniMax-M3's ``</city>``)::

        >>> _after_value("\\n</parameter>\\n</function>", "\\n</parameter>\\n<parameter=")
        '</function>'
    """
    if KEY_HOLE in text:
        return text[text.index(">", text.index(KEY_HOLE)) + 1:]
    return text[len(common_prefix(text, between_args, at_marker=True)):]


def _marker_prefixes(closing: str) -> list[str]:
    """The starts of a closing that end with one of its markers, longest first, less the whole.

        >>> _marker_prefixes("</arg_value>\\n</tool_call><|role_end|>")
        ['</arg_value>\\n</tool_call>', '</arg_value>']
    """
    ends = [m.end() for m in markers.ANY.finditer(closing) if m.end() < len(closing.rstrip())]
    return [closing[:end] for end in reversed(ends)]


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


