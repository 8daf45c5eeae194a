"""``rml-chat --check [MODEL]``: the end-to-end smoke test of tokenizer, prompt format and model.

1. our ids vs llama.cpp's own tokenizer on a built-in multilingual sample (plain text, special off);
2. the template doctor: how the chat format was established (fingerprint, fitted, template-rendered,
   vocabulary or flag), the template's verdict on it (probes identical n/n, the first difference), and
   whether the template rewrites earlier turns;
3. the chat prompt of a two-turn conversation: our text vs the model's own template rendering it, and
   our ids vs llama.cpp tokenizing the template's text (special on);
4. a short greedy reply — a session turn, the one a user gets: control tokens hidden, stop strings
   applied — which must end on a stop id — except for a model with no chat template (a base
   model such as Gemma 3 270M, which never writes its end-of-turn token): there it is a note.
Exit 0 only if all pass. The report names the first mismatching piece.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field

from tokenizer.chat import ChatFormatError, segments_text
from tokenizer.chat.template import compiled
from tokenizer.chat.verify import first_difference

from ..core.conversation import Conversation
from ..core.model import Model, load_model
from ..core.session import ChatSession
from ..engines.base import Engine, Sampling
from ..words import counted
from .launch import open_engine

SAMPLE = [
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog. 1234567890",
    "  leading spaces,\ttabs\tand\nnew lines\n\n\nand trailing   ",
    "Ça va ? Très bien, merci — à bientôt !",
    "Schöne Grüße aus München: Straße, Maß, Fußgänger.",
    "Привет, как дела? Всё хорошо.",
    "Γειά σου Κόσμε",
    "日本語のテキストを分割します。東京は晴れ。",
    "中文分词测试：我爱北京天安门。",
    "한국어 문장도 확인합니다.",
    "مرحبا بالعالم، كيف حالك؟",
    "שלום עולם",
    "हिन्दी में एक वाक्य।",
    "ภาษาไทยไม่มีช่องว่าง",
    "Emoji: 👋🏽 🧑‍💻 🇫🇷 ❤️‍🔥",
    "def f(x):\n    return x ** 2  # code\n",
    "<html><body class=\"a\">&amp; 'quotes'</body></html>",
    "URL: https://example.com/path?q=1&r=2#frag",
    "Numbers 3.14159, 1,000,000 and 2026-11-30T06:46:00Z",
    "don't won't it's we're they'll I'd",
    "   ",
    "\u00a0non-breaking\u2009thin\u3000ideographic spaces",
]
#: a two-turn conversation: multi-turn prompts are checked too, and the first exchange shows a base model
#: (Gemma 3 270M has no chat template) where a reply ends.
CHAT = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help you?"},
        {"role": "user", "content": "Say hello in one short sentence."}]


@dataclass
class CheckReport:
    model: str
    chat_format: str
    format_source: str
    stop_ids: list[int]
    template_probes: str = ""        # "22/22": the template's verdict on the format ("" without a template)
    template_difference: str = ""    # the first probe that differs, both texts around the difference
    prompt_matches_template: bool | None = None  # our prompt text == the template's rendering of CHAT
    history: str = ""
    sample_total: int = 0
    sample_matched: int = 0
    first_mismatch: dict | None = None
    prompt_matches: bool = False
    prompt_tokens: int = 0
    reply: str = ""
    reply_stop_reason: str = ""
    reply_tokens: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _mismatch(tok, text: str, ours: list[int], theirs: list[int]) -> dict:
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    window = slice(max(at - 2, 0), at + 3)
    return {"text": text, "at_token": at,
            "ours": [[i, tok.id_to_token(i)] for i in ours[window]],
            "llama_cpp": [[i, tok.id_to_token(i)] if 0 <= i < tok.vocab_size else [i, "?"] for i in theirs[window]]}


def check_model(model: Model, engine: Engine, max_tokens: int = 96) -> CheckReport:
    tok = model.tokenizer
    report = CheckReport(model.name, model.detection.format.name, model.detection.source, list(model.stop_ids))
    for text in SAMPLE:
        ours = tok.encode(text)
        theirs = engine.reference_tokenize(text, special=False)
        report.sample_total += 1
        if ours == theirs:
            report.sample_matched += 1
        elif report.first_mismatch is None:
            report.first_mismatch = _mismatch(tok, text, ours, theirs)
    if report.sample_matched != report.sample_total:
        report.problems.append(f"tokenizer: {report.sample_total - report.sample_matched} of {report.sample_total} "
                               f"sample texts differ from llama.cpp")
    _doctor(model, report)
    segments = model.encoder.format(CHAT)
    ids = model.encoder.encode(segments)
    text = segments_text(segments)
    if tok.chat_template:
        try:
            text = compiled(tok.chat_template).render(CHAT, True, bos_token=model.encoder.bos_text,
                                                      eos_token=model.encoder.eos_text)
        except ChatFormatError as err:
            report.problems.append(f"chat template: it can't render a plain conversation ({err})")
        report.prompt_matches_template = text == segments_text(segments)
        if not report.prompt_matches_template:
            report.problems.append("chat prompt: ours differs from the model's template ("
                                   + first_difference(segments_text(segments), text) + ")")
    theirs = engine.reference_tokenize(text, special=True)
    if model.encoder.adds_bos:  # the BOS the vocabulary asks for, which llama.cpp's chat adds too (add_special)
        theirs = [tok.bos_id, *theirs]
    report.prompt_tokens = len(ids)
    report.prompt_matches = ids == theirs
    if not report.prompt_matches:
        report.problems.append("chat prompt: our ids differ from llama.cpp's tokenization of the template's prompt")
        if report.first_mismatch is None:
            report.first_mismatch = _mismatch(tok, text, ids, theirs)
    session = ChatSession(model, engine, Sampling(temp=0.0, seed=0, max_tokens=max_tokens))
    session.conversation = Conversation(None, [dict(m) for m in CHAT[:-1]])
    turn = session.turn(CHAT[-1]["content"], lambda _: None, lambda _: None)
    gen = turn.generation
    if turn.prompt_ids != ids:
        report.problems.append("chat prompt: the session's turn evaluated other ids than the chat prompt checked")
    report.reply, report.reply_stop_reason, report.reply_tokens = turn.reply, gen.stop_reason, len(gen.tokens)
    if gen.stop_reason not in ("stop", "stop_string"):  # a stop string the format names ends a turn too
        message = f"reply: did not end on a stop id within {counted(max_tokens, 'token')} ({gen.stop_reason})"
        base_model = model.tokenizer.chat_template is None and (
            not model.detection.exact or not model.detection.format.ends_turns)
        if base_model:
            report.notes.append(message + "; the model has no chat template (a base model), so this is not a failure")
        else:
            report.problems.append(message)
    return report


def _doctor(model: Model, report: CheckReport) -> None:
    """The template's verdict on the format, as the detection established it."""
    d = model.detection
    report.history = d.history
    if d.verdict is not None:
        report.template_probes = f"{d.verdict.identical}/{d.verdict.total}"
        report.template_difference = d.verdict.difference
        if not d.verdict.ok:
            report.problems.append(f"chat format: {d.format.name} differs from the model's template "
                                   f"({d.verdict.difference})")
    elif model.tokenizer.chat_template:
        report.problems.append(f"chat format: not verified against the model's template ({d.warning})")
    if d.warning and d.verdict is None and not model.tokenizer.chat_template:
        report.notes.append(d.warning)


