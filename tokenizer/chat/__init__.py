"""Chat formats: establish the model's prompt format against its own template, write prompts as
segments (content always literal), encode them to ids, collect stop ids and stop strings.

    >>> from tokenizer.chat import ChatEncoder, detect_chat_format
    >>> found = detect_chat_format(tok.chat_template, tok.vocab)     # doctest: +SKIP
    >>> chat = ChatEncoder(tok, found.format)                        # doctest: +SKIP
    >>> ids = chat.encode(chat.format([{"role": "user", "content": "Hi"}]))  # doctest: +SKIP
    >>> chat.stop_ids, chat.stop_strings                             # doctest: +SKIP

How a format is established and verified: docs/chat-formats.md.
"""

from .detect import Detection, detect_chat_format
from .encode import ChatEncoder
from .errors import ChatFormatError
from .formats import FORMATS, ChatFormat
from .render import format_chat
from .segments import Segment, segments_text

__all__ = ["FORMATS", "ChatEncoder", "ChatFormat", "ChatFormatError", "Detection", "Segment", "detect_chat_format",
           "format_chat", "segments_text"]
