"""Which prompt format a model uses, established against the model's own template.

The template is the judge (``verify.py``). In order:

1. a name (``--chat-format``) wins; with a template, it is still verified and the result reported;
2. a table record whose fingerprint matches the template, if it verifies      -> source "fingerprint";
3. a format fitted to the template's own renderings (``fit.py``), if it verifies -> "fitted";
4. the template itself each turn, contents spliced in literally (``splice.py``), if that verifies
   -> "template-rendered";
5. otherwise ChatFormatError naming the first probe that differs and both texts around it.

A template jinja2 cannot render at all gets the closest family by marker, marked unverified, with a
warning. With no template, the vocabulary's special tokens pick the family (``<start_of_turn>`` ->
gemma), with a note and the hint that ``--chat-format raw`` gives completion-style use (such a model is
usually a base model); with no chat tokens either, "raw".

A template's result is cached by its hash (``format_cache.py``): a second load renders nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from . import format_cache
from .errors import ChatFormatError
from .fit import FitError, fit_template
from .fitted import FittedFormat
from .formats import FAMILY_MARKERS, FORMATS, ChatFormat
from .probe import BOS_HOLE, EOS_HOLE, hole, render
from .render import PromptFormat, writer_of
from .splice import TemplateFormat
from .template import ChatTemplate, TemplateBroken, compiled
from .verify import NOW, PROBES, Verdict, first_difference, verify

SOURCE_FLAG = "flag"
SOURCE_FINGERPRINT = "fingerprint"
SOURCE_FITTED = "fitted"
SOURCE_RENDERED = "template-rendered"
SOURCE_UNVERIFIED = "closest family (unverified)"
SOURCE_VOCAB = "vocabulary"
SOURCE_NONE = "none"
RAW_HINT = "; for completion-style use of a base model, --chat-format raw"


@dataclass(frozen=True)
class Detection:
    """The chosen format, how it was established, the verdict of the template on it, and a warning for
    the user when it is not exact. ``history`` says how the template rewrites earlier turns ("" when each
    prompt extends the previous prompt and reply, so the KV cache is reused whole)."""

    format: PromptFormat
    source: str
    warning: str = ""
    verdict: Verdict | None = None
    history: str = ""
    notes: tuple[str, ...] = ()  # what was tried before (a fingerprint record that differs …)

    @property
    def exact(self) -> bool:
        if self.verdict is not None:
            return self.verdict.ok
        return self.source == SOURCE_FLAG


def format_by_name(name: str) -> ChatFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ChatFormatError(f"unknown chat format {name!r}; known: {', '.join(FORMATS)}") from None


def _fingerprint_matches(fmt: ChatFormat, template: str, unescaped: str) -> bool:
    def has(text: str) -> bool:
        return text in template or text in unescaped
    return bool(fmt.detect) and all(map(has, fmt.detect)) and not any(map(has, fmt.exclude))


def fingerprint(template: str) -> ChatFormat | None:
    """The first table record whose fingerprint texts the template holds."""
    unescaped = template.replace("\\n", "\n")
    return next((fmt for fmt in FORMATS.values() if _fingerprint_matches(fmt, template, unescaped)), None)


def family(texts: Collection[str] | str) -> str | None:
    """The family whose marker the template (or a set of token texts) holds, most specific first."""
    return next((name for marker, name in FAMILY_MARKERS if marker in texts), None)


def _markers_in(vocab: Collection[str]) -> set[str]:
    """The family markers the vocabulary holds: asked one by one of a vocabulary that answers ``in`` by
    hash (a set, the packed texts), one pass over a list (not a set of Gemma 3's 262k texts built:
    docs/performance.md)."""
    markers = {marker for marker, _ in FAMILY_MARKERS}
    return markers.intersection(vocab) if isinstance(vocab, (list, tuple)) else {m for m in markers if m in vocab}


def detect_chat_format(name_or_template: str | None, vocab: Collection[str] | None = None, *,
                       template: str | None = None, bos_token: str = "<s>", eos_token: str = "</s>") -> Detection:
    """Establish the format. ``name_or_template`` is a format name or the model's Jinja template (or None);
    ``template`` is the model's template when a name is given; ``vocab`` the token texts, consulted when
    there is no template; ``bos_token``/``eos_token`` the model's texts for them."""
    if name_or_template and "{" not in name_or_template and "<" not in name_or_template:
        return _flag(format_by_name(name_or_template.strip()), template, bos_token, eos_token)
    template = name_or_template or None
    if template:
        cached = format_cache.read(template, bos_token, eos_token)
        if cached is not None:
            try:
                return from_record(cached, template)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                pass  # a damaged entry: established again
        record = _establish(template, bos_token, eos_token)
        format_cache.write(template, bos_token, eos_token, record)
        return from_record(record, template)
    found = family(_markers_in(vocab)) if vocab is not None else None
    if found:
        return Detection(FORMATS[found], SOURCE_VOCAB,
                         f"the model has no chat template; format {found!r} chosen from its special tokens{RAW_HINT}")
    return Detection(FORMATS["raw"], SOURCE_NONE,
                     "the model has no chat template and no known chat tokens; using 'raw' (plain text)")


def _flag(fmt: ChatFormat, template: str | None, bos_token: str, eos_token: str) -> Detection:
    if not template:
        return Detection(fmt, SOURCE_FLAG)
    try:
        verdict = verify(writer_of(fmt), compiled(template), bos_token=bos_token, eos_token=eos_token)
    except TemplateBroken as err:
        return Detection(fmt, SOURCE_FLAG, f"--chat-format {fmt.name}: the model's template can't be checked ({err})")
    warning = "" if verdict.ok else (f"--chat-format {fmt.name} differs from the model's own template "
                                     f"({verdict.summary()})")
    return Detection(fmt, SOURCE_FLAG, warning, verdict)


