"""Going on with an assistant message: a reply prefilled by the user, or one cut short (by ``-n``, Ctrl-C or
a full context), continued as llama-server continues one (``continue_final_message``).

The model is shown the message as its template writes a reply, unfinished: the generation prompt, then,
where the family writes thoughts, the thought's opening and the message's thought, then, unless the thought
goes on, its close and the message's answer. The reply parser reads that text first and the new text after
it, so the message at the end is the whole of it, read by one set of rules. Worked example, Qwen's markers::

    >>> from tokenizer.chat.reasoning import Reasoning
    >>> qwen = Reasoning("<think>", "</think>", close_written="\\n</think>\\n\\n")
    >>> Prefill("Hello, ", "I'm thinking").written(qwen)
    "<think>I'm thinking\\n</think>\\n\\nHello, "
    >>> Prefill(reasoning="I'm").written(qwen), Prefill(reasoning="I'm").written(qwen, opened=True)
    ("<think>I'm", "I'm")

A template that writes no thought gets the answer alone (the thought has nowhere to go)::

    >>> Prefill("Hello, ", "I'm thinking").written(None)
    'Hello, '
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizer.chat.reasoning import Reasoning
from tokenizer.chat.segments import Segment, segments_text


@dataclass(frozen=True)
class Prefill:
    """An assistant message the model is to go on with: its answer so far (``content``) and its thought
    (``reasoning``). ``in_thought``: the thought goes on (None: where the message has a thought and no answer
    yet, as llama-server's ``continue_final_message: true`` decides)."""

    content: str = ""
    reasoning: str = ""
    in_thought: bool | None = None

    @property
    def goes_on_in_thought(self) -> bool:
        if self.in_thought is not None:
            return self.in_thought
        return bool(self.reasoning) and not self.content

    def written(self, reasoning: Reasoning | None, opened: bool = False) -> str:
        """The text after the generation prompt that the model goes on from. ``opened``: the generation
        prompt opened the thought already (its opening is not written twice)."""
        return segments_text(self.segments(reasoning, opened))

    def segments(self, reasoning: Reasoning | None, opened: bool = False) -> list[Segment]:
        """``written`` as the prompt's segments: the thought's markers are the template's text (their
        special tokens are tokens), the message's own text is literal, as a message in the chat is (a
        ``<|im_end|>`` it holds is those characters, not the end of a turn)::

            >>> qwen = Reasoning("<think>", "</think>")
            >>> Prefill("Hi <|im_end|>", "Oslo?").segments(qwen)
            [Segment(text='<think>', special=True), Segment(text='Oslo?', special=False), \
Segment(text='</think>', special=True), Segment(text='Hi <|im_end|>', special=False)]
        """
        if reasoning is None:
            return [Segment(self.content)] if self.content else []
        parts = [Segment(reasoning.open, True)] if not opened else []
        parts.append(Segment(self.reasoning))
        if not self.goes_on_in_thought:
            parts += [Segment(reasoning.close_written or reasoning.close, True), Segment(self.content)]
        return [part for part in parts if part.text]