def format_report(r: CheckReport) -> str:
    probes = f"; template: {r.template_probes} probes identical" if r.template_probes else ""
    against = "the template's prompt" if r.prompt_matches_template is not None else "our prompt"
    lines = [f"model        {r.model}",
             f"chat format  {r.chat_format} (established by {r.format_source}{probes})",
             f"stop ids     {', '.join(map(str, r.stop_ids))}",
             f"tokenizer    {r.sample_matched}/{r.sample_total} sample texts id-exact with llama.cpp",
             f"chat prompt  {'id-exact' if r.prompt_matches else 'DIFFERENT'} with llama.cpp on {against} "
             f"({r.prompt_tokens} tokens)" + ("" if r.prompt_matches_template in (None, True) else
                                               "; our text DIFFERS from the template's"),
             f"reply        {r.reply.strip()[:200]!r} ({counted(r.reply_tokens, 'token')}, stop: {r.reply_stop_reason})"]
    if r.template_difference:
        lines.append(f"template     first difference: {r.template_difference}")
    if r.history:
        lines.append(f"history      {r.history}")
    if r.first_mismatch:
        m = r.first_mismatch
        lines.append(f"first mismatch in {m['text'][:60]!r} at token {m['at_token']}: ours {m['ours']} "
                     f"vs llama.cpp {m['llama_cpp']}")
    lines += [f"note         {note}" for note in r.notes]
    lines.append("PASS" if r.ok else "FAIL: " + "; ".join(r.problems))
    return "\n".join(lines)


def run_check(args: argparse.Namespace, say) -> int:
    say(f"checking {args.model or 'SmolLM2-135M-Instruct (default)'} …")
    model = load_model(args.model, weights=args.weights, chat_format=args.chat_format, need_weights=not args.server)
    engine = open_engine(model, args, say, n_ctx=min(args.ctx_size or 2048, 2048))
    try:
        report = check_model(model, engine)
    finally:
        engine.close()
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok}, ensure_ascii=False))
    else:
        print(format_report(report), file=sys.stdout)
    return 0 if report.ok else 1
