"""Chat formats: establish the model's prompt format against its own template, write prompts as
segments (content always literal), encode them to ids, collect stop ids."""

from .detect import Detection, detect_chat_format, format_by_name
from .encode import ChatEncoder, encode_chat, stop_ids
from .errors import ChatFormatError
from .fitted import FittedFormat
from .formats import FORMATS, ChatFormat
from .render import PromptFormat, format_chat, format_text
from .segments import Segment, segments_text
from .splice import TemplateFormat

__all__ = ["FORMATS", "ChatEncoder", "ChatFormat", "ChatFormatError", "Detection", "FittedFormat", "PromptFormat",
           "Segment", "TemplateFormat", "detect_chat_format", "encode_chat", "format_by_name", "format_chat",
           "format_text", "segments_text", "stop_ids"]
