"""One message of a conversation, typed, as llama.cpp's ``common_chat_msg`` holds one.

Its content is always a string. A template that wants ``None`` for a message of calls alone (DeepSeek R1's
distills) gets it at rendering (``Conversation.for_prompt``), never in the conversation or its file. A
message is frozen: the conversation is its only writer, and changes one by putting a new message in its
place (``Conversation.replace_last``).

In a file a message is an object with the fields that are set, as chats have always been saved:

    >>> Message("assistant", "It is sunny.", reasoning="Look it up.").as_dict()
    {'role': 'assistant', 'content': 'It is sunny.', 'reasoning': 'Look it up.'}
    >>> Message.of({"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f"}}]}, "m").content
    ''
"""

from __future__ import annotations

from dataclasses import dataclass, field

ROLES = ("user", "assistant", "tool")


class MessageError(ValueError):
    """A message a file or a caller gave that is not one; the text says what is wrong."""


@dataclass(frozen=True)
class Message:
    role: str                                 # "user", "assistant" or "tool" (the system message is kept apart)
    content: str = ""
    reasoning: str | None = None              # an assistant's thought, as written (None: it wrote none)
    tool_calls: tuple[dict, ...] = field(default=())  # an assistant's calls, as the template takes them
    name: str | None = None                   # a tool message: the tool that answered
    tool_call_id: str | None = None           # a tool message: the call it answers
    cut: bool = False                         # a reply cut short (Ctrl-C, -n, a full context, a failure)

    @classmethod
    def of(cls, data: object, where: str) -> Message:
        """A message from its file form (a ``Message`` as it is); a ``MessageError`` naming ``where`` and
        the field where it is not one. A call's message saved with content None (an earlier version) loads
        with content ""."""
        if isinstance(data, Message):
            return data
        if not isinstance(data, dict):
            raise MessageError(f"{where} is not an object")
        role, content, calls = data.get("role"), data.get("content"), data.get("tool_calls")
        if content is None and role == "assistant" and calls:
            content = ""
        if role not in ROLES or not isinstance(content, str):
            raise MessageError(f"{where} needs a role user/assistant/tool and a string content")
        reasoning = data.get("reasoning")
        if reasoning is not None and not (role == "assistant" and isinstance(reasoning, str)):
            raise MessageError(f"{where}: 'reasoning' is an assistant's thought, a string")
        if calls is not None and not (role == "assistant" and isinstance(calls, list | tuple) and all(
                isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls)):
            raise MessageError(f"{where}: 'tool_calls' is an assistant's list of calls")
        name, call_id = data.get("name"), data.get("tool_call_id")
        if not all(value is None or isinstance(value, str) for value in (name, call_id)):
            raise MessageError(f"{where}: 'name' and 'tool_call_id' are strings")
        return cls(role, content, reasoning, tuple(calls or ()), name, call_id, data.get("cut") is True)

    def as_dict(self) -> dict:
        """The file form: role and content, then the fields that are set."""
        out: dict = {"role": self.role, "content": self.content}
        if self.reasoning is not None:
            out["reasoning"] = self.reasoning
        out.update(self.call_fields())
        if self.cut:
            out["cut"] = True
        return out

    def call_fields(self) -> dict:
        """The fields of a call and of its result that are set, as templates read them: an assistant's
        ``tool_calls``, a tool message's ``tool_call_id`` and ``name``."""
        fields: dict = {"tool_calls": list(self.tool_calls)} if self.tool_calls else {}
        if self.tool_call_id is not None:
            fields["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            fields["name"] = self.name
        return fields
