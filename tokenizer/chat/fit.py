"""Fit a ``FittedFormat`` to a chat template from the template's own renderings of probe conversations.

Every content of a probe is a *sentinel*, a private-use character no template writes, so the rendering
shows exactly where each content went and what the template wrote around it::

    [user ①, assistant ②, user ③] + generation prompt, ChatML
      -> "<|im_start|>user\\n①<|im_end|>\\n<|im_start|>assistant\\n②<|im_end|>\\n<|im_start|>user\\n③…"

1. **Order.** Where each sentinel landed picks the rule for the system text (``fitted.ORDERS``: in order,
   or in the last user turn as Mistral Nemo writes it); a sentinel that is missing was dropped.
2. **Pieces.** The text between two sentinels is the piece between those two items. Pieces are keyed by
   the two roles; while one key still maps to two different texts, the flag that separates them best
   is added to the key (greedy, then pruned): Qwen3 needs ``next.after_last_user``, Llama 3.2 none.
3. **Transforms.** The same probes again with padded contents (``"\\n \\t①\\t \\n"``): what is left of the
   padding between the known pieces names the whitespace transform (``strip``, ``lstrip_newlines`` …).
4. **Refusals.** A template that refuses every probe with a system message (``raise_exception``) is
   fitted without one and keeps its message.

Probes cover: with and without a system message, one to three exchanges, a final assistant message,
reasoning (``<think>…</think>``) in assistant messages, the generation prompt on and off, and
``enable_thinking`` unset / on / off where the template reads it. ``verify.py`` then checks the fitted
format on other conversations, with real text.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from operator import itemgetter

from .errors import ChatFormatError
from .fitted import (
    END,
    GEN,
    GLOBAL_FLAGS,
    ITEM_FLAGS,
    ORDERS,
    TRANSFORMS,
    FittedFormat,
    Item,
    conversation_items,
    feature_value,
    start_item,
)
from .markers import THINK_CLOSE, THINK_OPEN
from .probe import hole, render
from .template import ChatTemplate, TemplateBroken, TemplateRaised

PAD_LEFT, PAD_RIGHT = "\n \t", "\t \n"
#: probe shapes: S system, U user, A assistant, R assistant with reasoning (``<think>R</think>A``),
#: P with reasoning as a model writes it after a ``<think>`` prefill (``R</think>A``)
FIT_SHAPES = ("U", "SU", "UA", "SUA", "UAU", "SUAU", "UAUA", "SUAUAU", "UR", "SURU", "URUR", "UP", "SUPU")
#: flags a piece key may use: of the item after the piece, of the one before it, of the conversation
PIECE_FEATURES = ("next.first_turn", "next.last", "next.last_user", "next.after_last_user", "next.last_assistant",
                  "next.reasoning", "prev.after_last_user", "prev.last_assistant", "prev.reasoning", "prev.last_user",
                  *GLOBAL_FLAGS)
TRANSFORM_FEATURES = ITEM_FLAGS + GLOBAL_FLAGS
_ROLES = {"S": "system", "U": "user", "A": "assistant", "R": "assistant", "P": "assistant"}


class FitError(ChatFormatError):
    """No table of pieces reproduces the template's renderings; the message says why."""


def _probe(shape: str, padded: bool) -> list[dict[str, str]]:
    """The messages of a probe shape, each content a sentinel (padded: with whitespace around it)."""
    def content(k: int) -> str:
        sentinel = hole("messages", k)
        return PAD_LEFT + sentinel + PAD_RIGHT if padded else sentinel

    messages = []
    for k, letter in enumerate(shape):
        text = content(2 * k)
        if letter in "RP":
            text = (THINK_OPEN if letter == "R" else "") + content(2 * k + 1) + THINK_CLOSE + text
        messages.append({"role": _ROLES[letter], "content": text})
    return messages


def _sentinel(item: Item) -> str:
    return item.content.strip(PAD_LEFT + PAD_RIGHT)


