"""The chat taken elsewhere: written out as Markdown (``/export``), or a reply or one of its code blocks put
on the clipboard through the terminal (``/copy``).

The clipboard is the terminal's: an OSC 52 sequence (``ESC ] 52 ; c ; BASE64 BEL``) asks the terminal to
set it, which works over ssh and inside tmux (wrapped for tmux's passthrough) where a clipboard program of
this machine could not reach. A terminal may ignore it: xterm allows it only with ``allowWindowOps``,
tmux only with ``set-clipboard on``, and some cap the text's size (``OSC52_LIMIT``).

    >>> osc52("hi", tmux=False)
    '\\x1b]52;c;aGk=\\x07'
    >>> code_blocks("Run:\\n```python\\nprint(1)\\n```\\nor\\n~~~\\nls\\n~~~")
    ['print(1)', 'ls']
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence

from ..core import fences
from ..core.message import Message

OSC52_LIMIT = 100_000  # bytes of base64 (xterm's and many others' cap; tmux's is about the same)
def code_blocks(text: str) -> list[str]:
    """The fenced code blocks of a reply (```` ``` ```` or ``~~~``), their text without the fences, each
    closed by its own fence (``core/fences.py``)::

        >>> code_blocks("Run:\\n```sh\\nls\\n```\\nand\\n~~~\\nx\\n~~~")
        ['ls', 'x']
    """
    blocks, body = [], []
    for line, role in fences.read(text)[0]:
        if role == "open":
            body = []
        elif role == "body":
            body.append(line)
        elif role == "close":
            blocks.append("\n".join(body).rstrip("\n"))
    return blocks


def osc52(text: str, tmux: bool) -> str:
    """The sequence that puts ``text`` on the clipboard; ``tmux``: wrapped for tmux's passthrough."""
    sequence = "\x1b]52;c;" + base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii") + "\x07"
    return "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\" if tmux else sequence


def as_markdown(system: str | None, messages: Sequence[Message], title: str) -> str:
    """A chat as Markdown: a heading a message, numbered (a reply's own ``## You`` is told apart); a thought
    folded in ``<details>``; a call as fenced JSON; a tool's result fenced as text. The texts are the
    messages' own, as the model wrote them; a fence a text leaves open is closed after it, so that the next
    heading is not drawn as code."""
    parts = [f"# {title}"]
    if system:
        parts.append(f"## System\n\n{_closed(system)}")
    for number, message in enumerate(messages, 1):
        text = _closed(message.content)
        if message.role == "user":
            parts.append(f"## {number} · You\n\n{text}")
        elif message.role == "assistant":
            parts.append(f"## {number} · Assistant" + (" (cut)" if message.cut else ""))
            thought = message.reasoning
            if thought is not None and thought.strip():
                parts.append(f"<details><summary>Thought</summary>\n\n{_closed(thought.strip())}\n\n</details>")
            if text.strip():
                parts.append(text)
            for call in message.tool_calls:
                function = call.get("function", {}) if isinstance(call, Mapping) else {}
                shown = {"name": function.get("name"), "arguments": function.get("arguments"), "id": call.get("id")}
                parts.append(_fenced(json.dumps(shown, ensure_ascii=False, indent=2), "json"))
        elif message.role == "tool":
            parts.append(f"## {number} · Tool result ({message.name or message.tool_call_id or 'a tool'})")
            parts.append(_fenced(text, "text"))
    return "\n\n".join(parts) + "\n"


def _closed(text: str) -> str:
    """``text`` with the fence it leaves open, if any, closed after it::

        >>> _closed("Run:\\n```sh\\nls"), _closed("done")
        ('Run:\\n```sh\\nls\\n```', 'done')
    """
    fence = fences.read(text)[1]
    return f"{text}\n{fence}" if fence else text


def _fenced(text: str, language: str) -> str:
    """``text`` in a fence longer than any run of backticks in it (a result holding ``` stays whole)."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"
