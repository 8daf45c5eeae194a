"""What two renderings share at their start or end, cut where a marker starts or ends.

Template probes compare renderings: where two of them part, one piece of the template's text ends. Cut
at a character, the shared part can end inside a marker (``\\n</parameter>\\n<`` is what
``\\n</parameter>\\n</function>`` and ``\\n</parameter>\\n<parameter=`` share), so ``at_marker`` cuts it
back to the last whole marker or whitespace::

    >>> common_prefix("\\n</parameter>\\n</function>", "\\n</parameter>\\n<parameter=", at_marker=True)
    '\\n</parameter>\\n'
    >>> common_suffix("<|tool_calls_section_begin|><|tool_call_begin|>f.", "<|tool_call_end|><|tool_call_begin|>f.",
    ...               at_marker=True)
    '<|tool_call_begin|>f.'
"""

from __future__ import annotations

import re


def common_prefix(a: str, b: str, at_marker: bool = False) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    if at_marker and n and not _clean(a[n - 1], a[n:n + 1], b[n:n + 1], r"[\s>\]]", r"[\s<\[]"):
        n = max(a.rfind(">", 0, n), a.rfind("]", 0, n), *(m.start() for m in re.finditer(r"\s", a[:n]))) + 1
    return a[:n]


def common_suffix(a: str, b: str, at_marker: bool = False) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    shared = a[len(a) - n:]
    before_a, before_b = a[len(a) - n - 1:len(a) - n], b[len(b) - n - 1:len(b) - n]
    if at_marker and shared and not _clean(shared[0], before_a, before_b, r"[\s<\[]", r"[\s>\]]"):
        cut = re.search(r"[\s<\[]", shared)
        shared = shared[cut.start():] if cut else ""
    return shared


def _clean(edge: str, beyond_a: str, beyond_b: str, edge_ok: str, beyond_ok: str) -> bool:
    """Whether a shared part's edge character is a marker's own edge, or what lies beyond it in each text
    (nothing, or a marker's other edge) is."""
    return bool(re.match(edge_ok, edge)) or all(not c or re.match(beyond_ok, c) for c in (beyond_a, beyond_b))
