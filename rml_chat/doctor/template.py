"""Checks of the chat template: there is one; it compiles and renders a plain conversation; what shapes it
refuses (a system message, tools, roles that don't alternate); the system prompt it writes when none is
given; whether our prompt is verified against it, text and ids; whether its markers are tokens of this
vocabulary at all (a template of another family: Gemma's ``<start_of_turn>`` on SmolLM2's vocabulary is
five tokens the weights never saw as one); and the reasoning markers it writes.
"""

from __future__ import annotations

from collections.abc import Iterator

from tokenizer.chat import ChatFormatError, detect_chat_format, segments_text
from tokenizer.chat.markers import LOOKS_SPECIAL
from tokenizer.chat.template import TemplateOverBudget, TemplateRaised, compiled
from tokenizer.chat.verify import first_difference

from .findings import ERROR, NOTE, WARNING, Finding, Fix
from .patient import Patient
from .vocabulary import first_mismatch

#: the conversation whose prompt is checked against the template, text and ids (two turns: history too)
CHAT = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help you?"},
        {"role": "user", "content": "Say hello in one short sentence."}]
_S, _U = "\U000f1101S\U000f1102", "\U000f1103U\U000f1104"  # texts no template writes
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}
#: conversation shapes a template may refuse, each with the messages that show it
#: the fix that puts a template in the file (TEMPLATE.jinja: the model's own, its tokenizer_config.json's)
_WITH_TEMPLATE = "gguf-new-metadata IN.gguf OUT.gguf --chat-template-file TEMPLATE.jinja"
SHAPES = {"a system message": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
          "two user messages in a row": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Hello?"}],
          "an assistant message first": [{"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Hi"}]}


def vocabulary_format(p: Patient) -> str:
    """The chat format this vocabulary's own tokens point to (for ``--chat-format``)."""
    tok = p.tokenizer
    bos = tok.id_to_token(tok.bos_id) if tok.bos_id is not None else ""
    try:
        return detect_chat_format(None, tok.vocab, bos_token=bos).format.name
    except ChatFormatError:
        return "raw"


def _render(p: Patient, messages: list[dict], **options: object) -> str:
    enc = p.model.encoder
    return compiled(p.tokenizer.chat_template).render(messages, True, bos_token=enc.bos_text,
                                                          eos_token=enc.eos_text, **options)  # type: ignore[arg-type]


def present(p: Patient) -> Iterator[Finding]:
    """There is a template, and it compiles and renders a plain conversation."""
    if not p.tokenizer.chat_template:
        name = vocabulary_format(p)
        yield Finding("template.missing", WARNING, "the model has no chat template: tools that read the GGUF's "
                      "template write plain text, and a chat model rambles without its turns", {"vocabulary_format": name},
                      Fix(f"--chat-format {name}", _WITH_TEMPLATE))
        return
    try:
        _render(p, CHAT)
    except TemplateOverBudget as err:
        yield Finding("template.over-budget", ERROR, f"the chat template can't render a plain conversation: {err}",
                      {"error": str(err)}, Fix(f"--chat-format {vocabulary_format(p)}", _WITH_TEMPLATE))
    except ChatFormatError as err:
        yield Finding("template.broken", ERROR, f"the chat template can't render a plain conversation: {err}",
                      {"error": str(err)}, Fix(f"--chat-format {vocabulary_format(p)}", _WITH_TEMPLATE))


def _renders(p: Patient) -> bool:
    try:
        return bool(p.tokenizer.chat_template) and bool(_render(p, CHAT))
    except ChatFormatError:
        return False


def shapes(p: Patient) -> Iterator[Finding]:
    """The shapes it refuses, named with the template's words; tools it ignores; its default system prompt."""
    if not _renders(p):
        return
    for shape, messages in SHAPES.items():
        try:
            _render(p, messages)
        except ChatFormatError as err:
            said = str(err) if isinstance(err, TemplateRaised) else f"it fails ({err})"
            yield Finding("template.refuses", NOTE, f"the template refuses {shape}: {said}", {"shape": shape,
                          "template_says": str(err)}, Fix("rml-chat renders only what the template accepts"))
    try:
        with_tools = _render(p, [{"role": "user", "content": "Hi"}], tools=[TOOL])
        if "get_weather" not in with_tools:
            yield Finding("template.no-tools", NOTE, "the template writes no tool definitions (tools are ignored)",
                          {}, Fix())
    except ChatFormatError as err:
        yield Finding("template.refuses", NOTE, f"the template refuses tools: {err}", {"shape": "tools",
                      "template_says": str(err)}, Fix())
    default = default_system(p)
    if default:
        yield Finding("template.default-system", NOTE, f"without a system message the template writes one: "
                      f"{default.strip()[:200]!r}", {"text": default}, Fix("-sys TEXT replaces it"))


