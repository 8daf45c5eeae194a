"""``rml-chat --models`` (the models already here, listed) and the step that turns ``-hf ORG/REPO[:QUANT]``
or a listed name into the path the loader opens, before anything is loaded (``rml_chat/models`` finds them)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ..core.paths import user_path
from ..core.sessions import size_text
from ..errors import ModelError, UsageError
from ..models.facts import facts_of
from ..models.names import find_model, looks_like_a_path
from ..models.stores import LocalModel, local_models
from ..terminal import for_stream, json_text
from ..words import counted


def run_models_list(as_json: bool = False) -> int:
    models = local_models()
    rows = []
    for m in models:
        facts = facts_of(m.weights, m.quant) if not m.problem else None
        rows.append((m, facts.quant if facts else m.quant, facts.family if facts else "-"))
    if as_json:
        print(json_text({"ok": True, "models": [
            {"name": m.name, "source": m.source, "path": str(m.path), "weights": str(m.weights), "bytes": m.size,
             "quant": quant, "chat_format": family, "problem": m.problem or None, "sampling": m.sampling or None}
            for m, quant, family in rows]}))
        return 0
    if not rows:
        print("no models found here (the Hugging Face cache, llama.cpp's cache, LM Studio's folder, ollama's store); "
              "rml-chat -hf ORG/REPO fetches one")
        return 0
    width = max(len(m.name) for m, _, _ in rows)
    print(f"{'NAME':{width}}  {'SIZE':>8}  {'QUANT':8}  {'FORMAT':12}  {'SOURCE':9}  WHERE")
    for m, quant, family in rows:
        where = f"{m.path}" + (f"  ({m.problem})" if m.problem else "")
        print(for_stream(f"{m.name:{width}}  {size_text(m.size):>8}  {quant or '-':8}  {family:12}  {m.source:9}  "
                         f"{where}", sys.stdout))
    print(f"{counted(len(rows), 'model')} · rml-chat NAME opens one (SOURCE:NAME when two sources share a name)")
    return 0


def name_the_models(args: argparse.Namespace, say: Callable[[str], None]) -> None:
    """``-hf`` fetched, or each MODEL that is not a path found by name: ``args.model(s)`` and ``--weights`` then
    hold the paths. ModelError or UsageError: one line."""
    if args.hf_file and not args.hf_repo:
        raise UsageError("--hf-file names a file of the -hf ORG/REPO repository; give -hf too")
    if args.hf_repo:
        if args.models:
            raise UsageError(f"-hf names the model; drop MODEL ({args.models[0]!r})")
        from ..models.hub import fetch
        from ..models.hub_spec import HubSpec

        spec = HubSpec.parse(args.hf_repo, args.hf_file or "")
        say(f"{spec}: asking the hub …")
        fetched = fetch(spec, say, progress=None if not (args.json or args.check) else False)
        _opened(args, [(fetched.path, fetched.weights)])
        return
    found: list[tuple[Path, Path | None]] = []
    here: list[LocalModel] | None = None
    for text in args.models:
        if user_path(text).exists() or looks_like_a_path(text):
            found.append((Path(text), None))
            continue
        here = local_models() if here is None else here
        model = find_model(text, here)
        if model is None:
            raise ModelError(f"{text}: no such file or directory, and no model here by that name (rml-chat --models "
                             "lists them)")
        if model.problem:
            raise ModelError(f"{model.name} ({model.source}): {model.problem}")
        say(f"{text}: {model.name} from {model.source}, {model.path}")
        found.append((model.path, model.weights))
        if model.sampling and len(args.models) == 1:
            args.published_sampling = model.sampling  # (ollama's params: recommendations, below any flag)
    _opened(args, found)


def _opened(args: argparse.Namespace, found: list[tuple[Path, Path | None]]) -> None:
    args.models = [str(path) for path, _ in found]
    args.model = args.models[0] if args.models else None
    path, weights = found[0]
    if weights is not None and path.is_dir() and args.weights is None:
        args.weights = str(weights)  # (a model directory with several GGUFs: the one named)