# ----- establishing a template's format (the result is cached as a plain dict) -------------------------

def _establish(template: str, bos_token: str, eos_token: str) -> dict:
    """The format of a template, as a cache record (see ``from_record``)."""
    closest = family(template)
    try:
        tpl = compiled(template)
        tpl.render([{"role": "user", "content": "Hello"}], True)
    except TemplateBroken as err:
        return {"source": SOURCE_UNVERIFIED, "record": closest or "raw", "reason": str(err)}
    except ChatFormatError:
        pass  # it refuses even that; the probes will show what it takes
    options = {"bos_token": bos_token, "eos_token": eos_token}
    notes: list[str] = []
    record = fingerprint(template)
    if record is not None:
        verdict = verify(writer_of(record), tpl, **options, first_only=True)
        if verdict.ok:
            return {"source": SOURCE_FINGERPRINT, "record": record.name, "verdict": _verdict_json(verdict),
                    "history": _history(writer_of(record), **options)}
        notes.append(f"the table's {record.name!r} matches its fingerprint but differs: {verdict.difference}")
    try:
        fitted = fit_template(tpl, f"{record.name}-fitted" if record else "fitted")
        verdict = verify(fitted.write, tpl, **options)
        if verdict.ok:
            return {"source": SOURCE_FITTED, "fitted": fitted.to_json(), "verdict": _verdict_json(verdict),
                    "notes": notes, "history": _history(fitted.write, **options)}
        notes.append(f"a fitted format differs: {verdict.difference}")
    except (FitError, TemplateBroken) as err:
        notes.append(f"no format could be fitted: {err}")
    rendered = _template_format(tpl, f"{record.name}-template" if record else "template")
    verdict = verify(writer_of(rendered), tpl, **options)
    if verdict.ok:
        return {"source": SOURCE_RENDERED, "texts": list(rendered.texts), "after": list(rendered.after_assistant),
                "writes_bos": rendered.writes_bos, "name": rendered.name, "verdict": _verdict_json(verdict),
                "notes": notes, "history": _history(writer_of(rendered), **options)}
    return {"source": "refused", "message": "no prompt format reproduces the model's chat template: "
            f"{verdict.difference} (--chat-format NAME picks one)", "notes": notes}


def _template_format(tpl: ChatTemplate, name: str) -> TemplateFormat:
    """A TemplateFormat with the template's own texts, read off one probe rendered with sentinels."""
    texts: list[str] = []
    after: list[str] = []
    first, second, third = (hole("texts", n) for n in range(3))
    messages = [{"role": "user", "content": first}, {"role": "assistant", "content": second},
                {"role": "user", "content": third}]
    try:
        text = render(tpl, messages, True, strftime_now=None)
    except ChatFormatError:
        return TemplateFormat(name, tpl.source)
    texts = [t.replace(BOS_HOLE, "").replace(EOS_HOLE, "") for t in _split_at(text, first + second + third)]
    if second in text and third in text:
        after = [text.split(second, 1)[1].split(third, 1)[0].replace(EOS_HOLE, "")]
    return TemplateFormat(name, tpl.source, tuple(texts), tuple(after), text.startswith(BOS_HOLE))


def _split_at(text: str, sentinels: str) -> list[str]:
    out, part = [], ""
    for ch in text:
        if ch in sentinels:
            out.append(part)
            part = ""
        else:
            part += ch
    return [*out, part]


def _history(writer, **options: str) -> str:
    """"" when every multi-turn probe's prompt extends the previous turn's prompt plus its reply; else the
    first place where the template rewrites an earlier turn."""
    for messages in PROBES:
        for k in range(2, len(messages), 2):
            if messages[k]["role"] != "user" or messages[k - 1]["role"] != "assistant":
                continue
            try:
                before = "".join(s.text for s in writer(messages[:k - 1], True, thinking=None, now=NOW, **options))
                after = "".join(s.text for s in writer(messages[:k + 1], True, thinking=None, now=NOW, **options))
            except ChatFormatError:
                continue
            sent = before + messages[k - 1]["content"]
            if not after.startswith(sent):
                return f"the template rewrites earlier turns ({first_difference(after, sent)})"
    return ""


def _verdict_json(verdict: Verdict) -> list:
    return [verdict.identical, verdict.total, verdict.difference]


def from_record(record: dict, template: str) -> Detection:
    """The Detection a cache record describes."""
    source = record["source"]
    verdict = Verdict(*record["verdict"]) if "verdict" in record else None
    notes = tuple(record.get("notes", ()))
    history = record.get("history", "")
    if source == "refused":
        raise ChatFormatError(record["message"])
    if source == SOURCE_UNVERIFIED:
        return Detection(FORMATS[record["record"]], source,
                         f"the chat template can't be rendered here ({record['reason']}); using the closest format "
                         f"{record['record']!r}, unverified — prompts may differ from the model's own (--chat-format "
                         "picks another)")
    if source == SOURCE_FINGERPRINT:
        fmt: PromptFormat = replace(FORMATS[record["record"]], template=template)
    elif source == SOURCE_FITTED:
        fmt = FittedFormat.from_json(record["fitted"], template)
    else:
        fmt = TemplateFormat(record["name"], template, tuple(record["texts"]), tuple(record["after"]),
                             record["writes_bos"])
    return Detection(fmt, source, "", verdict, history, notes)


