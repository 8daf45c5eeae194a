"""A prompt format fitted to a template: the template's own text between message contents, as a table.

A conversation is written as a sequence of *items* (the system text, each user text, an assistant's
reasoning and its answer) with the template's text between them — the *pieces*::

    piece(^, system) S piece(system, user) U1 piece(user, assistant) A1 … piece(user, $gp)

Each piece is looked up by the roles on both sides plus the few flags the template turned out to depend
on (``fit.py`` finds which: for Qwen3 the piece before an assistant answer depends on whether it comes
after the last user message). Each content passes through one of a handful of whitespace transforms, or is
dropped, also looked up by role and flags. Worked example, ChatML (no flags needed)::

    pieces  (^, user) "<|im_start|>user\\n"     (user, assistant) "<|im_end|>\\n<|im_start|>assistant\\n"
            (assistant, user) "<|im_end|>\\n<|im_start|>user\\n"   (user, $gp) "<|im_end|>\\n<|im_start|>assistant\\n"
    [user "Hi"] + generation prompt -> "<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n"

Pieces are template text (special tokens in them are parsed); contents are always literal. BOS, EOS and
dates are holes in the pieces, filled when a prompt is written. A conversation outside what the fit was
verified on (a tool message, roles that don't alternate, an empty message …) raises ``OutOfDomain``:
the caller renders it with the template itself.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .errors import ChatFormatError
from .markers import THINK_CLOSE, THINK_OPEN
from .probe import BOS_HOLE, DATE_CLOSE, DATE_OPEN, EOS_HOLE
from .segments import Segment

# Holes in pieces: the probe's sentinels for BOS, EOS and a date (fit.py renders with them as the texts).
_HOLES = re.compile(f"({BOS_HOLE}|{EOS_HOLE}|{DATE_OPEN}[^{DATE_CLOSE}]*{DATE_CLOSE})")

START, GEN, END = "^", "$gp", "$end"  # the roles of the start, the generation prompt, the end without one

#: The whitespace transforms templates apply to contents (``| trim`` is strip). Each gives a different
#: result on fit.py's padded probes ("\n \tX\t \n"), so a probe tells which one ran.
TRANSFORMS: dict[str, Callable[[str], str]] = {
    "as_is": lambda s: s,
    "strip": str.strip,
    "lstrip": str.lstrip,
    "rstrip": str.rstrip,
    "strip_newlines": lambda s: s.strip("\n"),
    "lstrip_newlines": lambda s: s.lstrip("\n"),
    "rstrip_newlines": lambda s: s.rstrip("\n"),
    "lstrip_newlines+rstrip": lambda s: s.rstrip().lstrip("\n"),  # Qwen3.5: the whole content trimmed, then split
    "lstrip+rstrip_newlines": lambda s: s.lstrip().rstrip("\n"),
    "drop": lambda s: "",
}

#: Flags an item carries. ``sys``, ``think`` and ``gp`` belong to the whole conversation.
ITEM_FLAGS = ("first_turn", "last", "last_user", "after_last_user", "last_assistant", "reasoning")
GLOBAL_FLAGS = ("sys", "think", "gp")


class OutOfDomain(ChatFormatError):
    """A conversation of a shape the fitted table was not verified on."""


@dataclass
class Item:
    role: str                    # system | user | reasoning | assistant | $gp | $end
    content: str = ""
    flags: dict[str, object] = field(default_factory=dict)


def split_reasoning(content: str) -> tuple[str, str] | None:
    """``"<think>R</think>A"`` -> (R, A), as reasoning templates cut it (``split('</think>')``); None when
    there is no ``</think>``. Content with a second ``</think>``, or text before ``<think>``, is outside
    the domain (templates disagree on it)."""
    if THINK_CLOSE not in content:
        return None
    before, after = content.split(THINK_CLOSE, 1)
    if THINK_CLOSE in after or before.count(THINK_OPEN) > 1 or before.split(THINK_OPEN)[0] and THINK_OPEN in before:
        raise OutOfDomain("an assistant message with more than one reasoning block")
    return before.split(THINK_OPEN)[-1], after


def check_domain(messages: Sequence[Mapping[str, object]]) -> None:
    """Raise OutOfDomain unless the conversation has the shape every established format is verified on:
    an optional system message first, then user and assistant messages alternating from a user message,
    each with a role and a content only (no tool calls, names …), every content a string with something
    besides whitespace (and reasoning, where there is any)."""
    if any(key not in ("role", "content") for m in messages for key in m):
        raise OutOfDomain("a message with fields besides role and content")
    roles = [m.get("role") for m in messages]
    turns = roles[1:] if roles and roles[0] == "system" else roles
    if not turns or any(role != ("user", "assistant")[i % 2] for i, role in enumerate(turns)):
        raise OutOfDomain("roles other than [system,] user, assistant, user, …")
    for m in messages:
        content = m.get("content")
        if not isinstance(content, str) or not content.strip():
            raise OutOfDomain("a message whose content is not a string with text in it")
        parts = split_reasoning(content) if m.get("role") == "assistant" else None
        if parts is not None and not parts[0].strip():
            raise OutOfDomain("an assistant message with empty reasoning")


def conversation_items(messages: Sequence[Mapping[str, object]], add_generation_prompt: bool,
                       thinking: bool | None, reasoning: bool = True) -> list[Item]:
    """The items of a conversation (``check_domain``) in message order, each with its flags, then the end
    item. With ``reasoning`` an assistant's ``<think>…</think>`` is an item of its own (the template
    parses it)."""
    check_domain(messages)
    roles = [m.get("role") for m in messages]
    system = roles[0] == "system"
    last_user = max(i for i, role in enumerate(roles) if role == "user")
    last_assistant = max((i for i, role in enumerate(roles) if role == "assistant"), default=-1)
    common = {"sys": system, "think": thinking, "gp": add_generation_prompt}
    items: list[Item] = []
    for i, message in enumerate(messages):
        role, content = str(message["role"]), str(message["content"])
        parts = split_reasoning(content) if role == "assistant" else None
        flags = {"first_turn": i == int(system), "last": i == len(messages) - 1, "last_user": i == last_user,
                 "after_last_user": i > last_user,
                 "last_assistant": i == last_assistant, "reasoning": _reasoning_kind(content, parts), **common}
        if parts is None or not reasoning:  # written whole (the template may still look at its kind)
            items.append(Item(role, content, flags))
        else:
            items += [Item("reasoning", parts[0], flags), Item("assistant", parts[1], flags)]
    end_flags = {"first_turn": False, "last": True, "last_user": False, "after_last_user": True,
                 "last_assistant": False, "reasoning": False, **common}
    items.append(Item(GEN if add_generation_prompt else END, "", end_flags))
    return items


def start_item(items: Sequence[Item]) -> Item:
    """The item before the first piece: no item flags, the conversation's global ones (from the end item)."""
    return Item(START, "", {**dict.fromkeys(ITEM_FLAGS, False), **{f: items[-1].flags[f] for f in GLOBAL_FLAGS}})


