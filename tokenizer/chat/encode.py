"""Prompt segments -> token ids, and the ids that end a reply.

The ids equal what llama.cpp gives for the rendered prompt tokenized with ``special=True``, with one
deliberate difference: message content is literal. Template text is cut for every special token, as
llama.cpp cuts the rendered prompt; content is cut only for user-defined tokens (as parse_special=False
does), and never for a token the template itself writes (a turn marker, a stop token, BOS or EOS).

Worked example (SmolLM2, ChatML)::

    [Segment("<|im_start|>", True), Segment("user\\n"), Segment("<|im_end|>"), Segment("<|im_end|>", True)]
      -> [1, <ids of "user\\n<|im_end|>" as plain text>, 2]

Adjacent text is joined before tokenizing ("[INST] " + "Hi" is tokenized as "[INST] Hi"), and each
joined run's ids are cached: turn 50 of a conversation re-tokenizes only what is new.

Stop ids: the tokenizer's EOS/EOT/EOM, the model config's, the table record's turn terminators, and the
first token the template writes after an assistant's answer (``<|im_end|>``, ``<|return|>``, ``<|end|>``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core import Tokenizer
from .fitted import BOS_HOLE, EOS_HOLE
from .render import PromptFormat, format_chat
from .segments import Segment

_RUN_CACHE_LIMIT = 4096


class ChatEncoder:
    """Encodes prompts of one format for one tokenizer; keeps each text run's ids."""

    def __init__(self, tokenizer: Tokenizer, fmt: PromptFormat, config_eos_ids: Iterable[int] = ()):
        self.tokenizer = tokenizer
        self.chat_format = fmt
        self._specials = specials = tokenizer.special_texts()
        self.bos_text = tokenizer.id_to_token(tokenizer.bos_id) if tokenizer.bos_id is not None else ""
        eos = tokenizer.eos_id
        self.eos_text = tokenizer.id_to_token(eos) if eos is not None else ""
        after = [self.filled(text) for text in fmt.after_assistant_texts()]
        texts = [self.filled(text) for text in fmt.template_texts()]
        # the special tokens the format's own texts hold: its template text is cut for those alone (Gemma's
        # 6,000-token cutter is slow to build). A template's own renderings (the spliced path, which a
        # format established from a template also takes) may hold any, so those are cut for all.
        joined = "\0".join(texts + after)
        among = [t for t in specials if t in joined]
        self._among = None if fmt.template is not None else among  # a TemplateFormat has one too
        template_ids = {i for text in texts for _, i in tokenizer.split_special(text, among) if i is not None}
        self.stop_ids = stop_ids(tokenizer, fmt, config_eos_ids, after, among)
        self.stop_strings = tuple(dict.fromkeys(_stop_strings(tokenizer, fmt, after, among)))
        protected = template_ids | {specials[m] for m in getattr(fmt, "markers", ()) if m in specials}
        protected |= set(self.stop_ids) | {i for i in (tokenizer.bos_id, tokenizer.eos_id) if i is not None}
        self._encode_literal = tokenizer._literal_encoder(protected)  # the one call into the tokenizer's insides
        self._runs: dict[tuple[str, int | None, int | None], tuple[int, ...]] = {}
        self._template_parts: dict[str, list[tuple[str, int | None]]] = {}  # template text -> its special cuts
        self.writes_bos = fmt.writes_bos

    def filled(self, text: str) -> str:
        """A fitted piece with its BOS/EOS holes filled (the other formats' texts have none)."""
        return text.replace(BOS_HOLE, self.bos_text).replace(EOS_HOLE, self.eos_text)

    @property
    def adds_bos(self) -> bool:
        """Whether ``encode`` puts the tokenizer's BOS before the prompt itself (the format writes none, and
        the vocabulary asks for one): as llama.cpp's ``tokenize(prompt, add_special=True)`` does."""
        return not self.writes_bos and self.tokenizer.add_bos and self.tokenizer.bos_id is not None

    def format(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
               **options: object) -> list[Segment]:
        """``format_chat`` with this model's BOS and EOS texts."""
        return format_chat(self.chat_format, messages, add_generation_prompt, bos_token=self.bos_text,  # type: ignore[arg-type]
                           eos_token=self.eos_text, holds_special=self.holds_special, **options)

    def holds_special(self, text: str) -> bool:
        """Whether template text holding ``text`` would have a special token cut out of it: such a text from
        a message or a tool definition is written literal (``splice.py``), as a content always is."""
        return any(token_id is not None for _, token_id in self.tokenizer.split_special(text, self._among))

    def encode(self, segments: Iterable[Segment], *, bos: bool = True) -> list[int]:
        """Token ids for prompt segments (BOS once: the format's, else the tokenizer's if it adds one;
        ``bos`` False: segments that go on after a prompt, such as the start of a reply)."""
        out: list[int] = []
        if self.adds_bos and bos:
            out.append(self.tokenizer.bos_id)
        run: list[str] = []
        after: int | None = None  # the special token before the pending run
        for text, special in segments:
            token_id = self._specials.get(text) if special else None
            if token_id is None:
                if special and len(text) > 1:  # template text: every special token in it is one
                    parts = self._template_parts.get(text)
                    if parts is None:
                        if len(self._template_parts) >= _RUN_CACHE_LIMIT:
                            self._template_parts.clear()
                        parts = self._template_parts[text] = self.tokenizer.split_special(text, self._among)
                    if len(parts) > 1 or parts[0][1] is not None:
                        for part, part_id in parts:
                            if part_id is None:
                                run.append(part)
                                continue
                            self._flush(run, out, after, part_id)
                            out.append(part_id)
                            after = part_id
                        continue
                run.append(text)
                continue
            self._flush(run, out, after, token_id)
            out.append(token_id)
            after = token_id
        self._flush(run, out, after, None)
        return out

    def _flush(self, run: list[str], out: list[int], after: int | None, before: int | None) -> None:
        """Tokenize the pending text run between the special tokens ``after`` and ``before`` (the tokenizer
        removes the spaces next to lstrip/rstrip tokens, as llama.cpp does)."""
        if not run:
            return
        key = ("".join(run), after, before)
        run.clear()
        ids = self._runs.get(key)
        if ids is None:
            if len(self._runs) >= _RUN_CACHE_LIMIT:
                self._runs.clear()
            ids = self._runs[key] = tuple(self._encode_literal(*key))
        out += ids