class _Observation:
    """One rendering of one probe: its shape, its items (message order, end last) and the text."""

    def __init__(self, shape: str, items: list[Item], text: str):
        self.shape = shape
        self.items = items
        self.text = text
        self.at = {id(item): text.find(_sentinel(item)) for item in items[:-1]}
        if any(text.count(_sentinel(item)) > 1 for item in items[:-1]):
            raise FitError("the template writes a message's content more than once")

    def ordered(self, order: str) -> list[Item]:
        return ORDERS[order](self.items[:-1]) + [self.items[-1]]

    def fits_order(self, order: str) -> bool:
        found = [self.at[id(item)] for item in self.ordered(order)[:-1] if self.at[id(item)] >= 0]
        return found == sorted(found) and len(found) == sum(pos >= 0 for pos in self.at.values())

    def boundaries(self, order: str) -> Iterable[tuple[Item, Item, str]]:
        """(item before, item after, the text between their contents); a dropped item's text is ""."""
        prev, cursor = start_item(self.items), 0
        for item in self.ordered(order):
            if item.role in (GEN, END):
                yield prev, item, self.text[cursor:]
            elif self.at[id(item)] < 0:
                yield prev, item, ""
            else:
                at = self.at[id(item)]
                yield prev, item, self.text[cursor:at]
                cursor = at + len(_sentinel(item))
            prev = item


def _parses_reasoning(template: ChatTemplate) -> bool:
    """False when the template writes an assistant's ``<think>…</think>`` verbatim, as content (padded,
    so that a template that rewrites it as ``<think>`` + R.strip() + ``</think>`` is not taken for one)."""
    for shape in ("URU", "URUR", "UPUP"):
        messages = _probe(shape, padded=True)
        try:
            text = render(template, messages, True)
        except ChatFormatError:
            return True
        if any(m["content"] not in text for m in messages if THINK_CLOSE in m["content"]):
            return True
    return False


def _render_all(template: ChatTemplate, padded: bool, reasoning: bool) -> tuple[list[_Observation], str | None]:
    """Every probe rendered (padded ones without reasoning with ``enable_thinking`` unset only: a template's
    whitespace handling of plain messages does not follow the thinking switch, of reasoning it may); the
    template's message when it refuses every probe with a system message."""
    observations: list[_Observation] = []
    system_refusals: list[str] = []
    for shape in FIT_SHAPES:
        messages = _probe(shape, padded)
        reasons = "R" in shape or "P" in shape
        thinking_modes = (None, True, False) if template.reads_thinking and (not padded or reasons) else (None,)
        for thinking in thinking_modes:
            for generation in (True, False):
                try:
                    text = render(template, messages, generation, thinking=thinking)
                except TemplateRaised as err:
                    if shape.startswith("S"):
                        system_refusals.append(str(err))
                        continue
                    raise FitError(f"the template refuses a plain conversation ({_describe(shape)}): {err}") from None
                except TemplateBroken as err:
                    raise FitError(str(err)) from None
                items = conversation_items(messages, generation, thinking, reasoning)
                observations.append(_Observation(shape, items, text))
    if system_refusals and (len(set(system_refusals)) > 1 or any(obs.items[0].flags["sys"] for obs in observations)):
        raise FitError("the template refuses some conversations with a system message, not others")
    return observations, system_refusals[0] if system_refusals else None


def _describe(shape: str) -> str:
    return ", ".join({"R": "assistant with reasoning", "P": "assistant with reasoning after a prefill"}.get(
        letter, _ROLES[letter]) for letter in shape)


def _select(observations: list[tuple[tuple, object]], features: tuple[str, ...], value_of,
            combine) -> tuple[tuple[str, ...], dict[tuple, object]]:
    """Greedy feature selection: add the feature that leaves the fewest conflicting observations until
    none is left, then drop any feature that is not needed. An observation is ``(base key, (context,
    value))``; ``value_of(feature, context)`` reads a feature; ``combine(values)`` merges what one key saw,
    or returns None on a conflict. Empty result: no selection resolves the conflicts."""
    counted: Counter = Counter((base, tuple(value_of(f, context) for f in features), value)
                               for base, (context, value) in observations)  # probes repeat themselves a lot
    rows = list(counted.items())

    def table(chosen: tuple[int, ...]) -> tuple[int, dict[tuple, object]]:
        groups: dict[tuple, list] = defaultdict(list)
        sizes: Counter = Counter()
        pick = itemgetter(*chosen) if len(chosen) > 1 else (lambda v: (v[chosen[0]],)) if chosen else (lambda v: ())
        for (base, values, value), count in rows:
            key = base + pick(values)
            groups[key].append(value)
            sizes[key] += count
        merged = {key: combine(seen) for key, seen in groups.items()}
        return sum(sizes[key] for key, value in merged.items() if value is None), merged

    chosen: tuple[int, ...] = ()
    conflicts, merged = table(chosen)
    while conflicts:
        best = min(((table(chosen + (i,))[0], i) for i in range(len(features)) if i not in chosen), default=None)
        if best is None or best[0] >= conflicts:
            return (), {}
        chosen += (best[1],)
        conflicts, merged = table(chosen)
    for i in chosen:
        fewer = tuple(c for c in chosen if c != i)
        if table(fewer)[0] == 0:
            chosen = fewer
    return tuple(features[i] for i in chosen), table(chosen)[1]