def _reasoning_kind(content: str, parts: tuple[str, str] | None) -> str | bool:
    """False, "tagged" (``<think>R</think>A``) or "untagged" (``R</think>A``: the reply of a model whose
    generation prompt ends with ``<think>``); templates may treat the two differently."""
    if parts is None:
        return False
    return "tagged" if THINK_OPEN in content else "untagged"


def _system_before_last_user(items: list[Item], drop_unless_last: bool) -> list[Item]:
    if not items or items[0].role != "system":
        return items
    system, rest = items[0], items[1:]
    at = max(i for i, item in enumerate(rest) if item.role == "user")
    if drop_unless_last and not rest[at].flags["last"]:
        return rest
    return rest[:at] + [system] + rest[at:]


#: Where the system text is written, as templates do it. Mistral Nemo writes it into the last user turn,
#: and only when that turn is the last message.
ORDERS: dict[str, Callable[[list[Item]], list[Item]]] = {
    "in_order": lambda items: items,
    "system_in_final_user": lambda items: _system_before_last_user(items, True),
    "system_before_last_user": lambda items: _system_before_last_user(items, False),
}


def feature_value(feature: str, prev: Item, item: Item) -> object:
    """``"next.last"`` reads the flag of the item after the piece, ``"prev.reasoning"`` of the one before it,
    a global flag (``"sys"``) the conversation's."""
    side, _, flag = feature.rpartition(".")
    return (prev if side == "prev" else item).flags.get(flag)


