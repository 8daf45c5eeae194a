"""The message a reply makes: its thought, its answer, and its tool calls, with their arguments typed by
each tool's schema — read as the model's family writes it.

``ReplyFormat`` holds what a template says about its replies, each piece read off the template's own
renderings: the thought's markers (``tokenizer.chat.reasoning``), the call syntax
(``tokenizer.chat.tool_calls``), what the model writes before its text (functionary's ``all\\n``) and the
stop strings. The reply parser (``reply.ReplyParser``; ``reply.parse_reply`` for a whole reply) streams a
reply through its stages and, at its end, hands what they split off to ``message_of``, which makes the
message: the thoughts the answer opened again, the stop strings, the calls (``call_reader``)::

    >>> qwen = ReplyFormat(Reasoning("<think>", "</think>"),
    ...                    CallSyntax('<tool_call>\\n{"name": "', '", "arguments": ', '}\\n</tool_call>'))
    >>> answer = 'Let me look.\\n<tool_call>\\n{"name": "weather", "arguments": {"city": "Oslo"}}\\n</tool_call>'
    >>> read = message_of(qwen, ThoughtSplit(answer, "Oslo?"), answer)
    >>> read.reasoning, read.content, read.tool_calls
    ('Oslo?', 'Let me look.', (ToolCall(name='weather', arguments={'city': 'Oslo'}, id=''),))
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tokenizer.chat.errors import ChatFormatError
from tokenizer.chat.reasoning import Reasoning
from tokenizer.chat.reasoning import derive as derive_reasoning
from tokenizer.chat.template import compiled
from tokenizer.chat.tool_calls import RENDERS_NO_CALLS, CallSyntax, OpenCall, ToolCall, answer_close, answer_lead
from tokenizer.chat.tool_calls import derive as derive_calls
from tokenizer.chat.tool_table import known_syntax

from .call_reader import opens_at, parse_calls
from .channels import ChannelCall
from .typed_values import typed, unwrapped

if TYPE_CHECKING:
    from .model import Model


@dataclass(frozen=True)
class ReplyFormat:
    """What a template says about the replies written after its prompt (None: it writes no thought, no
    call)."""

    reasoning: Reasoning | None = None
    calls: CallSyntax | None = None
    answer_lead: str = ""
    stop_strings: tuple[str, ...] = ()

    @classmethod
    def of_template(cls, source: str, *, bos: str = "<s>", eos: str = "</s>", stops: Sequence[str] = (),
                    stop_strings: Sequence[str] = ()) -> ReplyFormat:
        """Read off a template's source; ``stops``: the texts of the ids that end a turn (a call's closing
        stops where they start); ``stop_strings``: texts that end a reply."""
        template = compiled(source)
        try:
            reasoning = derive_reasoning(template, bos, eos)
        except ChatFormatError:
            reasoning = None
        lead = answer_lead(template, bos, eos) if reasoning is None else ""
        close = answer_close(template, bos, eos)  # (the answer ends there, whatever the model writes after)
        wrapped = (reasoning.answer_close,) if reasoning is not None and reasoning.answer_close else ()
        return cls(reasoning, call_syntax(source, stops, bos, eos, reasoning)[0], lead if lead.strip() else "",
                   tuple(stop_strings) + ((close,) if close else ()) + wrapped)

    @classmethod
    def of_model(cls, model: Model, calls: CallSyntax | None = None, stop_strings: Sequence[str] = ()) -> ReplyFormat:
        """A loaded model's: its thought markers, what it writes before its text, its stop strings less those
        that open its thought's close (gpt-oss's ``<|end|>`` ends the analysis), with ``stop_strings`` (the
        user's) first; ``calls``: the syntax its calls are read by (None: calls are text)."""
        stops = tuple(stop_strings) + tuple(model.encoder.stop_strings)
        r = model.reasoning
        if r is not None:
            stops = tuple(s for s in stops if not r.close.startswith(s)) + ((r.answer_close,) if r.answer_close else ())
        return cls(r, calls, model.answer_lead, stops)


def call_syntax(source: str, stops: Sequence[str], bos: str, eos: str,
                reasoning: Reasoning | None) -> tuple[CallSyntax | None, str, str]:
    """The template's call syntax, read off its renderings, or where it renders no call its family's from
    the table of known syntaxes: (syntax, why none, the table's name for it or "")."""
    template = compiled(source)
    syntax, why = derive_calls(template, stops, bos or "<s>", eos or "</s>",
                               thought_close=reasoning.close if reasoning is not None else "")
    known = known_syntax(template) if why == RENDERS_NO_CALLS else None
    if known is not None:
        return known.syntax, "", known.name
    return syntax, why, ""


def model_call_syntax(model: Model) -> tuple[CallSyntax | None, str, str]:
    """A loaded model's call syntax (``call_syntax`` of its template, with the texts that end its turn):
    (syntax, why none, the table's name for it or "")."""
    template = model.detection.format.template
    if template is None:
        return None, "the model's chat format has no template, so it has no way to be told of tools", ""
    stops = [model.tokenizer.id_to_token(i) for i in model.stop_ids] + list(model.encoder.stop_strings)
    return call_syntax(template, stops, model.encoder.bos_text or "<s>", model.encoder.eos_text or "</s>",
                       model.reasoning)


@dataclass(frozen=True)
class ParsedReply:
    """A reply read whole: ``content``, the answer's text before any call (trimmed at its edges);
    ``problem``, why calls that open were not read ("": none); ``open_call``, in a reply read before its
    end (``reply.parse_reply(partial=True)``), the call still being written."""

    content: str
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    problem: str = ""
    ended_in_thought: bool = False
    open_call: OpenCall | None = None


@dataclass(frozen=True)
class ThoughtSplit:
    """What the thought stage made of a reply (``thoughts.ThoughtSplitter``): ``answer``, all the text
    after the thought as written (control tokens as their text, no stop string cut yet); ``thought``, the
    thought as shown; ``thought_raw`` and ``answer_lead``, the thought as written and the whitespace
    after it; ``in_thought``, it never closed; ``opened_in_thought``, the prompt opened it; ``closed``, it
    ended at its close marker (not where a call opened in it)."""

    answer: str
    thought: str = ""
    thought_raw: str = ""
    answer_lead: str = ""
    in_thought: bool = False
    opened_in_thought: bool = False
    closed: bool = True  # the thought (if any) ended at its close (False: it never closed, or a call ended it)
    channel_calls: tuple[ChannelCall, ...] | None = None  # a channelled reply's calls (None: not channelled)


def message_of(reply_format: ReplyFormat, split: ThoughtSplit, written: str, *,
               schemas: Mapping[str, Mapping] | None = None, thought_in_content: bool = False,
               json_answer: bool = False, prefilled: int = 0) -> ParsedReply:
    """The message a reply makes, from what its thought stage split off and ``written``, the whole reply as
    the model wrote it (control tokens as their text): the answer less the thoughts it opened again, cut
    at its first stop string before any call, then its calls read with each argument typed by ``schemas``
    (each tool's parameters by its name). ``reply.ReplyParser`` calls it when its reply ends.

    ``thought_in_content`` (llama-server's ``reasoning_format: none``): the thought stays in the content
    with its markers, the opening written out where the prompt wrote it; the answer's own opening is still
    taken off, and a thought that never closes is the content as written. ``json_answer``: the answer was
    asked for as JSON (a schema), so a Markdown fence around it (```` ```json ````) is taken off.
    ``prefilled``: the answer's first characters that were the reply's prefilled start, the user's text, in
    which no stop string counts (llama-server searches only what the model writes). For example::

        >>> cohere = ReplyFormat(Reasoning("<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>"))
        >>> split = ThoughtSplit("Hi", "hm", "hm", opened_in_thought=True)
        >>> message_of(cohere, split, "hm<|END_THINKING|><|START_RESPONSE|>Hi", thought_in_content=True).content
        '<|START_THINKING|>hm<|END_THINKING|>Hi'
    """
    r, schemas = reply_format.reasoning, schemas or {}
    marks = r.channels() if r is not None else None
    if marks is not None and split.channel_calls is not None:
        read = _channelled(reply_format, split, json_answer, schemas, prefilled)
        if not thought_in_content or not read.reasoning:
            return read
        kept = f"{r.open}{read.reasoning}{marks[0][:marks[0].index('>') + 1]}"  # (the message's end: <|end|>)
        return replace(read, content=kept + read.content, reasoning="")
    answer, thought, ended_in_thought = split.answer, split.thought, split.in_thought
    if r is not None and thought_in_content:
        answer = written if ended_in_thought or not split.closed else \
            with_thought(split.thought_raw, split.answer_lead, split.opened_in_thought, r) + answer
        thought, ended_in_thought = "", False
        prefilled = max(prefilled + len(answer) - len(split.answer), 0)  # (the prefill's place, moved)
    answer = answer[:_stopped_at(answer, reply_format, prefilled)]
    if json_answer:
        answer = _unfenced(answer)
    return read_calls(reply_format.calls, answer, thought, ended_in_thought, schemas)


def _unfenced(answer: str) -> str:
    """An answer that is one fenced block (```` ```json ```` or a bare fence) as the block's text::

        >>> _unfenced('```json\\n{"a": 1}\\n```'), _unfenced('{"a": 1}')
        ('{"a": 1}', '{"a": 1}')
    """
    fenced = re.fullmatch(r"\s*```(?:json)?[ \t]*\n(.*?)\n?```\s*", answer, re.DOTALL | re.IGNORECASE)
    return fenced.group(1) if fenced else answer


def with_thought(thought_raw: str, answer_lead: str, opened_in_thought: bool, r: Reasoning) -> str:
    """What goes before the answer when a closed thought stays in the content, as llama.cpp leaves it:
    the opening as the prompt wrote it, the thought, the close less the answer's opening (which is taken
    off as it always is), the whitespace before the answer as the model wrote it ("" for no thought)::

        >>> with_thought("hm", "\\n", False, Reasoning("<think>", "</think>"))
        '<think>hm</think>\\n'
    """
    if not thought_raw.strip():
        return ""
    opening = r.open_written if opened_in_thought and r.open_written else r.open
    close = r.close[:-len(r.answer_open)] if r.answer_open and r.close.endswith(r.answer_open) else r.close
    return f"{opening}{thought_raw}{close}{answer_lead}"


def _channelled(reply_format: ReplyFormat, split: ThoughtSplit, json_answer: bool,
                schemas: Mapping[str, Mapping], prefilled: int = 0) -> ParsedReply:
    """A channelled reply's message (``channels.ChannelSplitter`` decided each message's way): the answer
    up to its first call and stop string, the thought, and each call's arguments read as JSON (an empty
    body is ``{}``; a body that is not JSON is named in ``problem``, and the other calls are kept)."""
    answer = split.answer
    first = opens_at(reply_format.calls, answer) if reply_format.calls is not None else -1
    answer = answer[:first] if first >= 0 else answer
    answer = answer[:_stopped_at(answer, reply_format, prefilled)]
    problems: list[str] = []
    calls = channel_calls(split.channel_calls or (), problems)
    content = _unfenced(answer) if json_answer else answer
    return ParsedReply(content.strip(), split.thought, tuple(_unwrapped(calls, schemas)), "; ".join(problems),
                       split.in_thought)


def channel_calls(found: Sequence[ChannelCall], problems: list[str]) -> list[ToolCall]:
    """Channelled call messages as calls, each body read as JSON (an empty one is ``{}``); a body that is
    not JSON is named in ``problems`` and left out."""
    calls = []
    for call in found:
        try:
            arguments = json.JSONDecoder().raw_decode(call.arguments)[0] if call.arguments else {}
        except json.JSONDecodeError:
            problems.append(f"tool call {call.name!r}: its arguments are not JSON")
            continue
        calls.append(ToolCall(call.name, arguments if isinstance(arguments, dict) else {}))
    return calls


def _unwrapped(calls: list[ToolCall], schemas: Mapping[str, Mapping]) -> list[ToolCall]:
    """Each call's arguments taken out of a wrapper its tool does not declare (``typed_values.unwrapped``)."""
    return [replace(c, arguments=unwrapped(c.arguments, schemas[c.name])) if c.name in schemas else c for c in calls]


def _stopped_at(answer: str, reply_format: ReplyFormat, start: int = 0) -> int:
    """Where the first stop string from ``start`` on ends the answer: before any call opens (from there on,
    the text is the calls' own: GigaChat writes ``<|message_sep|>`` before each call, Kimi K3 ``<|close|>``
    within one)."""
    syntax = reply_format.calls
    first_call = opens_at(syntax, answer) if syntax is not None else -1
    end = first_call if first_call >= 0 else len(answer)
    found = [answer.find(stop, start, end) for stop in reply_format.stop_strings if stop]
    return min([at for at in found if at >= 0], default=len(answer))


def read_calls(syntax: CallSyntax | None, answer: str, thought: str, ended_in_thought: bool,
               schemas: Mapping[str, Mapping]) -> ParsedReply:
    """The calls in a reply's answer (a call the model opened in a thought it never closed is the answer's
    already: the thought stage ended the thought there)."""
    whole = ParsedReply(answer.strip(), thought, (), "", ended_in_thought)
    if syntax is None or opens_at(syntax, answer) < 0:
        return whole
    problems: list[str] = []
    try:
        content, calls = parse_calls(syntax, answer, problems)
    except ChatFormatError as err:
        return replace(whole, problem=str(err))
    if syntax.keyed is not None:  # keyed values are written as text: the schema types them
        separator = syntax.keyed.tag_separator()
        calls = [replace(c, arguments=typed(c.arguments, schemas[c.name], separator)) if c.name in schemas else c
                 for c in calls]
    calls = _unwrapped(calls, schemas)
    return ParsedReply(content.strip(), thought, tuple(calls), "; ".join(problems), ended_in_thought)
