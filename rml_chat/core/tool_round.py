"""A round of tool calls as the conversation holds it: the calls read off the reply just recorded, its
message rewritten as the template takes a call, and the model's own ids for the call kept in the prompt
that follows.

After a round of tool calls the prompt is rendered again by the template, call included. The template
writes the call back as the model wrote it, but the tokenizer may split that text otherwise than the
model (under the call grammar) did; evaluated afresh, the whole call would be evaluated again. So the
prompt keeps the cached ids up to the end of the call's text, and only the call's end and the results
are evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from tokenizer.chat.tool_calls import CallSyntax, ToolCall, render_calls

from .message import Message
from .turn_result import TurnResult


def calls_of_reply(message: Message, last: TurnResult, syntax: CallSyntax, notify: Callable[[str], None],
                   new_id: Callable[[], str]) -> tuple[Message, list[ToolCall]]:
    """The calls of the reply ``message`` records (as the reply parser read them: ``last.message``) and
    the message as the template takes a call (``message`` itself where it makes none); a call the model
    gave no id gets ``new_id()``. No calls where the reply was cut inside a call or wrote a broken one
    (``notify`` says which), or made none."""
    if message.role != "assistant" or message.cut or last.message is None:
        return message, []
    read = last.message
    if last.generation.stop_reason not in ("stop", "stop_string") and (read.tool_calls or read.problem):
        notify(f"tools: the reply was cut ({last.generation.stop_reason}) inside a call, which is not run")
        return message, []
    if read.problem:
        notify(f"tools: {read.problem}; the reply is kept as text")
        return message, []
    if not read.tool_calls:
        return message, []
    # A call nested in a thought that never closed: the thought ends where the call begins.
    reasoning = read.reasoning if last.ended_in_thought and not read.ended_in_thought else message.reasoning
    calls = [c if c.id else replace(c, id=new_id()) for c in read.tool_calls]
    # The message as the template takes a call: OpenAI's shape where CallSyntax asks for it, else the call in
    # the content too (tool_table.py).
    content = message.content if syntax.in_content else "" if syntax.content_none else read.content
    return replace(message, content=content, reasoning=reasoning,
                   tool_calls=tuple(render_calls(calls, syntax.string_arguments))), calls



def own_ids(cached: Sequence[int], ids: list[int], decode: Callable[[list[int]], str]) -> list[int]:
    """``ids`` with the model's own tokens for the call it just wrote: where the prompt's text goes on as the
    cached ids' text does (the template writes the call back as the model wrote it) but the tokens part
    (the model, under the grammar, split it its own way), the cached ids up to the end of that text, then
    the prompt's own ids from the next token boundary on. So only the call's end and the result are
    evaluated. Anything else (a text that differs, no boundary) leaves ``ids`` as they are::

        cached  [.. 7 8 9]   "<tool_call>" "{\"" "name"        (the model's split)
        ids     [.. 7 5 6 2]  "<tool_call>" "{\"name" <|im_end|>
        ->      [.. 7 8 9 2]
    """
    common = next((i for i, (a, b) in enumerate(zip(cached, ids)) if a != b), min(len(cached), len(ids)))
    if common == len(cached):
        return ids
    tail = decode(list(cached[common:]))
    for end in range(common + 1, len(ids) + 1):
        text = decode(ids[common:end])
        if text == tail:
            return list(cached) + ids[end:]
        if len(text) >= len(tail) or not tail.startswith(text):
            return ids
    return ids
