"""A Hugging Face model directory: tokenizer.json plus the config files that complete it.

    tokenizer_config.json     bos_token / eos_token, add_bos_token / add_eos_token, chat_template
                              (a string, or a list of {name, template}: "default" wins)
    chat_template.jinja       the chat template, preferred over tokenizer_config's (as transformers does)
    generation_config.json,   eos_token_id (an int or a list) -> more ids that end generation
    config.json
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..spec import TokenizerError, TokenizerSpec
from ..speedups import REFERENCE, Speedups
from .hf import _read_json, spec_from_tokenizer_json


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _chat_template(config: dict, folder: Path) -> str | None:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        try:
            return jinja.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise TokenizerError(f"{jinja}: can't read ({err})") from None
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default", next(iter(named.values()), None))
    return template if isinstance(template, str) else None


def _eos_ids(folder: Path) -> list[int]:
    ids: list[int] = []
    for name in ("generation_config.json", "config.json"):
        path = folder / name
        if path.is_file():
            data = _read_json(path)
            value = data.get("eos_token_id") if isinstance(data, dict) else None
            values = value if isinstance(value, list) else [value]
            ids += [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return ids


#: the config files ``load_hf`` reads beside tokenizer.json.
CONFIG_FILES = ("tokenizer_config.json", "chat_template.jinja", "generation_config.json", "config.json")


def is_hf_source(path: Path) -> bool:
    """A model directory or a tokenizer.json file (anything else is read as a GGUF)."""
    return path.is_dir() or path.suffix.lower() == ".json"


def source_files(path: Path) -> list[Path]:
    """Every file ``load_hf(path)`` may read: the tokenizer.json, then ``CONFIG_FILES`` beside it."""
    folder = path if path.is_dir() else path.parent
    return [folder / "tokenizer.json" if path.is_dir() else path, *(folder / name for name in CONFIG_FILES)]


def load_hf(path: Path, speedups: Speedups = REFERENCE) -> TokenizerSpec:
    """The spec of a tokenizer.json file, or of a model directory holding one (configs included)."""
    folder = path if path.is_dir() else path.parent
    file = source_files(path)[0]
    if not file.is_file():
        raise TokenizerError(f"{folder}: no tokenizer.json in the directory")
    spec, ids = spec_from_tokenizer_json(file, speedups)
    config_path = folder / "tokenizer_config.json"
    config = _read_json(config_path) if config_path.is_file() else {}
    if not isinstance(config, dict):
        raise TokenizerError(f"{config_path}: must be a JSON object")
    vocab: dict[str, Any] = {}  # changes to the vocabulary part, then to the post-process part
    post: dict[str, Any] = {}
    for key, field in (("bos_token", "bos_id"), ("eos_token", "eos_id"), ("unk_token", "unk_id"), ("pad_token", "pad_id")):
        text = _token_text(config.get(key))
        if text is not None and text in ids:
            vocab[field] = ids[text]
    for key, field in (("add_bos_token", "add_bos"), ("add_eos_token", "add_eos")):
        if isinstance(config.get(key), bool):
            post[field] = config[key]
            post.update(prefix=None, suffix=None)  # the config's flags decide, as BOS / EOS
    n = len(spec.vocab.tokens)
    eos_id = vocab.get("eos_id", spec.vocab.eos_id)
    extra = [i for i in _eos_ids(folder) if 0 <= i < n and i != eos_id]
    vocab["extra_eos_ids"] = tuple(dict.fromkeys(spec.vocab.extra_eos_ids + tuple(extra)))
    if post.get("add_bos") and vocab.get("bos_id", spec.vocab.bos_id) is None:
        post["add_bos"] = False
    if post.get("add_eos") and eos_id is None:
        post["add_eos"] = False
    return dataclasses.replace(spec, vocab=dataclasses.replace(spec.vocab, **vocab),
                               post=dataclasses.replace(spec.post, **post), chat_template=_chat_template(config, folder))
