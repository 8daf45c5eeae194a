"""Chat formats: detect the model's prompt format, write prompts directly, collect stop ids."""

from .detect import Detection, detect_chat_format, format_by_name
from .encode import ChatEncoder, encode_chat, stop_ids
from .formats import FORMATS, ChatFormat
from .render import ChatFormatError, Segment, format_chat, format_text, segments_text

__all__ = ["FORMATS", "ChatEncoder", "ChatFormat", "ChatFormatError", "Detection", "Segment",
           "detect_chat_format", "encode_chat", "stop_ids",
           "format_by_name", "format_chat", "format_text", "segments_text"]
