"""Prompt segments -> token ids, and the ids that end a reply.

The ids equal what llama.cpp gives for the rendered prompt tokenized with ``special=True``, with one
deliberate difference: message content is literal. Text segments are cut only for user-defined tokens
(as parse_special=False does), never for the format's markers, stop tokens, BOS or EOS.

Worked example (SmolLM2, ChatML)::

    [Segment("<|im_start|>", True), Segment("user\\n"), Segment("<|im_end|>"), Segment("<|im_end|>", True)]
      -> [1, <ids of "user\\n<|im_end|>" as plain text>, 2]

Adjacent text segments are joined before tokenizing ("[INST] " + "Hi" is tokenized as "[INST] Hi"), and
each joined run's ids are cached: turn 50 of a conversation re-tokenizes only what is new.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core import Tokenizer
from ..specials import ASCII_SPACE, UNICODE_SPACE
from .formats import ChatFormat
from .render import Segment, format_chat

_RUN_CACHE_LIMIT = 4096


class ChatEncoder:
    """Encodes prompts of one format for one tokenizer; keeps each text run's ids."""

    def __init__(self, tokenizer: Tokenizer, fmt: ChatFormat, config_eos_ids: Iterable[int] = ()):
        self.tokenizer = tokenizer
        self.chat_format = fmt
        specials = tokenizer.special_texts()
        self.stop_ids = stop_ids(tokenizer, fmt, config_eos_ids)
        self.stop_strings = tuple(text for text in fmt.stops if tokenizer.token_to_id(text) is None)
        protected = {specials[m] for m in fmt.markers if m in specials} | set(self.stop_ids)
        protected |= {i for i in (tokenizer.bos_id, tokenizer.spec.eos_id) if i is not None}
        self._specials = specials
        self._encode_literal = tokenizer.literal_encoder(protected)
        self._runs: dict[str, tuple[int, ...]] = {}
        self.bos_text = tokenizer.id_to_token(tokenizer.bos_id) if tokenizer.bos_id is not None else ""
        eos = tokenizer.spec.eos_id
        self.eos_text = tokenizer.id_to_token(eos) if eos is not None else ""
        self.writes_bos = fmt.bos or any("{bos}" in text for text in fmt.roles.values())
        self._spaces = UNICODE_SPACE if tokenizer.spec.unicode_strip else ASCII_SPACE

    def format(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
               **options: object) -> list[Segment]:
        """``format_chat`` with this model's BOS and EOS texts."""
        return format_chat(self.chat_format, messages, add_generation_prompt, bos_token=self.bos_text,  # type: ignore[arg-type]
                           eos_token=self.eos_text, **options)

    def encode(self, segments: Iterable[Segment]) -> list[int]:
        """Token ids for prompt segments (BOS once: the format's, else the tokenizer's if it adds one)."""
        out: list[int] = []
        if not self.writes_bos and self.tokenizer.spec.add_bos and self.tokenizer.bos_id is not None:
            out.append(self.tokenizer.bos_id)
        lstrip, rstrip = self.tokenizer.spec.lstrip_ids, self.tokenizer.spec.rstrip_ids
        run: list[str] = []
        strip_next = False
        for text, special in segments:
            token_id = self._specials.get(text) if special else None
            if token_id is None:
                run.append(text)
                continue
            self._flush(run, out, strip_next, token_id in lstrip)
            out.append(token_id)
            strip_next = token_id in rstrip
        self._flush(run, out, strip_next, False)
        return out

    def _flush(self, run: list[str], out: list[int], strip_left: bool, strip_right: bool) -> None:
        """Tokenize the pending text run (spaces next to lstrip/rstrip tokens removed, as llama.cpp does)."""
        text = "".join(run)
        run.clear()
        if strip_left:
            text = text.lstrip(self._spaces)
        if strip_right:
            text = text.rstrip(self._spaces)
        if not text:
            return
        ids = self._runs.get(text)
        if ids is None:
            if len(self._runs) >= _RUN_CACHE_LIMIT:
                self._runs.clear()
            ids = self._runs[text] = tuple(self._encode_literal(text))
        out += ids


def stop_ids(tokenizer: Tokenizer, fmt: ChatFormat, config_eos_ids: Iterable[int] = ()) -> tuple[int, ...]:
    """Ids that end a reply: the tokenizer's EOS/EOT/EOM, the model config's eos_token_id(s), and the
    format's turn terminators that are single tokens of this vocabulary."""
    ids = list(tokenizer.eos_ids) + [i for i in config_eos_ids if 0 <= i < tokenizer.vocab_size]
    ids += [i for i in map(tokenizer.token_to_id, fmt.stops) if i is not None]
    return tuple(dict.fromkeys(ids))


def encode_chat(tokenizer: Tokenizer, fmt: ChatFormat, messages: Sequence[Mapping[str, str]],
                add_generation_prompt: bool = True, **options: object) -> list[int]:
    """The prompt's ids, as llama.cpp would tokenize the rendered template, content kept literal."""
    encoder = ChatEncoder(tokenizer, fmt)
    return encoder.encode(encoder.format(messages, add_generation_prompt, **options))
