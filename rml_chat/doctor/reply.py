"""The real turn: the chat session's own (the format's stop ids and stop strings, control tokens hidden),
greedy, on a two-turn conversation. It must end on a stop within ``max_tokens``; when it does not, the
finding says whether the prompt is the template's own, so that the user knows whether to blame the
template or the weights."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.conversation import Conversation
from ..core.session import ChatSession, SessionOptions
from ..engines.base import Engine, Sampling
from ..words import counted
from .findings import ERROR, NOTE, WARNING, Finding, Fix
from .patient import Patient
from .template import CHAT, vocabulary_format


def turn(p: Patient, engine: Engine, max_tokens: int) -> Iterator[Finding]:
    model = p.model
    session = ChatSession(model, engine, SessionOptions(Sampling(temp=0.0, seed=0, max_tokens=max_tokens)))
    session.conversation = Conversation(None, [dict(m) for m in CHAT[:-1]])
    result = session.turn(CHAT[-1]["content"], lambda _: None, lambda _: None)
    gen = result.generation
    p.facts["reply"] = {"text": result.reply, "tokens": len(gen.tokens), "stop_reason": gen.stop_reason,
                        "reasoning": result.reasoning or None}
    evidence = {"reply": result.reply[:300], "tokens": len(gen.tokens), "stop_reason": gen.stop_reason}
    if result.prompt_ids != model.encoder.encode(model.encoder.format(CHAT)):
        yield Finding("reply.other-prompt", ERROR, "the session's turn evaluated other ids than the prompt checked",
                      {}, Fix("report it"))
    if gen.stop_reason in ("stop", "stop_string"):
        if not (result.reply.strip() or result.reasoning):
            yield Finding("reply.empty", WARNING, "the model ended its turn at once, with an empty reply", evidence,
                          Fix())
        return
    message = f"the reply did not end on a stop within {counted(max_tokens, 'token')} ({gen.stop_reason})"
    if not model.tokenizer.chat_template and (not model.detection.exact or not model.detection.format.ends_turns):
        yield Finding("reply.no-stop", NOTE, message + "; the model has no chat template (a base model, it may never "
                      "end a turn)", evidence, Fix(f"--chat-format {vocabulary_format(p)}"))
        return
    d = model.detection
    if d.verdict is not None and d.verdict.ok:
        why = (f"; the prompt is the template's own ({d.verdict.identical}/{d.verdict.total} probes identical), so "
               "look at the template's fit to these weights (template.foreign-markers) or at the weights")
    else:
        why = "; the prompt is not verified against the template, so look at the template first"
    ends = [model.tokenizer.id_to_token(i) for i in model.stop_ids]
    written = [t for t in ends if t and t in result.reply]
    if written:
        why += f"; the reply writes {written[0]!r} as text, not as its token"
    yield Finding("reply.no-stop", ERROR, message + why, {**evidence, "stop_ids": list(model.stop_ids)},
                  Fix(f"--chat-format {vocabulary_format(p)} (the format the vocabulary's tokens point to), -n N"))