@dataclass
class FittedFormat:
    """A prompt format read off a template (see the module docstring). ``template`` is kept for what the
    table does not cover."""

    name: str
    order: str
    piece_features: tuple[str, ...]
    pieces: dict[tuple, str]
    transform_flags: tuple[str, ...]
    transforms: dict[tuple, str]
    refusals: dict[str, str] = field(default_factory=dict)  # "system": the template's message
    reasoning: bool = True  # the template parses <think>…</think> in assistant messages (else: content)
    template: str | None = None

    def piece_key(self, prev: Item, item: Item) -> tuple:
        return (prev.role, item.role, *(feature_value(f, prev, item) for f in self.piece_features))

    def transform_key(self, item: Item) -> tuple:
        return (item.role, *(item.flags.get(f) for f in self.transform_flags))

    @property
    def thinking_switch(self) -> bool:
        """Thinking on and off write different prompts (the fit needed the switch in its keys)."""
        return "think" in self.piece_features or "think" in self.transform_flags

    @property
    def writes_bos(self) -> bool:
        return any(BOS_HOLE in text for key, text in self.pieces.items() if key[0] == START)

    def template_texts(self) -> list[str]:
        return list(self.pieces.values())

    def after_assistant_texts(self) -> list[str]:
        """The pieces that follow an assistant answer: the template's end of a reply."""
        return [text for key, text in self.pieces.items() if key[0] == "assistant"]

    def write(self, messages: Sequence[Mapping[str, object]], add_generation_prompt: bool, *, bos_token: str,
              eos_token: str, thinking: bool | None, now: datetime.datetime) -> list[Segment]:
        if "system" in self.refusals and messages and messages[0].get("role") == "system":
            raise ChatFormatError(self.refusals["system"])
        items = ORDERS[self.order](conversation_items(messages, add_generation_prompt, thinking, self.reasoning))
        out: list[Segment] = []
        prev = start_item(items)
        for item in items:
            piece = self.pieces.get(self.piece_key(prev, item))
            transform = self.transforms.get(self.transform_key(item), "as_is" if item.role in (GEN, END) else None)
            if piece is None or transform is None:
                raise OutOfDomain(f"no verified piece before a {item.role} item here")
            _fill(piece, out, bos_token, eos_token, now)
            text = TRANSFORMS[transform](item.content)
            if text:
                out.append(Segment(text, False))
            prev = item
        return out

    # ----- the cache's form: JSON -------------------------------------------------------------------

    def to_json(self) -> dict:
        return {"name": self.name, "order": self.order, "piece_features": list(self.piece_features),
                "pieces": [[list(k), v] for k, v in self.pieces.items()],
                "transform_flags": list(self.transform_flags),
                "transforms": [[list(k), v] for k, v in self.transforms.items()], "refusals": self.refusals,
                "reasoning": self.reasoning}

    @classmethod
    def from_json(cls, data: dict, template: str | None) -> FittedFormat:
        return cls(data["name"], data["order"], tuple(data["piece_features"]),
                   {tuple(k): v for k, v in data["pieces"]}, tuple(data["transform_flags"]),
                   {tuple(k): v for k, v in data["transforms"]}, dict(data["refusals"]), bool(data["reasoning"]),
                   template)


def _fill(piece: str, out: list[Segment], bos_token: str, eos_token: str, now: datetime.datetime) -> None:
    """Append a piece as template text, its holes filled."""
    for part in _HOLES.split(piece) if DATE_OPEN in piece or BOS_HOLE in piece or EOS_HOLE in piece else (piece,):
        if part == BOS_HOLE:
            part = bos_token
        elif part == EOS_HOLE:
            part = eos_token
        elif part.startswith(DATE_OPEN):
            part = now.strftime(part[1:-1])
        if part:
            out.append(Segment(part, True))