def _one_text(values: list) -> str | None:
    return values[0] if len(set(values)) == 1 else None


def _common_transform(values: list) -> str | None:
    common = frozenset.intersection(*values)
    return next((name for name in TRANSFORMS if name in common), None)


def fit_template(template: ChatTemplate, name: str = "fitted") -> FittedFormat:
    """The fitted format of a template, or FitError naming what no table of pieces can reproduce."""
    reasoning = _parses_reasoning(template)
    plain, refusal = _render_all(template, padded=False, reasoning=reasoning)
    order = next((o for o in ORDERS if all(obs.fits_order(o) for obs in plain)), None)
    if order is None:
        raise FitError("the contents are written in an order no rule of the table knows")

    # pieces: (prev role, next role) + features -> text
    piece_obs = [((prev.role, item.role), ((prev, item), text))
                 for obs in plain for prev, item, text in obs.boundaries(order)]
    piece_features, pieces = _select(piece_obs, PIECE_FEATURES, lambda f, pair: feature_value(f, *pair), _one_text)
    if not pieces:
        raise FitError("the template's text between contents depends on more than the roles and flags it is fitted by")
    fitted = FittedFormat(name, order, piece_features, pieces, (), {},
                          {"system": refusal} if refusal else {}, reasoning, template.source)

    # transforms: each content's candidates from the padded probes (a dropped one: "drop")
    transform_obs: list[tuple[tuple, tuple[Item, frozenset[str]]]] = []
    for obs in plain:
        for item in obs.ordered(order)[:-1]:
            seen = frozenset({"drop"} if obs.at[id(item)] < 0 else set(TRANSFORMS) - {"drop"})
            transform_obs.append(((item.role,), (item, seen)))
    padded, _ = _render_all(template, padded=True, reasoning=reasoning)
    twins = [obs for obs in plain if obs.items[0].flags["think"] is None or "R" in obs.shape or "P" in obs.shape]
    if len(padded) != len(twins):
        raise FitError("the template refuses padded conversations it writes plain")
    for obs, twin in zip(padded, twins):
        transform_obs += [((item.role,), (item, frozenset(seen)))
                          for item, seen in _padded_transforms(fitted, obs, twin, order)]
    fitted.transform_flags, fitted.transforms = _select(transform_obs, TRANSFORM_FEATURES,
                                                        lambda f, item: item.flags.get(f), _common_transform)
    if not fitted.transforms:
        raise FitError("the template changes the whitespace around contents in a way no transform reproduces")
    return fitted


def _padded_transforms(fitted: FittedFormat, obs: _Observation, twin: _Observation,
                       order: str) -> list[tuple[Item, set[str]]]:
    """Walk a padded rendering piece by piece; for each content, the transforms that fit what is there.
    ``twin`` is the same probe rendered plain: the items it shows dropped are skipped. Where two
    transforms leave different texts that both fit locally, each is followed until one reaches the end."""
    sequence = obs.ordered(order)
    shown = [twin.at[id(item)] >= 0 for item in twin.ordered(order)[:-1]] + [True]
    text = obs.text

    def walk(i: int, prev: Item, cursor: int) -> list[tuple[Item, set[str]]] | None:
        item = sequence[i]
        piece = fitted.pieces.get(fitted.piece_key(prev, item))
        if piece is None or not text.startswith(piece, cursor):
            return None
        cursor += len(piece)
        if item.role in (GEN, END):
            return [] if cursor == len(text) else None
        if not shown[i]:
            rest = walk(i + 1, item, cursor)
            return None if rest is None else [(item, {"drop"}), *rest]
        by_text: dict[str, set[str]] = defaultdict(set)
        for name, transform in TRANSFORMS.items():
            out = transform(item.content)
            if out and text.startswith(out, cursor):
                by_text[out].add(name)
        for out, names in sorted(by_text.items(), key=lambda kv: -len(kv[0])):
            rest = walk(i + 1, item, cursor + len(out))
            if rest is not None:
                return [(item, names), *rest]
        return None

    found = walk(0, start_item(obs.items), 0)
    if found is None:
        raise FitError(f"no whitespace transform explains the padded contents of {_describe(obs.shape)}")
    return found
