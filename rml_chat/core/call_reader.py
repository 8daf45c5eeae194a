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

from tokenizer.chat.errors import ChatFormatError
from tokenizer.chat.probe import common_prefix, common_suffix
from tokenizer.chat.tool_calls import NAME_HOLE, CallSyntax, ToolCall
from tokenizer.chat.tool_keyed import KEY_HOLE

from .keyed_reader import read_keyed
from .text_patterns import cut_closing, piece

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
    return sorted((at, name) for at, name in found.items()  # (an opening without the namespace reads it as
                  if not any(at < other < at + len(name) for other in found))  # the name: the other reading wins)


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
            if own.strip() and _is_marked(own):
                found.append(own)
        first = re.match(r"\s*(<[^<>\s]+>|\[[A-Z_]+\])\s*", opening)
        if first and re.match(r"<[\w|]|\[[A-Z]", opening[first.end():]):
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
            openers = [piece(t) for t in [*self._betweens, *self._accepted] if t.strip()]  # (after a call
            # that wrote its whole closing, a call opens as the first did: one with no arguments, or the
            # model's own way)
        closed = self._closing_end(text, at)
        for shorter in _marker_prefixes(self.syntax.closing) if closed is None else ():  # (the text after the
            closed = self._closing_end(text, at, shorter)  # calls follows a closing that leaves out its
            if closed is not None:  # turn's end: Ling's "</tool_call>" without "<|role_end|>")
                break
        after = text[closed:] if closed is not None else ""
        return (content + after.rstrip() if after.strip() else content), calls

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
        if self.syntax.between:  # (another call follows: the closing's part that the next call's text shares,
            shared = common_prefix(tails[0], _after_value(self.syntax.between, between))  # cut at a line, or
            tails += [shared[:shared.rfind("\n") + 1], common_prefix(tails[0], shared, at_marker=True)]  # a marker)
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


def _without_namespace(text: str) -> str:
    """An opening less the namespace it writes before the name (Kimi K2's ``functions.``), where a model
    may leave it out; the opening as it is where it writes none.

        >>> _without_namespace("<|tool_call_begin|>functions."), _without_namespace("<tool_call>\\n<function=")
        ('<|tool_call_begin|>', '<tool_call>\\n<function=')
    """
    bare = re.sub(r"(?<=[>\]])[A-Za-z_]\w*\.$", "", text)
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


