"""One way of probing a template: render it with sentinels where the values go, and compare renderings.

Everything this package reads off a template — a format's pieces (``fit.py``), its texts (``detect.py``),
its thought markers (``reasoning.py``), its call syntax (``tool_calls.py``, ``tool_keyed.py``) — is read
the same way: a conversation whose values are sentinels is rendered, and where a sentinel lands, or where
two renderings part, one piece of the template's own text ends.

One sentinel scheme, of two kinds:

* *holes*, ``hole(n)``: private-use characters, which no template writes and every filter passes through
  unchanged (``trim``, ``replace``, slicing): the BOS and EOS texts, a date, message contents;
* *words*, ``word(name)``: ASCII words that start ``xq_``, for values a template checks, escapes or names
  (a tool's name, a JSON key or value, a plain text): ``tojson`` would escape a hole.

Each probe has its own range of holes (``HOLES``, a table), so that no two probes' sentinels meet in one
rendering. Worked example, where two renderings part::

    >>> common_prefix("<|im_start|>assistant\\n<think>", "<|im_start|>assistant\\nHi", at_marker=True)
    '<|im_start|>assistant\\n'
    >>> parting("<|START_TEXT|>", "<|START_THINKING|>")  # (backed off to the marker's start)
    0
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import markers
from .errors import ChatFormatError
from .template import ChatTemplate

#: the holes' ranges, one a probe (code points past U+F0000, the supplementary private-use plane)
HOLES = {
    "specials": 0xF0001,    # BOS, EOS, a date's two ends (fitted.py's pieces keep them as holes)
    "messages": 0xF0100,    # fit.py: one a message's content, one a thought
    "splice": 0xF0200,      # splice.py: a message's content, spliced back as text (the prompt, not a probe)
    "texts": 0xF0300,       # detect.py: a three-message conversation's contents
    "reasoning": 0xF1001,   # reasoning.py: a thought, an answer, a user's text, each between two holes
}


def hole(kind: str, n: int = 0) -> str:
    """The ``n``-th hole of a probe's range::

        >>> hole("texts", 1) == "\\U000f0301"
        True
    """
    return chr(HOLES[kind] + n)


def word(name: str) -> str:
    """A sentinel a template may escape or check: an ASCII word (``word("key")`` is ``xq_key``)."""
    return "xq_" + name


BOS_HOLE, EOS_HOLE = hole("specials", 0), hole("specials", 1)
DATE_OPEN, DATE_CLOSE = hole("specials", 2), hole("specials", 3)  # strftime_now(fmt) renders as OPEN fmt CLOSE
#: a call's id, a word of nine letters and digits: Mistral's templates refuse any other id
CALL_ID = "xq1234567"
#: a character a marker ends with (or whitespace), one it starts with (or whitespace): where two texts may part
_ENDED = rf"[\s{re.escape(markers.ENDS)}]"
_STARTED = rf"[\s{re.escape(markers.STARTS)}]"


def date_hole(fmt: str) -> str:
    """What ``strftime_now(fmt)`` renders as in a probe: the format between the date's two holes."""
    return DATE_OPEN + fmt + DATE_CLOSE


def render(template: ChatTemplate, messages: Sequence[dict], generation: bool, *, bos: str = BOS_HOLE,
           eos: str = EOS_HOLE, **options: object) -> str:
    """A probe's rendering: BOS, EOS and dates as holes unless given (``strftime_now`` too); the
    template's refusal raises (``ChatFormatError``), for the probe to say what it means."""
    options.setdefault("strftime_now", date_hole)
    return template.render(list(messages), generation, bos_token=bos, eos_token=eos, **options)


def rendered(template: ChatTemplate, messages: Sequence[dict], generation: bool, *, bos: str = BOS_HOLE,
             eos: str = EOS_HOLE, **options: object) -> str | None:
    """``render``, or None where the template refuses the conversation."""
    try:
        return render(template, messages, generation, bos=bos, eos=eos, **options)
    except ChatFormatError:
        return None


def shared_start(*texts: Sequence) -> int:
    """How many leading items (characters, ids) all the texts share."""
    n = 0
    while all(n < len(t) for t in texts) and len({t[n] for t in texts}) == 1:
        n += 1
    return n


def parting(*texts: str) -> int:
    """Where the texts part, backed off to a marker's start (after ``>``, ``]`` or whitespace), so that
    ``<|START_TEXT|>`` and ``<|START_THINKING|>`` part before ``<|START_``; a text that ended there
    ended at a boundary (the generation prompt's last marker)."""
    n = shared_start(*texts)
    while 0 < n and all(n < len(t) for t in texts) and texts[0][n - 1] not in ">]\n \t":
        n -= 1
    return n


def common_prefix(a: str, b: str, at_marker: bool = False) -> str:
    """What two renderings share at their start; ``at_marker``: cut back to the last whole marker or
    whitespace, where the shared part would end inside a marker (``\\n</parameter>\\n<`` is what
    ``\\n</parameter>\\n</function>`` and ``\\n</parameter>\\n<parameter=`` share)::

        >>> common_prefix("\\n</parameter>\\n</function>", "\\n</parameter>\\n<parameter=", at_marker=True)
        '\\n</parameter>\\n'
    """
    n = shared_start(a, b)
    if at_marker and n and not _clean(a[n - 1], a[n:n + 1], b[n:n + 1], _ENDED, _STARTED):
        n = max(*(a.rfind(c, 0, n) for c in markers.ENDS), *(m.start() for m in re.finditer(r"\s", a[:n]))) + 1
    return a[:n]


def common_suffix(a: str, b: str, at_marker: bool = False) -> str:
    """What two renderings share at their end; ``at_marker``: from a marker's or whitespace's start::

        >>> common_suffix("<|tool_calls_section_begin|><|tool_call_begin|>f.", "<|tool_call_end|><|tool_call_begin|>f.",
        ...               at_marker=True)
        '<|tool_call_begin|>f.'
    """
    n = shared_start(a[::-1], b[::-1])
    shared = a[len(a) - n:]
    before_a, before_b = a[len(a) - n - 1:len(a) - n], b[len(b) - n - 1:len(b) - n]
    if at_marker and shared and not _clean(shared[0], before_a, before_b, _STARTED, _ENDED):
        cut = re.search(_STARTED, shared)
        shared = shared[cut.start():] if cut else ""
    return shared


def _clean(edge: str, beyond_a: str, beyond_b: str, edge_ok: str, beyond_ok: str) -> bool:
    """Whether a shared part's edge character is a marker's own edge, or what lies beyond it in each text
    (nothing, or a marker's other edge) is."""
    return bool(re.match(edge_ok, edge)) or all(not c or re.match(beyond_ok, c) for c in (beyond_a, beyond_b))