def default_system(p: Patient) -> str:
    """The system text the template writes when none is given: what stands where a system message's text
    would ("" when none, or when the template's system block has no place for it)."""
    try:
        given = _render(p, [{"role": "system", "content": _S}, {"role": "user", "content": _U}])
        alone = _render(p, [{"role": "user", "content": _U}])
    except ChatFormatError:
        return ""
    if _S not in given or _U not in given:
        return ""
    before, between = given.split(_S, 1)[0], given.split(_S, 1)[1].split(_U, 1)[0]
    head = alone.split(_U, 1)[0]
    if head.startswith(before) and head.endswith(between) and len(head) > len(before) + len(between):
        return head[len(before):len(head) - len(between)]
    return ""


def verified(p: Patient) -> Iterator[Finding]:
    """Our prompt is the template's: the fit's verdict, then a two-turn conversation, text and ids."""
    d, encoder = p.model.detection, p.model.encoder
    p.facts["chat_format"] = {"name": d.format.name, "established_by": d.source,
                              "probes": f"{d.verdict.identical}/{d.verdict.total}" if d.verdict else None,
                              "history": d.history or None}
    if not _renders(p):
        return
    if d.verdict is not None and not d.verdict.ok:
        yield Finding("prompt.differs", ERROR, f"our prompt format {d.format.name} differs from the template "
                      f"({d.verdict.difference})", {"probes": f"{d.verdict.identical}/{d.verdict.total}",
                                                    "difference": d.verdict.difference}, Fix("report it"))
    segments = encoder.format(CHAT)
    ours, want = segments_text(segments), _render(p, CHAT)
    if ours != want:
        yield Finding("prompt.differs", ERROR, "our chat prompt differs from the template's rendering of it: "
                      + first_difference(ours, want), {"ours": ours[-300:], "template": want[-300:]}, Fix("report it"))
        return
    ids, theirs = encoder.encode(segments), p.oracle.tokenize(want, True)
    if encoder.adds_bos:
        theirs = [p.tokenizer.bos_id, *theirs]
    p.facts["prompt"] = {"verified": True, "tokens": len(ids)}
    if ids != theirs:
        yield Finding("prompt.ids-differ", ERROR, "our prompt ids differ from llama.cpp's tokenization of the "
                      "template's text", first_mismatch(p, want, ids, theirs), Fix("report it"))


def family(p: Patient) -> Iterator[Finding]:
    """The template's markers are tokens of this vocabulary (else the template is another family's)."""
    if not _renders(p):
        return
    text = _render(p, CHAT)
    foreign = {m: len(p.tokenizer.encode(m)) for m in dict.fromkeys(LOOKS_SPECIAL.findall(text))
               if p.tokenizer.token_to_id(m) is None}
    if foreign:
        name = vocabulary_format(p)
        shown = ", ".join(f"{m!r} ({n} tokens)" for m, n in list(foreign.items())[:4])
        yield Finding("template.foreign-markers", ERROR, f"the template writes markers this vocabulary doesn't have "
                      f"as tokens: {shown}; it belongs to another model family, and the weights never learned its "
                      f"turns", {"markers": foreign, "vocabulary_format": name},
                      Fix(f"--chat-format {name}", _WITH_TEMPLATE))


def reasoning(p: Patient) -> Iterator[Finding]:
    r = p.model.reasoning
    if r is not None:
        yield Finding("reasoning.markers", NOTE, f"the template writes thoughts: {r.open!r} … {r.close!r}"
                      f"{' (the prompt opens them)' if r.prefilled else ''}; earlier thoughts: {r.history}",
                      {"open": r.open, "close": r.close, "field": r.field, "history": r.history}, Fix())


CHECKS = (present, shapes, verified, family, reasoning)
