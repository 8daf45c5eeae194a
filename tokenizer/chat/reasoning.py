"""Reasoning markers, read off a template's own renderings: what opens and closes a thought, what opens
the answer, whether the generation prompt already opens a thought, and what the template does with an
earlier turn's thought.

Nothing here is a list of families. The template is asked to render one assistant message with a thought
(``R``) and an answer (``A``), handed over the ways templates take one — the ``reasoning_content`` field
(Qwen3, GLM, MiniMax, Kimi), ``thinking`` (gpt-oss), ``reasoning``, or inline in the content with one of
the tag pairs models write (``<think>…</think>``, ``[THINK]…[/THINK]``, ``<seed:think>…</seed:think>``) —
and the same message without the thought. Where the two renderings part, the text before ``R`` opens the
thought, the text between ``R`` and ``A`` closes it, and the text before ``A`` in the plain rendering
opens the answer. Worked example, gpt-oss (``thinking`` = R, content = A, after ``<|start|>assistant``)::

    with     <|channel|>analysis<|message|>R<|end|><|start|>assistant<|channel|>final<|message|>A<|return|>
    without  <|channel|>final<|message|>A<|return|>
    -> open "<|channel|>analysis<|message|>", close "<|end|><|start|>assistant<|channel|>final<|message|>",
       answer_open "<|channel|>final<|message|>"

For Qwen3 the same gives open ``<think>``, close ``</think>`` (whitespace around them is the template's
and stays the model's: it is part of the thought's and the answer's text, trimmed only for display).
The generation prompt *prefills* the thought when its rendering ends with the opening marker (DeepSeek R1
distills, MiniMax-M2). ``history`` is what a two-exchange rendering keeps of the two thoughts: ``drop``
(neither), ``keep`` (both) or ``last`` (the later one only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from . import markers
from .markers import ANSWER_TAGS, INLINE_TAGS, THINK_CLOSE, THINK_OPEN
from .probe import hole, parting, render, rendered
from .template import ChatTemplate

#: the fields templates read an assistant's thought from, and the tag pairs models write it in
FIELDS = ("reasoning_content", "thinking", "reasoning")

#: a thought, an answer and a user's text, each between two holes (``probe.py``): texts no template writes
_R, _A, _U = (hole("reasoning", 2 * n) + letter + hole("reasoning", 2 * n + 1) for n, letter in enumerate("RAU"))


@dataclass(frozen=True)
class Reasoning:
    """How one template writes a thought. ``field`` "content" means inline: ``open + R + close + A``."""

    open: str
    close: str
    answer_open: str = ""
    field: str = "content"
    prefilled: bool = False
    history: str = "drop"
    close_written: str = ""  # the close with the whitespace the template writes around it ("\n</think>\n\n")
    strips_answer: bool = True  # with history "drop": the template trims the answer's leading whitespace
    open_written: str = ""  # a prefilled opening as the generation prompt writes it ("<think>\n")
    answer_close: str = ""  # what ends an answer the instructions wrap (Granite 3.3's "</response>")

    def channels(self) -> tuple[str, str, str, str, str] | None:
        """Where the thought and the answer are two named channels of one shape, a new message apart
        (gpt-oss): (what starts the next message, what starts a name, what ends it, the thought's name,
        the answer's name); else None. Read off the markers alone::

            >>> Reasoning("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>",
            ...           "<|channel|>final<|message|>").channels()
            ('<|end|><|start|>assistant', '<|channel|>', '<|message|>', 'analysis', 'final')
        """
        o, a = self.open, self.answer_open
        if not a or o == a or not self.close.endswith(a) or self.close == a:
            return None
        head = 0
        while head < min(len(o), len(a)) and o[head] == a[head]:
            head += 1
        tail = 0
        while tail < min(len(o), len(a)) - head and o[-1 - tail] == a[-1 - tail]:
            tail += 1
        start, end = o[:head], o[len(o) - tail:]
        names = o[head:len(o) - tail], a[head:len(a) - tail]
        if not (start.endswith((">", "]")) and end.startswith(("<", "[")) and all(n.isalpha() for n in names)):
            return None  # the names stand between two markers (Cohere's <|START_THINKING|>/<|START_TEXT|> do not)
        return self.close[:-len(a)], start, end, *names

    def message(self, answer: str, thought: str, calls: bool = False) -> dict[str, str]:
        """An assistant message with a thought, as this template takes it. Inline, the texts as the model
        wrote them (the template cuts and trims them itself); in a field, trimmed, as llama-server hands
        over a parsed reply; for a template that drops thoughts, the answer alone (an inline thought is
        not always one the template's fitted format was probed with: Gemma 4's is not).

            >>> Reasoning("<think>", "</think>", history="keep").message("\\n\\nHi", "\\nhm\\n")["content"]
            '<think>\\nhm\\n</think>\\n\\nHi'
            >>> Reasoning("<think>", "</think>", field="reasoning_content", history="keep").message("\\n\\nHi", "hm")
            {'role': 'assistant', 'content': 'Hi', 'reasoning_content': 'hm'}

        A template that drops thoughts gets the answer alone, as it would leave it (Qwen3, QwQ)::

            >>> Reasoning("<think>", "</think>", history="drop").message("\\n\\nHi", "hm")
            {'role': 'assistant', 'content': 'Hi'}

        A message that makes tool ``calls`` gets its thought in the field all the same: the template decides
        (Qwen3 keeps the thoughts after the last user message, so the call's thought stays in the cache)::

            >>> Reasoning("<think>", "</think>", field="reasoning_content").message("", "hm", calls=True)
            {'role': 'assistant', 'content': '', 'reasoning_content': 'hm'}
        """
        if self.field != "content":
            return {"role": "assistant", "content": answer.lstrip(),
                    **({} if self.history == "drop" and not calls else {self.field: thought.strip()})}
        if self.history == "drop":  # the template drops it: the answer alone, as the template leaves it
            return {"role": "assistant", "content": answer.lstrip() if self.strips_answer else answer}
        return {"role": "assistant", "content": self.open + thought + self.close + answer}


def _render(template: ChatTemplate, messages: list[dict], generation: bool, bos: str, eos: str,
            thinking: bool | None = None) -> str | None:
    return rendered(template, messages, generation, bos=bos, eos=eos, thinking=thinking, strftime_now=lambda _: "")


def _parted(with_thought: str, plain: str, header: str) -> tuple[str, str, str, bool, str] | None:
    """(open, close, answer_open, prefilled, close as written) from one assistant message rendered with and without a
    thought, after the user's text; ``header`` is the generation prompt's text there. None: no thought."""
    if _R not in with_thought or _A not in with_thought or _A not in plain:
        return None
    r_at, a_at = with_thought.index(_R), with_thought.index(_A)
    start = min(parting(with_thought, plain, header), r_at)
    open_text, prefilled = with_thought[start:r_at].strip(), False
    close_written = with_thought[r_at + len(_R):a_at]
    close = close_written.strip()
    if not open_text:  # the generation prompt writes the opening marker itself (Apriel, GLM)
        candidate, named = header[parting(header, with_thought):].strip(), _named_opening(header, close)
        open_text, prefilled = (named if named.endswith(candidate) else candidate or named), True
    answer_open = plain[min(start, plain.index(_A)):plain.index(_A)].strip()
    if not open_text or not close or open_text in answer_open:
        answer_open = "" if open_text and close else answer_open
    return (open_text, close, answer_open, prefilled, close_written) if open_text and close else None


def _named_opening(header: str, close: str) -> str:
    """Where the generation prompt ends with the whole opening, the renderings share it and part only
    after it: the opening is the prompt's last marker that names what the close names (Kimi K3's
    ``<|open|>think<|sep|>`` for ``<|close|>think<|sep|>``); "" where none does.

        >>> _named_opening('<|open|>message role="assistant"<|sep|><|open|>think<|sep|>', "<|close|>think<|sep|>")
        '<|open|>think<|sep|>'
    """
    words = re.findall(r"[A-Za-z]\w*", markers.ANY.sub(" ", close))  # (outside its markers)
    found = max((header.rfind(w) for w in words), default=-1)
    start = max(header.rfind("<", 0, found), header.rfind("[", 0, found)) if found > 0 else -1
    return header[start:].strip() if start >= 0 else ""


def _header(template: ChatTemplate, bos: str, eos: str) -> str:
    """The generation prompt's text after the user's, with thinking on where the template reads it."""
    thinking = True if template.reads_thinking else None
    text = _render(template, [{"role": "user", "content": _U}], True, bos, eos, thinking) or ""
    return text.split(_U, 1)[-1]


def derive(template: ChatTemplate, bos: str = "<s>", eos: str = "</s>") -> Reasoning | None:
    """The template's reasoning markers (module docstring), or None for a template that writes no thought;
    with the tags its instructions wrap an answer in (``ANSWER_TAGS``), as the answer's opening and close."""
    found = _markers(template, bos, eos)
    named = [(o, c) for o, c in ANSWER_TAGS if o + c in template.source]  # (rendered again only where named)
    if found is None or found.answer_open or not named:
        return found
    plain = _render(template, [{"role": "user", "content": _U}, {"role": "assistant", "content": _A}], False, bos, eos)
    for open_text, close in named:
        if plain is not None and open_text not in plain:
            return replace(found, answer_open=open_text, answer_close=close)
    return found


def _markers(template: ChatTemplate, bos: str, eos: str) -> Reasoning | None:
    """``derive``'s thought markers."""
    user = {"role": "user", "content": _U}
    plain = _render(template, [user, {"role": "assistant", "content": _A}], False, bos, eos)
    if plain is None:
        return None
    header, plain = _header(template, bos, eos), plain.split(_U, 1)[-1]
    tags = [(o, c) for o, c in INLINE_TAGS if o in template.source]
    ways = [(name, {"role": "assistant", "content": _A, name: _R}) for name in FIELDS]
    ways += [("content", {"role": "assistant", "content": o + _R + c + _A}) for o, c in tags]
    for field, message in ways:
        rendered = (_render(template, [user, message], False, bos, eos) or "").split(_U, 1)[-1]
        parted = _parted(rendered, plain, header)
        if parted is not None:
            if field == "content":  # the tags are the content's own (what else parted is the template's)
                parted = (*next((o, c) for o, c in tags if message["content"].startswith(o)), *parted[2:])
            found = Reasoning(*parted[:3], field, parted[3], history="keep")  # (a message that carries the thought)
            prefilled = parted[3] or header.rstrip().endswith(found.open)
            return Reasoning(*parted[:3], field, prefilled, _history(template, found, bos, eos), parted[4],
                             _strips_answer(template, found, bos, eos),
                             header[header.rfind(found.open):] if prefilled else "")
    borne = _call_borne(template, plain, bos, eos)
    if borne is not None:
        return replace(borne, prefilled=header.rstrip().endswith(borne.open), history=_history(template, borne, bos, eos))
    for open_text, close in tags:  # the template drops every thought from history: the tags it names
        if header.rstrip().endswith(open_text) or open_text in template.source:
            found = Reasoning(open_text, close, "", "content", header.rstrip().endswith(open_text), "keep")
            return replace(found, history=_history(template, found, bos, eos),
                           strips_answer=_strips_answer(template, found, bos, eos),
                           open_written=header[header.rfind(open_text):] if found.prefilled else "")
    return None
_CALL = {"id": "call0", "type": "function", "function": {"name": "f", "arguments": {}}}


def _call_borne(template: ChatTemplate, plain: str, bos: str, eos: str) -> Reasoning | None:
    """The thought of a template that writes one only before a call (Command R7B: ``<|START_THINKING|>``
    plan ``<|END_THINKING|><|START_ACTION|>``…, and ``<|START_RESPONSE|>`` answer without one): the markers
    on either side of the thought in a call-making message, where the plain answer's rendering has neither.
    The answer's opening is then what the plain rendering writes before the answer."""
    marker = markers.ANY.pattern
    for field in FIELDS:
        message = {"role": "assistant", "content": "", "tool_calls": [_CALL], field: _R}
        rendered = (_render(template, [{"role": "user", "content": _U}, message], False, bos, eos) or "").split(_U, 1)[-1]
        if _R not in rendered:
            continue
        before, after = rendered.split(_R, 1)
        opened = re.search(rf"({marker})\s*$", before)
        closed = re.match(rf"\s*({marker})", after)
        answer_end = plain.index(_A) + len(_A)
        answered = plain[:answer_end] + (m.group() if (m := re.match(rf"\s*({marker})", plain[answer_end:])) else "")
        if opened is None or closed is None or opened.group(1) in answered or closed.group(1) in answered:
            return None  # (the plain answer's own message writes them: they are not the thought's)
        answer_open = re.search(rf"({marker})\s*$", plain[:plain.index(_A)])
        return Reasoning(opened.group(1), closed.group(1), answer_open.group(1) if answer_open else "", field,
                         history="keep", close_written=closed.group())
    return None


def _strips_answer(template: ChatTemplate, found: Reasoning, bos: str, eos: str) -> bool:
    """Whether the template trims the whitespace before an answer that follows an inline thought (in a
    field, the answer is handed over trimmed anyway)."""
    if found.field != "content":
        return True
    message = {"role": "assistant", "content": found.open + _R + found.close + "\n\n" + _A}
    text = _render(template, [{"role": "user", "content": _U}, message], False, bos, eos) or ""
    return "\n\n" + _A not in text


def _history(template: ChatTemplate, found: Reasoning, bos: str, eos: str) -> str:
    r1, r2 = _R.replace("R", "R1"), _R.replace("R", "R2")
    messages = [{"role": "user", "content": _U}, found.message(_A, r1), {"role": "user", "content": _U},
                found.message(_A, r2), {"role": "user", "content": _U}]
    text = _render(template, messages, True, bos, eos) or ""
    return {(True, True): "keep", (False, True): "last"}.get((r1 in text, r2 in text), "drop")


def from_record(strip_think: str, generation_prompt: str) -> Reasoning | None:
    """A table record's markers, for a model without a template (``--chat-format qwen3`` on a GGUF that
    lost its template): a record that drops ``<think>…</think>`` from history writes thoughts that way.

        >>> from_record("split", "<｜Assistant｜><think>\\n").prefilled
        True
        >>> from_record("", "<|im_start|>assistant\\n") is None
        True
    """
    if not strip_think:
        return None
    return Reasoning(THINK_OPEN, THINK_CLOSE, prefilled=generation_prompt.rstrip().endswith(THINK_OPEN), history="drop",
                     close_written="\n</think>\n\n")


def effort_changes_prompt(template: ChatTemplate, effort: str, bos: str = "<s>", eos: str = "</s>") -> bool:
    """Whether the template writes another prompt with ``reasoning_effort`` set to ``effort`` than without
    it (gpt-oss: "Reasoning: high" for "Reasoning: medium"; "medium", its default, writes the same). Raises
    TemplateRaised with the template's words for a value it refuses (Hunyuan's "should be no_think/low/high").

        >>> t = ChatTemplate("{{ 'Reasoning: ' + (reasoning_effort or 'medium') }}{{ messages[0].content }}")
        >>> effort_changes_prompt(t, "high"), effort_changes_prompt(t, "medium")
        (True, False)
    """
    messages = [{"role": "user", "content": "x"}]
    with_effort = render(template, messages, True, bos=bos, eos=eos, strftime_now=lambda _: "", effort=effort)
    return with_effort != render(template, messages, True, bos=bos, eos=eos, strftime_now=lambda _: "")
