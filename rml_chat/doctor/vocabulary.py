"""Checks of the vocabulary: our ids against llama.cpp's, a model directory's tokenizer.json against its
GGUF, the stop ids against the template's end of turn, the BOS, the pre-tokenizer, and the types of the
tokens the template writes.

Worked example, SmolLM2 with its EOS changed to ``<|endoftext|>``: the template ends an assistant turn
with ``<|im_end|>`` (id 2), which the GGUF now names neither EOS nor EOT. llama.cpp still stops on it (it
adds ``<|im_end|>`` to its end-of-generation set by its text), so the finding is a warning, with the fix
``gguf-new-metadata IN.gguf OUT.gguf --special-token eot '<|im_end|>'``.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import tokenizer
from tokenizer import TokenType
from tokenizer.chat import ChatFormatError
from tokenizer.chat.markers import LOOKS_SPECIAL
from tokenizer.chat.template import compiled
from tokenizer.stages import pretokenizers

from .findings import ERROR, NOTE, WARNING, Finding, Fix
from .patient import Patient

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
#: the pre-tokenizer a model's name points to (llama.cpp's names), for the fix of a missing one
PRE_BY_NAME = (("smollm", "smollm"), ("qwen", "qwen2"), ("llama-3", "llama-bpe"), ("llama3", "llama-bpe"),
               ("gpt2", "gpt-2"), ("gpt-2", "gpt-2"), ("olmo", "olmo"), ("deepseek", "deepseek-llm"),
               ("falcon", "falcon"), ("starcoder", "starcoder"), ("phi-2", "phi-2"), ("gpt-oss", "gpt-4o"))
SPECIAL_SAMPLE = 48  # special tokens tried beyond the template's own


def first_mismatch(p: Patient, text: str, ours: list[int], theirs: list[int]) -> dict:
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    window = slice(max(at - 2, 0), at + 3)
    tok = p.tokenizer
    return {"text": text, "at_token": at, "ours": [[i, tok.id_to_token(i)] for i in ours[window]],
            "llama_cpp": [[i, tok.id_to_token(i)] if 0 <= i < tok.vocab_size else [i, "?"] for i in theirs[window]]}


def template_specials(p: Patient) -> list[int]:
    """The special tokens the chat format's own texts hold (its markers), in order of first use."""
    fmt, tok = p.model.detection.format, p.tokenizer
    texts = [*fmt.template_texts(), *fmt.after_assistant_texts()]
    return list(dict.fromkeys(i for text in texts for _, i in tok.split_special(text) if i is not None))


