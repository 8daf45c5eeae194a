"""How deep a GBNF grammar goes, measured before llama.cpp's grammar code sees it.

llama.cpp reads a grammar and advances its stacks by recursion in C++. A group nested in a group is one
call deeper in its parser. In its sampler (and its check for left recursion), a rule whose alternative
starts with another rule is one call deeper, and each parenthesized group is a rule of its own there.
Deep enough, either runs off the thread's stack and the process dies with no message: on an 8 MB stack,
parentheses 20,000 deep, or 100,000 rules each starting with the next. A llama-server sent such a grammar
(``--server``) dies the same way. A rule named later in an alternative (``r1 ::= "a" r2``) costs no
depth, and 100,000 of those in a row run. Real grammars nest a few levels, so the bounds here are far
from both: a grammar past them is refused in one line, before llama.cpp is given it.

A rule's leading rules are those its alternatives can start with: the first element's, and the next
one's too while the ones before it can match nothing (``x?``, ``x*``, ``x{0,3}``, ``""``, a rule that can).
The chain is the longest path of leading rules; a rule already on the path (left recursion, which
llama.cpp refuses) ends it.

    >>> depth('root ::= ws? (item ("," item)*)? "."\\nitem ::= [a-z]+ | "(" root ")"\\nws ::= " "*')
    Depth(parentheses=2, deepest_rule='root', chain=3, chain_start='root')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: parentheses one rule may nest (20,000 ran llama.cpp's parser off an 8 MB stack; 10,000 did not)
MAX_PARENTHESES = 1_000
#: the longest chain of leading rules (100,000 ran llama.cpp off an 8 MB stack; 40,000 did not)
MAX_CHAIN = 10_000

_DEFINITION = re.compile(r"^[ \t]*([A-Za-z0-9_-]+)[ \t]*::=", re.M)
_PIECE = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|#[^\n]*|\{[^}]*\}|[A-Za-z0-9_-]+|\S', re.S)
_MAY_BE_NONE = re.compile(r"\?|\*|\{\s*0\s*(,[^}]*)?\}")  # quantifiers that allow no repetition


@dataclass(frozen=True)
class Depth:
    parentheses: int  # the deepest nesting of groups in one rule ...
    deepest_rule: str  # ... in this rule
    chain: int  # the longest chain of leading rules ...
    chain_start: str  # ... from this rule

    def problem(self) -> str:
        """"" within the bounds, else what is past them, in words."""
        if self.parentheses > MAX_PARENTHESES:
            return (f"rule '{self.deepest_rule}' nests parentheses {self.parentheses:,} deep; llama.cpp's parser "
                    f"takes up to {MAX_PARENTHESES:,} safely")
        if self.chain > MAX_CHAIN:
            return (f"its rules start with one another {self.chain:,} deep, from '{self.chain_start}'; llama.cpp "
                    f"takes up to {MAX_CHAIN:,} safely")
        return ""


@dataclass
class _Element:
    rule: str | None  # the rule it names (a group is a rule too), or None for a literal, a class or "."
    empty: bool = False  # whether it can match nothing by itself ("", or a quantifier that allows none)


@dataclass
class _Rule:
    alternatives: list[list[_Element]] = field(default_factory=lambda: [[]])
    nullable: bool = False  # whether some alternative can match nothing


def depth(gbnf: str) -> Depth:
    """The grammar's nesting, in one pass over its text and a walk of its rules (never recursive here)."""
    rules, deepest, deepest_rule = _rules(gbnf)
    _mark_nullable(rules)
    leading = {name: [e.rule for alt in rule.alternatives for e in _leading(alt, rules) if e.rule in rules]
               for name, rule in rules.items()}
    chain, start = _longest_chain(leading)
    return Depth(deepest, deepest_rule, chain, start.split("#")[0])


def _rules(gbnf: str) -> tuple[dict[str, _Rule], int, str]:
    """Every rule's alternatives (a group becomes a rule named ``RULE#N``), and the deepest group nesting
    with its rule. A rule defined twice keeps both bodies' alternatives: more, never less."""
    starts = list(_DEFINITION.finditer(gbnf))
    names = {m.group(1) for m in starts}
    rules: dict[str, _Rule] = {}
    deepest, deepest_rule = 0, ""
    for this, following in zip(starts, [*starts[1:], None]):
        name = this.group(1)
        rule = rules.setdefault(name, _Rule())
        if rule.alternatives[-1]:
            rule.alternatives.append([])
        open_groups = [rule]
        for piece in _PIECE.findall(gbnf, this.end(), following.start() if following else len(gbnf)):
            alternative = open_groups[-1].alternatives[-1]
            if piece == "(":
                group = f"{name}#{len(rules)}"
                rules[group] = _Rule()
                alternative.append(_Element(group))
                open_groups.append(rules[group])
                if len(open_groups) - 1 > deepest:
                    deepest, deepest_rule = len(open_groups) - 1, name
            elif piece == ")":
                if len(open_groups) > 1:
                    open_groups.pop()
            elif piece == "|":
                open_groups[-1].alternatives.append([])
            elif piece in ("+",) or piece.startswith("{") or _MAY_BE_NONE.fullmatch(piece):
                if alternative and _MAY_BE_NONE.fullmatch(piece):
                    alternative[-1].empty = True
            elif not piece.startswith("#"):
                alternative.append(_Element(piece if piece in names else None, piece == '""'))
    return rules, deepest, deepest_rule


def _mark_nullable(rules: dict[str, _Rule]) -> None:
    """Which rules can match nothing: until nothing changes (each round marks at least one more rule)."""
    changed = True
    while changed:
        changed = False
        for rule in rules.values():
            if not rule.nullable and any(all(_can_be_empty(e, rules) for e in alt) for alt in rule.alternatives):
                rule.nullable = changed = True


def _can_be_empty(element: _Element, rules: dict[str, _Rule]) -> bool:
    return element.empty or (element.rule is not None and element.rule in rules and rules[element.rule].nullable)


def _leading(alternative: list[_Element], rules: dict[str, _Rule]) -> list[_Element]:
    """The elements an alternative can start with."""
    found = []
    for element in alternative:
        found.append(element)
        if not _can_be_empty(element, rules):
            break
    return found


def _longest_chain(leading: dict[str, list[str]]) -> tuple[int, str]:
    """The longest path of leading rules and where it starts: a depth-first walk with an explicit stack,
    each rule's longest path kept once known; a rule still on the path is not followed again."""
    longest: dict[str, int] = {}
    on_path: set[str] = set()
    for root in leading:
        if root in longest:
            continue
        stack = [(root, iter(leading[root]))]
        on_path.add(root)
        below = {root: 0}
        while stack:
            rule, following = stack[-1]
            step = next(following, None)
            if step is None:
                stack.pop()
                on_path.discard(rule)
                longest[rule] = 1 + below.pop(rule)
                if stack:
                    parent = stack[-1][0]
                    below[parent] = max(below[parent], longest[rule])
            elif step in longest:
                below[rule] = max(below[rule], longest[step])
            elif step not in on_path:
                stack.append((step, iter(leading[step])))
                on_path.add(step)
                below[step] = 0
    start = max(longest, key=longest.get, default="")
    return longest.get(start, 0), start
