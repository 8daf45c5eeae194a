"""GBNF the chat core writes: a literal, a grammar's rules renamed apart, text that runs up to a marker
without containing it, and a reply's grammar for a reasoning model — the thought free, the answer under
the user's schema or grammar (as vLLM's reasoning parsers and llama-server's ``json_schema`` with a
thinking template do; a grammar over the whole reply would forbid the thought).

Worked example, a schema's grammar (``root ::= "{" …``) under Qwen3's markers::

    root ::= th-head th-ws a-root
    th-head ::= ( "<think>" th-s0 "</think>" )?
    th-s0 ::= [^<>/ehiknt] th-s0 | "<" th-s1 | ... | ""      (any text in which "</think>" does not occur)
    th-ws ::= [ \\t\\r\\n]{0,8}
    a-root ::= "{" ...                                       (the schema's rules, each name prefixed a-)

Where the prompt already opened the thought (DeepSeek R1 distills) the head is the thought's text and its
close; where the answer has an opening of its own (gpt-oss's ``<|channel|>final<|message|>``) a reply
without a thought starts with it.
"""

from __future__ import annotations

import json
import re

from tokenizer.chat.reasoning import Reasoning

from ..engines.base import LazyGrammar, ecma_escaped

_RULE = re.compile(r"^\s*([A-Za-z0-9-]+)\s*::=", re.M)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|#[^\n]*|[A-Za-z0-9-]+|.', re.S)
_CLASS_ESCAPES = {"\\": "\\\\", "]": "\\]", "[": "\\[", "^": "\\^", "-": "\\-", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def literal(text: str) -> str:
    """Text as a GBNF string literal (llama.cpp's parser takes JSON's escapes but \\b and \\f)::

        >>> literal('say "hi"\\n')
        '"say \\\\"hi\\\\"\\\\n"'
    """
    return json.dumps(text, ensure_ascii=False).replace("\\b", "\\x08").replace("\\f", "\\x0C")


def renamed(gbnf: str, prefix: str) -> str:
    """Every rule of ``gbnf`` prefixed, where it is defined and where it is used (never inside a literal, a
    character class or a comment)::

        >>> renamed('root ::= item+  # root: items\\nitem ::= "root"', "a-")
        'a-root ::= a-item+  # root: items\\na-item ::= "root"'
    """
    names = set(_RULE.findall(gbnf))
    return "".join(prefix + t if t in names else t for t in _TOKEN.findall(gbnf))


def _next_state(marker: str, matched: int, char: str) -> int:
    """How much of ``marker`` the text's tail matches after ``char`` follows a tail matching ``matched``."""
    seen = marker[:matched] + char
    return next(k for k in range(len(seen), -1, -1) if marker.startswith(seen[len(seen) - k:]))


def text_without(marker: str, name: str) -> list[str]:
    """Rules ``name-s0`` … : any text (empty too) in which ``marker`` does not occur, as the automaton that
    follows how much of the marker the text's tail matches. State ``i`` = the tail matches ``marker[:i]``; a
    character that would complete the marker has no way on. The characters that lead to the same state are
    one class: llama.cpp's grammar sampler keeps a stack for each way on, for every candidate token, so few
    ways keep it fast. For ``"ab"``::

        >>> for rule in text_without("ab", "t"): print(rule)
        t-s0 ::= [^a] t-s0 | "a" t-s1 | ""
        t-s1 ::= [^ab] t-s0 | "a" t-s1 | ""
    """
    rules = []
    for state in range(len(marker)):
        onward: dict[int, list[str]] = {}  # the state a marker character leads to (len(marker): no way on)
        for char in sorted(set(marker)):
            onward.setdefault(_next_state(marker, state, char), []).append(char)
        elsewhere = [c for to, chars in onward.items() if to for c in chars]  # what does not lead back to s0
        ways = [f"[^{''.join(_CLASS_ESCAPES.get(c, c) for c in elsewhere)}] {name}-s0"]
        ways += [f"{literal(chars[0]) if len(chars) == 1 else '[' + ''.join(_CLASS_ESCAPES.get(c, c) for c in chars) + ']'}"
                 f" {name}-s{to}" for to, chars in sorted(onward.items()) if 0 < to < len(marker)]
        rules.append(f"{name}-s{state} ::= {' | '.join(ways)} | \"\"")
    return rules


def answer_alone(gbnf: str, reasoning: Reasoning | None) -> bool:
    """Whether a reasoning model's schema or grammar shapes its answer alone, after a free thought: yes,
    unless the grammar writes the thought's markers itself (it shapes the whole reply, thought and all) or
    is lazy (a tool call's: free text until its trigger)."""
    return reasoning is not None and not isinstance(gbnf, (LazyGrammar, WholeReply)) and \
        not any(m.strip() and m.strip() in gbnf for m in (reasoning.open, reasoning.close))


def thought_free(gbnf: str | None, reasoning: Reasoning | None) -> bool:
    """Whether a reply's thought is free of its grammar (none, a lazy one, or one for the answer alone), so
    that the budget or Ctrl-C can end it by hand."""
    return gbnf is None or isinstance(gbnf, (LazyGrammar, ThoughtThenCall)) or answer_alone(gbnf, reasoning)


def after_thought(answer_gbnf: str, reasoning: Reasoning, in_thought: bool = False) -> str:
    """The reply's grammar: an optional thought between its markers (``in_thought``: the prompt opened it,
    so the thought's text and its close come first), a little whitespace, then ``answer_gbnf``'s ``root``.
    A reply without a thought starts with the answer's own opening, where it has one (gpt-oss's)."""
    opening, close = reasoning.open.strip() or reasoning.open, reasoning.close.strip() or reasoning.close
    body = f"th-s0 {literal(close)}"
    if in_thought:
        head = body
    elif reasoning.answer_open:
        head = f"{literal(opening)} {body} | {literal(reasoning.answer_open)}"
    else:
        head = f"( {literal(opening)} {body} )?"
    return _headed(head, close, answer_gbnf, spaced=True)


def _headed(head: str, close: str, answer_gbnf: str, spaced: bool) -> str:
    """``root ::= th-head (th-ws) a-root``: the thought's ``head`` (which runs its text as ``th-s0``, any text
    without ``close``), a little whitespace where ``spaced``, then ``answer_gbnf`` renamed apart."""
    rules = ["root ::= th-head th-ws a-root" if spaced else "root ::= th-head a-root", f"th-head ::= {head}",
             *text_without(close, "th"), *(["th-ws ::= [ \\t\\r\\n]{0,8}"] if spaced else []),
             renamed(answer_gbnf, "a-")]
    return "\n".join(rules) + "\n"


class WholeReply(str):
    """GBNF for the whole reply, as it is: never put after a thought (a required tool call where thought and
    answer are channels, gpt-oss: the call is a message of its own, from the reply's first token)."""


class ThoughtThenCall(str):
    """A required call where thought and answer are channels (gpt-oss): an optional thought, a message of
    its own, then the call, a message of its own (``thought_then_call``). ``close``: what ends a thought
    closed by hand (the budget, Ctrl-C) before the call; ``call``: the grammar from there on."""

    close: str
    call: WholeReply


def thought_then_call(call: WholeReply, reasoning: Reasoning) -> ThoughtThenCall:
    r"""The call's grammar after an optional thought in the template's channels, as gpt-oss's template
    writes a call after its analysis (``<|channel|>analysis<|message|>…<|end|><|start|>assistant`` then
    `` to=functions.NAME…``)::

        root ::= th-head a-root
        th-head ::= ( "<|channel|>analysis<|message|>" th-s0 "<|end|><|start|>assistant" )?
        (th-s0 …: any text in which "<|end|><|start|>assistant" does not occur; a-root …: the call)
    """
    separator = reasoning.channels()[0]
    made = ThoughtThenCall(_headed(f"( {literal(reasoning.open)} th-s0 {literal(separator)} )?", separator, call,
                                   spaced=False))
    made.close, made.call = separator, call
    return made


def lazy_after_thought(grammar: LazyGrammar, reasoning: Reasoning, in_thought: bool = False) -> LazyGrammar:
    r"""A lazy grammar (a tool call's) whose trigger counts only outside a thought: after the thought's close,
    or in a reply that opened none (``in_thought``: the prompt opened one, so after its close only). Its
    patterns, llama.cpp's, are searched in the reply so far; their group is where the grammar starts::

        >>> print(lazy_after_thought(LazyGrammar("root ::= ...", ["<tool_call>"]), Reasoning("<think>", "</think>")).patterns[0])
        ^(?:\s*<think>[\s\S]*?<\/think>|(?!\s*<think>))[\s\S]*?(<tool_call>)

    Where thought and answer are channels (gpt-oss: a call is a channel of its own), the triggers stay words."""
    if reasoning.channels() is not None:
        return grammar
    close, opening = ecma_escaped(reasoning.close.strip()), ecma_escaped(reasoning.open.strip())
    before = f"{close}[\\s\\S]*?" if in_thought else f"^(?:\\s*{opening}[\\s\\S]*?{close}|(?!\\s*{opening}))[\\s\\S]*?"
    return LazyGrammar(grammar, grammar.triggers, tuple(f"{before}({ecma_escaped(t)})" for t in grammar.triggers),
                       grammar.ends)


def for_reply(gbnf: str | None, reasoning: Reasoning | None, in_thought: bool, thought_over: bool) -> str | None:
    """The grammar of a reply's next call: a schema's or grammar's after a free thought (``after_thought``), a
    lazy one's trigger outside the thought (``lazy_after_thought``); once the thought is over (closed by
    hand: the budget, Ctrl-C), or for a model without thoughts, the grammar as it is."""
    if isinstance(gbnf, ThoughtThenCall):
        return gbnf.call if thought_over else gbnf
    if gbnf is None or reasoning is None or thought_over or isinstance(gbnf, WholeReply):
        return gbnf
    if isinstance(gbnf, LazyGrammar):
        return lazy_after_thought(gbnf, reasoning, in_thought)
    return after_thought(gbnf, reasoning, in_thought) if answer_alone(gbnf, reasoning) else gbnf
