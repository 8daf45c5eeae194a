"""Opening a chat: the model, the engine over its weights, and the session with the flags' settings.

Everything that can't apply is said here, once, before the first token: a context rounded up to
llama.cpp's step, ``-c 0`` meaning the model's training context, ``--think`` for a model whose prompt
has no thinking switch, and a tokenizer that does not fit the weights (an error).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.conversation import Conversation, window_note
from ..core.paths import resolve, user_path
from ..core.sessions import find_session, sessions_dir
from ..core.structured import Constraint, check, from_grammar, from_schema
from ..engines.base import Engine, context_size
from ..engines.kv_cache import state_path
from ..engines.sampler_chain import describe, stages
from ..engines.speculative import SPEC_DEFAULT, Speculation, added_types, vocabulary_difference
from ..errors import UsageError
from ..terminal import visible
from ..words import counted

if TYPE_CHECKING:
    from ..core.model import Model
    from ..core.sampling_sources import ChosenSampling
    from ..core.session import ChatSession
    from .reply_display import ReplyDisplay


def constraint_from(args: argparse.Namespace, engine: Engine) -> Constraint | None:
    """-j/--json-schema, --grammar or --grammar-file, checked against llama.cpp's grammar parser."""
    if args.json_schema is not None:
        constraint = from_schema(args.json_schema)
    elif args.grammar is not None:
        constraint = from_grammar(args.grammar)
    elif args.grammar_file is not None:
        constraint = from_grammar("@" + args.grammar_file, "--grammar-file")
    else:
        return None
    check(constraint, engine)
    return constraint


def sampling_from(args: argparse.Namespace, model: Model) -> ChosenSampling:
    """The sampling settings of this run: the flags given, else the model's recommendations, else llama.cpp's
    defaults (core/sampling_sources.py); a ``--logit-bias`` past the vocabulary is a usage error."""
    from ..core.sampling_sources import choose, recommended
    from ..core.settings import SAMPLING_NAMES, bias_problem

    given = {name: getattr(args, name) for name in getattr(args, "given_settings", ()) if name in SAMPLING_NAMES}
    chosen = choose(given, *recommended(model.source, model.weights, getattr(args, "published_sampling", None)))
    problem = bias_problem(chosen.sampling.logit_bias, model.tokenizer.vocab_size)
    if problem:
        raise UsageError(f"--{problem}")
    return chosen


def _threads(value: int) -> int | None:
    return None if value == -1 else value


#: the Speculation fields that hold what a file flag names, loaded once the model is (-md, -lcs, -lcd)
_LOADED = ("draft_model", "lookup_cache_static", "lookup_cache_dynamic")


def speculation_of(args: argparse.Namespace) -> Speculation:
    """The speculative settings the flags ask for: ``--spec-default`` is llama.cpp's (ngram-mod and its
    sizes) unless a ``--spec-*`` flag says otherwise."""
    base = SPEC_DEFAULT if args.spec_default == "on" else Speculation()
    flag = {"spec_type": "spec_type"}  # each field's settings row: spec_<field>, the type's own name aside
    chosen = {f.name: getattr(args, flag.get(f.name, f"spec_{f.name}")) for f in fields(Speculation)
              if f.name not in _LOADED
              and (flag.get(f.name, f"spec_{f.name}") in args.given_settings or args.spec_default != "on")}
    chosen = {name: value == "on" if isinstance(getattr(base, name), bool) else value  # (an on|off flag)
              for name, value in chosen.items()}
    if "spec_type" in chosen and base.on:  # (llama.cpp adds --spec-type's types to --spec-default's)
        chosen["spec_type"] = added_types(base.spec_type, chosen["spec_type"])
    return replace(base, **chosen)


def start_engine(weights: Path, args: argparse.Namespace, n_ctx: int | None = None) -> Callable[[], Engine]:
    """Start loading the weights in a thread (two C calls that need no GIL, so our tokenizer loads
    meanwhile: runtime.py); the returned function waits for the engine, or raises what the load raised."""
    from ..engines.bindings import llama_log
    from ..engines.local import LocalEngine

    llama_log()  # the bindings and the log callback, here: their import is Python work, which holds the GIL

    requested = args.ctx_size if n_ctx is None else n_ctx
    threads = _threads(args.threads)
    box: list = []

    def load() -> None:
        try:
            box.append(LocalEngine(weights, n_ctx=requested, n_threads=threads,
                                   n_threads_batch=_threads(args.threads_batch) or threads, verbose=args.verbose,
                                   gpu=(args.n_gpu_layers, args.split_mode), flash_attn=args.flash_attn,
                                   n_batch=args.batch_size, n_ubatch=args.ubatch_size,
                                   parallel=args.parallel if getattr(args, "batch", None) is not None else 1,
                                   speculation=speculation_of(args)))
        except BaseException as err:  # handed to the caller, in its thread
            box.append(err)

    worker = threading.Thread(target=load, name="load-weights", daemon=True)
    worker.start()

    def wait() -> Engine:
        worker.join()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    return wait