def _special_probes(p: Patient) -> list[str]:
    tok = p.tokenizer
    specials = [i for i in range(tok.vocab_size) if tok.token_type(i) in (TokenType.CONTROL, TokenType.USER_DEFINED)]
    step = max(len(specials) // SPECIAL_SAMPLE, 1)
    chosen = list(dict.fromkeys(template_specials(p) + specials[::step][:SPECIAL_SAMPLE]))
    return [f"Hi {tok.id_to_token(i)}there" for i in chosen if tok.id_to_token(i)]


def tokenizer_ids(p: Patient) -> Iterator[Finding]:
    """Ours against llama.cpp's, on the sample (special off) and on the model's own specials in text (on)."""
    tok, oracle = p.tokenizer, p.oracle
    if oracle.n_vocab != tok.vocab_size:
        yield Finding("tokenizer.size", ERROR, f"our tokenizer has {tok.vocab_size} tokens, llama.cpp's vocabulary "
                      f"of the weights {oracle.n_vocab}", {"ours": tok.vocab_size, "llama_cpp": oracle.n_vocab},
                      Fix("use the tokenizer of the same model (--weights)"))
        return
    cases = [(text, False) for text in SAMPLE] + [(text, True) for text in _special_probes(p)]
    differ = [(text, special, ours, theirs) for text, special in cases
              if (ours := tok.encode(text, parse_special=special)) != (theirs := oracle.tokenize(text, special))]
    p.facts["tokenizer"] = {"texts": len(cases), "id_exact": len(cases) - len(differ)}
    if differ:
        text, special, ours, theirs = differ[0]
        source = "tokenizer.json" if p.is_directory else "the GGUF"
        yield Finding("tokenizer.differs", ERROR, f"our tokenizer (from {source}) and llama.cpp's give different ids "
                      f"for {len(differ)} of {len(cases)} texts", {**first_mismatch(p, text, ours, theirs),
                                                                    "special": special},
                      Fix("report it with the evidence: rml-chat's tokenizer is meant to be id-exact with llama.cpp"))


def directory_against_gguf(p: Patient) -> Iterator[Finding]:
    """A model directory: its tokenizer.json against the vocabulary inside its GGUF."""
    if not p.is_directory:
        return
    inside = tokenizer.load(p.model.weights)
    differ = [(t, a, b) for t in SAMPLE if (a := p.tokenizer.encode(t)) != (b := inside.encode(t))]
    if inside.vocab_size != p.tokenizer.vocab_size or differ:
        text, ours, theirs = differ[0] if differ else ("", [], [])
        yield Finding("tokenizer.json-vs-gguf", ERROR, f"the directory's tokenizer.json and the vocabulary in "
                      f"{p.model.weights.name} disagree ({inside.vocab_size} against {p.tokenizer.vocab_size} "
                      f"tokens; {len(differ)} of {len(SAMPLE)} sample texts differ)",
                      first_mismatch(p, text, ours, theirs) if differ else {},
                      Fix("convert the GGUF again from this directory (llama.cpp's convert_hf_to_gguf.py), or give "
                          "--weights the GGUF made from it"))


def _template_ends(p: Patient) -> list[int]:
    """The first special token of each text the template writes after an assistant's answer (rendered by
    the template itself: after a first answer and after a last one), else the format's."""
    tok, enc = p.tokenizer, p.model.encoder
    answer, user = "\U000f1201A\U000f1202", "\U000f1203U\U000f1204"
    conversation = [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    try:
        template = compiled(tok.chat_template)
        texts = [template.render(conversation * 2, False, bos_token=enc.bos_text, eos_token=enc.eos_text)]
        texts = [after.split(user, 1)[0] for after in texts[0].split(answer)[1:]]
    except ChatFormatError:
        texts = [enc.filled(t) for t in p.model.detection.format.after_assistant_texts()]
    ends = []
    for text in texts:
        for part, token_id in tok.split_special(text):
            if token_id is not None:
                ends.append(token_id)
            if token_id is not None or part.strip():
                break
    return list(dict.fromkeys(ends))


def stop_ids(p: Patient) -> Iterator[Finding]:
    """Every token the template ends an assistant turn with is the GGUF's EOS, EOT or EOM."""
    if not p.tokenizer.chat_template:
        return
    declared = p.declared_ends()
    said = ", ".join(f"{name.upper()} is {i} {p.tokenizer.id_to_token(i)!r}" for name, i in declared.items()) or "none"
    for token_id in _template_ends(p):
        if token_id in declared.values():
            continue
        text = p.tokenizer.id_to_token(token_id)
        llama_stops = p.oracle.is_eog(token_id)
        evidence = {"token": p.token(token_id), "declared": {k: p.token(v) for k, v in declared.items()},
                    "llama_cpp_eog": llama_stops}
        fix = Fix("nothing: rml-chat stops on the template's end of turn", "gguf-new-metadata IN.gguf OUT.gguf "
                  f"--special-token eot {shlex.quote(text)}")
        if llama_stops:
            yield Finding("stops.not-declared", WARNING, f"{text!r} ends the template's assistant turns but the GGUF "
                          f"names it neither EOS nor EOT ({said}): llama.cpp stops on it by its text, tools that stop "
                          "on EOS/EOT alone run past it", evidence, fix)
        else:
            yield Finding("stops.not-marked", ERROR, f"{text!r} ends the template's assistant turns but is no "
                          f"end-of-generation token ({said}): llama.cpp's tools never stop on it and the model "
                          "rambles on", evidence, fix)


def bos(p: Patient) -> Iterator[Finding]:
    """The BOS: written by the template and asked for by add_bos_token, twice in the prompt, or missing."""
    tok, encoder = p.tokenizer, p.model.encoder
    if tok.bos_id is None:
        return
    ids = encoder.encode(encoder.format([{"role": "user", "content": "Hi"}]))
    declared = p.meta.get("tokenizer.ggml.add_bos_token")
    evidence = {"bos": p.token(tok.bos_id), "add_bos_token": declared, "template_writes_bos": encoder.writes_bos,
                "prompt_starts": [p.token(i) for i in ids[:3]]}
    if ids[:2] == [tok.bos_id, tok.bos_id]:
        yield Finding("bos.double", ERROR, "the prompt starts with two BOS tokens", evidence,
                      Fix("", "gguf-new-metadata IN.gguf OUT.gguf --chat-template-file TEMPLATE.jinja (one that writes one "
                              "BOS)"))
    elif encoder.writes_bos and p.oracle.add_bos and tok.chat_template:
        default_off = not _default_add_bos(p)
        yield Finding("bos.template-and-add-bos", WARNING, "the template writes the BOS and the GGUF asks for one "
                      "too (add_bos_token): rml-chat and llama.cpp write one, a tool that tokenizes the template's "
                      "text with add_special writes two", evidence,
                      Fix("nothing: rml-chat writes one BOS",
                          "gguf-new-metadata IN.gguf OUT.gguf --remove-metadata tokenizer.ggml.add_bos_token"
                          if default_off else ""))
    elif ids[:1] != [tok.bos_id] and p.meta.get("tokenizer.ggml.model") == "llama":
        yield Finding("bos.missing", WARNING, "the prompt has no BOS, which SentencePiece models are trained with: "
                      "the template writes none and add_bos_token is false", evidence,
                      Fix("", "gguf-new-metadata IN.gguf OUT.gguf --remove-metadata tokenizer.ggml.add_bos_token"))


def _default_add_bos(p: Patient) -> bool:
    """What llama.cpp does without add_bos_token: SentencePiece and some pre-tokenizers add a BOS."""
    pre, _ = pretokenizers.lookup(str(p.meta.get("tokenizer.ggml.pre") or ""))
    return p.meta.get("tokenizer.ggml.model") == "llama" or bool(pre.add_bos)


def pre_tokenizer(p: Patient) -> Iterator[Finding]:
    """A byte-level vocabulary's pre-tokenizer: named, and known to llama.cpp."""
    if p.meta.get("tokenizer.ggml.model") != "gpt2":
        return
    name = str(p.meta.get("tokenizer.ggml.pre") or "")
    _, known = pretokenizers.lookup(name)
    if name and name != "default" and known:
        return
    said = [line.strip() for line in p.llama_log if "pre-tokenizer" in line or "DEGRADED" in line]
    model_name = f"{p.meta.get('general.basename') or ''} {p.meta.get('general.name') or ''}".lower()
    guess = next((pre for part, pre in PRE_BY_NAME if part in model_name), "NAME")
    what = "missing" if not name else "'default'" if name == "default" else f"unknown ({name!r})"
    yield Finding("pre.default" if known or not name else "pre.unknown", WARNING,
                  f"the pre-tokenizer (tokenizer.ggml.pre) is {what}: llama.cpp splits text with its default regex, "
                  "not the one the model was trained with", {"tokenizer.ggml.pre": name or None, "llama_cpp": said},
                  Fix("", f"gguf-new-metadata IN.gguf OUT.gguf --pre-tokenizer {guess}"
                      + ("" if guess != "NAME" else " (the model's: llama.cpp's names, e.g. llama-bpe, qwen2, smollm)")))


def token_types(p: Patient) -> Iterator[Finding]:
    """The markers the template writes are special tokens; the special tokens it writes are markers."""
    tok, fmt = p.tokenizer, p.model.detection.format
    if fmt.template is None:
        return
    texts = "\0".join(p.model.encoder.filled(t) for t in [*fmt.template_texts(), *fmt.after_assistant_texts()])
    for marker in dict.fromkeys(LOOKS_SPECIAL.findall(texts)):
        token_id = tok.token_to_id(marker)
        if token_id is not None and tok.token_type(token_id) == TokenType.NORMAL:
            yield Finding("tokens.marker-typed-normal", WARNING, f"the template writes {marker!r}, a token typed "
                          "normal: llama.cpp does not parse it as a special token in a prompt's text, and streams "
                          "show it", {"token": p.token(token_id), "type": "normal",
                                      "llama_cpp_ids": p.oracle.tokenize(marker, True)},
                          Fix("nothing: rml-chat writes the template's tokens by id",
                              "retype it control (3) in tokenizer.ggml.token_type; gguf-new-metadata has no option "
                              "for it (the gguf package's GGUFWriter can copy the file with the array changed)"))
    for token_id in template_specials(p):
        text = tok.id_to_token(token_id)
        if text.strip().isalpha():
            yield Finding("tokens.word-typed-control", NOTE, f"the template writes {text!r}, a plain word typed as a "
                          "control token: a tool that parses special tokens in user text turns that word into it",
                          {"token": p.token(token_id)}, Fix("nothing: rml-chat keeps message contents literal"))


CHECKS = (tokenizer_ids, directory_against_gguf, stop_ids, bos, pre_tokenizer, token_types)
