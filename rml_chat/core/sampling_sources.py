"""Which value each sampling setting takes, and where it came from.

Precedence, as llama.cpp's: a flag given on the command line (or ``/set`` later) wins; then the model's own
recommendation; then llama.cpp's default. The recommendations are read as llama.cpp reads them:

- a GGUF's ``general.sampling.*`` keys (``common_init_sampler_from_model``: the sampler sequence, top-k,
  top-p, min-p, XTC, temperature, the repeat penalty and its window, Mirostat);
- a model directory's ``generation_config.json``, under the names llama.cpp's converter maps into those
  keys (``temperature``, ``top_k``, ``repetition_penalty`` …; gguf-py's ``Metadata.load``);
- for a model opened from ollama's store, the ``params`` it was published with (``temperature``,
  ``repeat_penalty`` …), ahead of the GGUF's own keys, as ollama itself reads them.

A recommended value a flag could not take (a temperature of -1, a sequence of unknown samplers) is left
out, and said. ``sources`` names where each setting came from, for ``/info`` and ``--json``::

    >>> chosen = choose({"temp": 0.2}, {"temp": (0.6, "general.sampling.temp"), "top_k": (20, "general.sampling.top_k")})
    >>> chosen.sampling.temp, chosen.sampling.top_k, chosen.sampling.top_p
    (0.2, 20, 0.95)
    >>> chosen.sources["temp"], chosen.sources["top_k"], chosen.sources["top_p"]
    ('flag', 'model: general.sampling.top_k', "llama.cpp's default")
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokenizer import TokenizerError
from tokenizer.loaders.gguf_reader import read_metadata

from ..engines.base import Sampling
from .settings import BY_NAME, SettingError, sampling_value

#: the GGUF keys llama.cpp reads, and the setting each sets
GGUF_KEYS = {"general.sampling.sequence": "samplers", "general.sampling.top_k": "top_k",
             "general.sampling.top_p": "top_p", "general.sampling.min_p": "min_p",
             "general.sampling.xtc_probability": "xtc_probability", "general.sampling.xtc_threshold": "xtc_threshold",
             "general.sampling.temp": "temp", "general.sampling.penalty_last_n": "repeat_last_n",
             "general.sampling.penalty_repeat": "repeat_penalty", "general.sampling.mirostat": "mirostat",
             "general.sampling.mirostat_tau": "mirostat_ent", "general.sampling.mirostat_eta": "mirostat_lr"}
#: generation_config.json's names for the same settings (gguf-py's Metadata.load; the first found wins)
GENERATION_CONFIG = {"sequence": "samplers", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p",
                     "xtc_probability": "xtc_probability", "xtc_threshold": "xtc_threshold", "temperature": "temp",
                     "penalty_last_n": "repeat_last_n", "penalty_repeat": "repeat_penalty",
                     "repetition_penalty": "repeat_penalty", "mirostat": "mirostat", "mirostat_tau": "mirostat_ent",
                     "mirostat_eta": "mirostat_lr"}
#: ollama's ``params`` layer's names for them (a model opened from ollama's store: ``rml-chat NAME:TAG``)
OLLAMA_PARAMS = {"temperature": "temp", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p", "typical_p": "typical_p",
                 "repeat_penalty": "repeat_penalty", "repeat_last_n": "repeat_last_n",
                 "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
                 "mirostat": "mirostat", "mirostat_tau": "mirostat_ent", "mirostat_eta": "mirostat_lr", "seed": "seed"}
FLAG, SET, DEFAULT, OWN_DEFAULT = "flag", "/set", "llama.cpp's default", "rml-chat's default"
OWN = ("repeat_guard",)  # the settings llama.cpp has none of


@dataclass
class ChosenSampling:
    sampling: Sampling
    sources: dict[str, str]                             # setting -> "flag", "model: KEY", "llama.cpp's default"
    refused: list[str] = field(default_factory=list)    # recommendations left out, each with why


def recommended(source: Path, weights: Path, published: Mapping[str, object] | None = None,
                ) -> tuple[dict[str, tuple[object, str]], list[str]]:
    """The model's recommendations: setting -> (value as a flag would give it, where it was read), and the
    ones left out with why. ollama's ``params`` the model was ``published`` with, then a model directory's
    generation_config.json, else its GGUF's keys."""
    raw: dict[str, tuple[object, str]] = {}
    for key, name in OLLAMA_PARAMS.items():
        if published and key in published:
            raw[name] = (published[key], f"ollama params {key}")
    config = source / "generation_config.json" if source.is_dir() else None
    if config is not None and config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        for key, name in GENERATION_CONFIG.items():
            if isinstance(data, dict) and key in data and name not in raw:
                raw[name] = (data[key], f"generation_config.json {key}")
    else:
        try:
            found = read_metadata(weights, ("general.sampling.",))
        except (TokenizerError, OSError):
            found = {}
        for key, name in GGUF_KEYS.items():
            if key in found and name not in raw:
                raw[name] = (found[key][1], key)
    values, refused = {}, []
    for name, (value, where) in raw.items():
        row = BY_NAME[name]
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            refused.append(f"{where} = {json.dumps(value)}: not a value")
            continue
        try:
            values[name] = (row.check(str(value), flag=where), where)
        except SettingError as err:
            refused.append(str(err))
    return values, refused


def choose(given: Mapping[str, object], recommendations: Mapping[str, tuple[object, str]],
           refused: list[str] | None = None) -> ChosenSampling:
    """The settings: each ``given`` one (a flag's parsed value), else the model's, else llama.cpp's."""
    values, sources = {}, {}
    for name in (f for f in Sampling.__dataclass_fields__):
        if name in given:
            values[name], sources[name] = sampling_value(name, given[name]), FLAG
        elif name in recommendations:
            value, where = recommendations[name]
            values[name], sources[name] = sampling_value(name, value), f"model: {where}"
        else:
            sources[name] = OWN_DEFAULT if name in OWN else DEFAULT
    return ChosenSampling(replace(Sampling(), **values), sources, list(refused or []))


def as_json(sampling: Sampling, sources: Mapping[str, str]) -> dict[str, dict[str, object]]:
    """Each setting's value and where it came from, for ``--json``: ``{"temp": {"value": 0.6, "from": …}}``."""
    return {name: {"value": _plain(getattr(sampling, name)), "from": sources.get(name, DEFAULT)}
            for name in Sampling.__dataclass_fields__}


def set_by(sources: Mapping[str, str]) -> str:
    """The settings not at llama.cpp's defaults and where each came from, for ``/info``."""
    return ", ".join(f"{name.replace('_', '-')} ({where})" for name, where in sources.items()
                     if where not in (DEFAULT, OWN_DEFAULT)) \
        or "llama.cpp's defaults only"


def _plain(value: object) -> object:
    """A value as JSON holds it: tuples as lists, an infinite bias as the text ``-inf`` (JSON has no
    infinity)."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return str(value)
    return value