def _attach_draft(engine, model, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    """``-md FILE``: the draft model's weights in a context of its own beside the model's, for
    ``--spec-type draft-simple`` (the type it implies where no other is given); refused in one line where
    its vocabulary is not the model's (``speculative.vocabulary_difference``, on the tokenizers we build)."""
    import tokenizer

    from ..engines.runtime import LlamaModel, LoadError
    from ..engines.thread_choice import ThreadChoice
    from ..errors import ModelError

    path = user_path(args.model_draft)
    try:
        draft_vocabulary = tokenizer.load(str(path))
    except (OSError, ValueError) as err:
        raise ModelError(f"-md {args.model_draft}: {err}") from None
    difference = vocabulary_difference(model.tokenizer, draft_vocabulary)
    if difference:
        raise ModelError(f"-md {args.model_draft}: this draft model can't draft for {model.name}: {difference}")
    lines = args.parallel if getattr(args, "batch", None) is not None else 1  # (-np: a sequence for each line)
    try:
        draft = LlamaModel(path, n_ctx=engine.n_ctx, n_batch=512, threads=ThreadChoice(_threads(args.threads)),
                           threads_batch=None, gpu=(args.n_gpu_layers, args.split_mode),
                           n_seq=lines + 1 if lines > 1 else 1)
    except (LoadError, OSError) as err:
        raise ModelError(f"-md {args.model_draft}: llama.cpp could not load it: {err}") from None
    chosen = engine.speculation
    engine.speculation = replace(chosen, spec_type="draft-simple" if not chosen.on else chosen.spec_type,
                                 draft_model=draft)


def _attach_lookup_caches(engine, model, args: argparse.Namespace, say: Callable[[str], None]) -> None:  # type: ignore[no-untyped-def]
    """``-lcs``/``-lcd FILE``: llama.cpp's lookup cache files, read for ``--spec-type ngram-cache`` (and for a
    later ``/set spec-type ngram-cache``); refused in one line where a file is not one, or names a token
    past the model's vocabulary (another model's cache)."""
    from ..engines.lookup_cache import LookupCache, LookupCacheError
    from ..errors import ModelError

    caches = {}
    for field, flag, path in (("lookup_cache_static", "-lcs", args.lookup_cache_static),
                              ("lookup_cache_dynamic", "-lcd", args.lookup_cache_dynamic)):
        if not path:
            continue
        try:
            cache = LookupCache.read(user_path(path))
        except LookupCacheError as err:
            raise ModelError(f"{flag} {path}: not a llama.cpp lookup cache: {err}") from None
        except (OSError, ValueError) as err:  # (ValueError: a path with a NUL in it)
            raise ModelError(f"{flag} {path}: {getattr(err, 'strerror', None) or err}") from None
        largest, n_vocab = cache.largest_token, model.tokenizer.vocab_size
        if largest >= n_vocab:
            raise ModelError(f"{flag} {path}: token id {largest} is past {model.name}'s vocabulary ({n_vocab} tokens): "
                             "a cache made with another model's tokenizer")
        caches[field] = cache
    engine.speculation = replace(engine.speculation, **caches)
    if "ngram-cache" not in engine.speculation.types:
        say("note: -lcs and -lcd draft only with --spec-type ngram-cache")


def open_engine(model, args: argparse.Namespace, say: Callable[[str], None], n_ctx: int | None = None,
                loading: Callable[[], Engine] | None = None) -> Engine:
    """llama.cpp over the model's weights (``loading``: a load already started), or the server of
    ``--server``, checked against our tokenizer; notes on the context size."""
    if args.server:
        from ..engines.server import ServerEngine

        server = ServerEngine(args.server, api_key=args.api_key)
        server.check_vocabulary(model.tokenizer, model.source)
        say(f"note: {server.url} serves {server.model_id} ({server.n_ctx}-token context)")
        if speculation_of(args).on or args.lookup_cache_static or args.lookup_cache_dynamic:
            say("note: --spec-type is for a model loaded here; a llama-server speculates as its own --spec-type says")
        return server
    requested = args.ctx_size if n_ctx is None else n_ctx
    engine = (loading or start_engine(model.weights, args, n_ctx))()
    try:
        engine.check_vocabulary(model.tokenizer, model.source)
        if args.model_draft:
            _attach_draft(engine, model, args)
        if args.lookup_cache_static or args.lookup_cache_dynamic:
            _attach_lookup_caches(engine, model, args, say)
    except BaseException:
        engine.close()
        raise
    if engine.n_ctx_train and engine.n_ctx > engine.n_ctx_train:  # as llama.cpp warns: once, here
        say(f"note: context {engine.n_ctx} tokens is past the model's training context ({engine.n_ctx_train}): "
            "replies may degrade beyond it")
    if args.verbose:
        say(f"layers: {engine.placement}")
    if requested == 0:
        say(f"note: context {engine.n_ctx} tokens (-c 0: the model's training context)")
    elif engine.n_ctx != requested and context_size(requested) == engine.n_ctx:
        say(f"note: context {engine.n_ctx} tokens (-c {requested} rounded up: llama.cpp allocates in steps of 256)")
    return engine


def resumed(args: argparse.Namespace) -> tuple[Conversation, Path] | None:
    """``--resume [N|NAME|FILE]``: the conversation to reopen (the newest autosave without one) and its file."""
    if args.resume is None:
        return None
    path = find_session(args.resume)
    return Conversation.load(path), path


def restore_settings(session: ChatSession, display: ReplyDisplay, args: argparse.Namespace) -> str:
    """The ``/set`` changes saved with a resumed chat, applied where no flag of this run set them (a flag
    left at its default) to the session or the display; what was restored, as ``temp=0.2 seed=7``. A saved
    value no longer allowed is passed over."""
    from ..core.settings import BY_NAME, SettingError
    from .reply_display import SETTINGS as DISPLAYED

    done = []
    for name, text in session.conversation.settings.items():
        row = BY_NAME.get(name)
        if row is None or not row.settable or name in getattr(args, "given_settings", ()):
            continue
        try:
            value = row.parse(str(text))
        except SettingError:
            continue
        if name in DISPLAYED:
            display.apply(name, value)
            done.append(f"{name.replace('_', '-')}={text}")
        elif not session.apply(name, value):
            done.append(f"{name.replace('_', '-')}={text}")
    return " ".join(done)


def prompt_cache_for(args: argparse.Namespace, engine: Engine) -> None:
    """``--prompt-cache on`` (the default) for -p, --batch and --check: the engine restores what a kept
    state shares with each prompt (engines/prompt_cache.py); the folder and its cap from the environment."""
    from tokenizer.cache_dirs import cache_folder

    from ..core.sessions import parse_size
    from ..engines.prompt_cache import DEFAULT_CAP, PromptCache

    folder = cache_folder("RML_CHAT_PROMPT_CACHE", "prompt-cache")
    if args.prompt_cache != "on" or folder is None:
        return
    try:
        cap = parse_size(os.environ.get("RML_CHAT_PROMPT_CACHE_MAX") or str(DEFAULT_CAP))
    except ValueError as err:
        raise UsageError(f"$RML_CHAT_PROMPT_CACHE_MAX: {err}") from None

    def verbose(line: str) -> None:
        if args.verbose:
            print(visible(line), file=sys.stderr, flush=True)

    def note(line: str) -> None:
        print(visible(f"rml-chat: note: {line}"), file=sys.stderr, flush=True)

    engine.use_prompt_cache(PromptCache(folder, cap, verbose, note))


EFFORTS = ("minimal", "low", "medium", "high")  # the levels templates name (gpt-oss: low, medium, high)


def effort_from(model: Model, effort: str, say: Callable[[str], None]) -> str | None:
    """``--reasoning-effort``: the effort where the template reads it; a note where it reads none (as
    ``--think`` without a switch), a usage error where it refuses the value."""
    verdict, why = model.effort_check(effort)
    if verdict == "refused":
        raise UsageError(f"--reasoning-effort {effort}: {why}")
    source = model.detection.format.template or ""
    named = [level for level in EFFORTS if re.search(rf"\b{level}\b", source)]
    if verdict == "applies" and named and effort not in EFFORTS and not re.search(rf"\b{re.escape(effort)}\b", source):
        raise UsageError(f"--reasoning-effort {effort}: the chat template takes levels ({', '.join(named)} named in "
                         f"it; {', '.join(EFFORTS)} are the levels such templates take), not {effort!r}, which it "
                         "would write into the prompt as given")
    if why:
        say(f"note: --reasoning-effort {effort}{'' if verdict == 'applies' else ' does not apply'}: {why}")
    return effort if verdict == "applies" else None


def resume_warnings(session: ChatSession, held_with: str | None) -> list[str]:
    """What a resumed chat lacks now: the model it was held with (``held_with``, as saved, when no MODEL was
    named) if that file is not found from here, and the tools it called that this run does not give."""
    lines = []
    if held_with and not Path(held_with).exists():
        lines.append(f"warning: the chat was held with {held_with}, which is not found from here; it goes on with "
                     f"{session.model.name} (chat format {session.model.detection.format.name}) — name the model to "
                     "use: rml-chat MODEL --resume …")
    tools = session.options.tools
    given = {d["function"]["name"] for d in tools.definitions()} if tools is not None else set()
    missing = [name for name in session.conversation.called_tools() if name not in given]
    if missing:
        lines.append(f"warning: the chat called {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                     "not among the tools given now" + ("" if given else " (none are: --functions FILE or --mcp "
                     "COMMAND gives tools)") + "; the model sees the earlier calls but can't call them again")
    return lines


@dataclass
class Opened:
    """What ``open_session`` hands the front ends: the session, how its thoughts are shown, and the
    autosave file a resumed chat goes on in (None: a new chat claims its own)."""

    session: ChatSession
    display: ReplyDisplay
    autosave: Path | None = None


def open_session(args: argparse.Namespace, say: Callable[[str], None]) -> Opened:
    """Load model and weights, with a progress line; raises ModelError (one line). With ``--resume`` the
    saved conversation comes back, with the model it was held with unless MODEL names another, and the
    settings changed in it."""
    reopened = resumed(args)
    held_with = reopened[0].model if reopened is not None and args.model is None else None
    if held_with and Path(held_with).exists():
        args.model = held_with
    say(f"loading {args.model or 'SmolLM2-135M-Instruct (default)'} …")
    loading = None if args.server else start_engine(resolve(args.model, args.weights)[1], args)
    from ..core.model import load_model  # our tokenizer and the chat code load while llama.cpp loads the weights
    from ..core.session import ChatSession, ContextOptions, ReasoningOptions, SessionOptions
    from .reply_display import ReplyDisplay

    model = load_model(args.model, weights=args.weights, chat_format=args.chat_format, need_weights=not args.server)
    model.encoder.encode(model.encoder.format([{"role": "user", "content": "Hello"}]))  # its tables, now too
    if model.detection.warning:
        say(f"note: {model.detection.warning}")
    if args.verbose:
        for line in model.describe():
            say(line)
    thinking = {"on": True, "off": False, None: None}[args.think]
    if thinking is not None and not model.detection.format.thinking_switch:
        why = ("the model has no chat template (prompts are plain text)" if model.tokenizer.chat_template is None
               and args.chat_format is None else f"the chat format {model.detection.format.name!r} has no thinking "
               "switch (its template writes the same prompt either way)")
        say(f"note: --think {args.think} does not apply: {why}")
        thinking = None
    chosen = sampling_from(args, model)  # (a --logit-bias past the vocabulary is said before the weights are waited for)
    for why in chosen.refused:
        say(f"note: the model's sampling recommendation is left out: {why}")
    engine = open_engine(model, args, say, loading=loading)
    if args.verbose:
        say(f"sampler chain: {describe(stages(chosen.sampling, stop_ids=model.stop_ids))}")
    try:
        effort = effort_from(model, args.reasoning_effort, say) if args.reasoning_effort is not None else None
        if args.tool_choice == "required" and not (args.functions or args.mcp):
            raise UsageError("--tool-choice required: no tools to call (give --functions FILE or --mcp COMMAND)")
        options = SessionOptions(chosen.sampling, ReasoningOptions(thinking, effort),
                                 ContextOptions(args.overflow, args.context_shift == "on"), tuple(args.stop),
                                 constraint_from(args, engine), sampling_sources=chosen.sources)
        if args.functions or args.mcp:
            from .tools_setup import tools_for

            options.tools = tools_for(model, args, say)
    except BaseException:
        engine.close()
        raise
    session = ChatSession(model, engine, options)
    display = ReplyDisplay(args.thinking_display, args.hide_thinking == "on", args.markdown == "on")
    autosave = None
    if reopened is not None:
        session.conversation, path = reopened
        if path.parent.resolve() == sessions_dir().resolve():  # an autosave goes on in its own file
            autosave = path
        restored, why = session.restore_state(state_path(path))
        state = (f"llama.cpp's state restored: {counted(restored, 'token')} need no evaluation" if restored else
                 f"{why}: the first turn evaluates it")
        say(f"note: resumed {path} ({counted(len(session.conversation.messages), 'message')}"
            f"{window_note(session.conversation)}; {state})")
        for line in resume_warnings(session, held_with):
            say(line)
        restored_settings = restore_settings(session, display, args)
        if restored_settings:
            say(f"note: settings of the chat restored: {restored_settings} (a flag given now wins)")
    if args.system is not None:
        session.conversation.system = args.system
    if model.reasoning is None and (args.reasoning_budget >= 0 or args.hide_thinking == "on"):
        say("note: --reasoning-budget and --hidethinking do not apply: the model's template writes no thought")
    return Opened(session, display, autosave)