def _first_special(tokenizer: Tokenizer, text: str, among: list[str] | None = None) -> int | None:
    """The first special token of a text the template writes after an answer, when only whitespace
    comes before it (Llama 2 writes " </s>")."""
    for part, token_id in tokenizer.split_special(text, among):
        if token_id is not None:
            return token_id
        if part.strip():
            return None
    return None


def _stop_strings(tokenizer: Tokenizer, fmt: PromptFormat, after: Iterable[str],
                  among: list[str] | None = None) -> Iterable[str]:
    """Stop texts that are no single token: the table's, and a template's end of an answer that holds
    no special token at all (RWKV writes "\\n\\nUser: ")."""
    yield from (text for text in getattr(fmt, "stops", ()) if tokenizer.token_to_id(text) is None)
    for text in after:
        if text.strip() and all(i is None for _, i in tokenizer.split_special(text, among)):
            yield text.rstrip()


def stop_ids(tokenizer: Tokenizer, fmt: PromptFormat, config_eos_ids: Iterable[int] = (),
             after_assistant: Iterable[str] | None = None, among: list[str] | None = None) -> tuple[int, ...]:
    """Ids that end a reply: the tokenizer's EOS/EOT/EOM, the model config's eos_token_id(s), the table
    record's turn terminators that are single tokens, and the first token the template writes after an
    assistant's answer (``after_assistant``: those texts, holes filled; default the format's own; ``among``:
    the special tokens they can hold)."""
    ids = list(tokenizer.eos_ids) + [i for i in config_eos_ids if 0 <= i < tokenizer.vocab_size]
    ids += [i for i in map(tokenizer.token_to_id, getattr(fmt, "stops", ())) if i is not None]
    after = fmt.after_assistant_texts() if after_assistant is None else after_assistant
    ids += [i for i in (_first_special(tokenizer, text, among) for text in after) if i is not None]
    return tuple(dict.fromkeys(ids))


def encode_chat(tokenizer: Tokenizer, fmt: PromptFormat, messages: Sequence[Mapping[str, str]],
                add_generation_prompt: bool = True, **options: object) -> list[int]:
    """The prompt's ids, as llama.cpp would tokenize the rendered template, content kept literal."""
    encoder = ChatEncoder(tokenizer, fmt)
    return encoder.encode(encoder.format(messages, add_generation_prompt, **options))
