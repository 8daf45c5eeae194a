"""llama.cpp's sampler chain, as data: which samplers, in which order, with which settings.

``stages(sampling)`` lists the chain ``common_sampler_init`` builds for the same settings; ``llama_sampler.py``
turns each stage into its ``llama_sampler_init_*`` call, ``server.py`` sends the same settings as
llama-server's request fields, and ``/info`` and ``--verbose`` print ``describe`` of it. So the chain a
user reads is the chain that runs::

    grammar? -> logit bias? -> the samplers in order (penalties, dry, top_n_sigma, top_k, typ_p, top_p,
                               min_p, xtc, temperature) -> dist           (mirostat 0, the default)
                            -> temperature -> mirostat or mirostat v2     (mirostat 1 or 2)

Every sampler of the order is built, as llama.cpp builds it, off values included (a sampler at its off
value passes the candidates through). A grammar goes first: it only removes tokens, so what comes after
sees what llama.cpp's grammar-then-resample path sees. ``temp 0`` keeps the most likely token, as
llama.cpp's temperature sampler does; ``--ignore-eos`` is a bias of -inf on the stop tokens.

Example::

    >>> from .base import Sampling
    >>> describe(stages(Sampling(temp=0.7, seed=3, samplers=("top_k", "temperature"))))
    'top_k(k=40) -> temperature(t=0.7) -> dist(seed=3)'
    >>> parse_order("top-k;temp"), parse_order("kt")
    (('top_k', 'temperature'), ('top_k', 'temperature'))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .base import Sampling

#: the samplers an order may name: llama.cpp's canonical name -> its letter (``--sampler-seq``)
LETTERS = {"penalties": "e", "dry": "d", "top_n_sigma": "s", "top_k": "k", "typ_p": "y", "top_p": "p",
           "min_p": "m", "xtc": "x", "temperature": "t"}
#: llama.cpp's other spellings: kebab-case, no dash, and a few words
ALIASES = {**{n.replace("_", "-"): n for n in LETTERS if "_" in n}, **{n.replace("_", ""): n for n in LETTERS if "_" in n},
           "nucleus": "top_p", "temp": "temperature", "typ": "typ_p"}


@dataclass(frozen=True)
class Stage:
    """One sampler of the chain: its name and its settings, as they are passed to llama.cpp."""

    name: str
    settings: tuple[tuple[str, object], ...] = ()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(f'{key}={_shown(value)}' for key, value in self.settings)})"

    def get(self, key: str) -> object:
        return dict(self.settings)[key]


def parse_order(text: str) -> tuple[str, ...]:
    """An order of samplers: names separated by ``;`` (``--samplers``: ``top_k;temperature``, any of
    llama.cpp's spellings), or letters (``--sampler-seq``: ``kt``); ValueError names what is allowed."""
    names = [ALIASES.get(part.strip().lower(), part.strip().lower()) for part in text.split(";")]
    if all(name in LETTERS for name in names) and names:
        return tuple(names)
    by_letter = {letter: name for name, letter in LETTERS.items()}
    if text and ";" not in text and all(letter in by_letter for letter in text):
        return tuple(by_letter[letter] for letter in text)
    raise ValueError(f"names separated by ; ({';'.join(LETTERS)}) or letters ({''.join(LETTERS.values())})")


def stages(sampling: Sampling, *, grammar: bool = False, stop_ids: Sequence[int] = ()) -> list[Stage]:
    """The chain for these settings (``grammar``: one constrains the reply; ``stop_ids``: the tokens that
    ``ignore_eos`` bars)."""
    s = sampling
    chain = [Stage("grammar")] if grammar else []
    biases = tuple(s.logit_bias) + (tuple((i, -math.inf) for i in stop_ids) if s.ignore_eos else ())
    if biases:
        chain.append(Stage("logit_bias", (("biases", biases),)))
    if s.mirostat == 0:
        chain += [_sampler(name, s) for name in s.samplers]
        chain.append(Stage("dist", (("seed", s.seed),)))
    else:
        chain.append(Stage("temperature", (("t", s.temp),)))
        chain.append(Stage("mirostat" if s.mirostat == 1 else "mirostat_v2",
                           (("tau", s.mirostat_ent), ("eta", s.mirostat_lr), ("seed", s.seed))))
    return chain


def _sampler(name: str, s: Sampling) -> Stage:
    settings: dict[str, tuple[tuple[str, object], ...]] = {
        "penalties": (("last_n", s.repeat_last_n), ("repeat", s.repeat_penalty), ("frequency", s.frequency_penalty),
                      ("presence", s.presence_penalty)),
        "dry": (("multiplier", s.dry_multiplier), ("base", s.dry_base), ("allowed_length", s.dry_allowed_length),
                ("last_n", s.dry_penalty_last_n), ("breakers", tuple(s.dry_sequence_breakers))),
        "top_n_sigma": (("n", s.top_n_sigma),),
        "top_k": (("k", s.top_k),),
        "typ_p": (("p", s.typical_p),),
        "top_p": (("p", s.top_p),),
        "min_p": (("p", s.min_p),),
        "xtc": (("probability", s.xtc_probability), ("threshold", s.xtc_threshold), ("seed", s.seed)),
        "temperature": (("t", s.temp),) + ((("range", s.dynatemp_range), ("exponent", s.dynatemp_exp))
                                           if s.dynatemp_range else ()),
    }
    return Stage(name, settings[name])


def describe(chain: Sequence[Stage]) -> str:
    """The chain as one line, in llama.cpp's names."""
    return " -> ".join(str(stage) for stage in chain)


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return repr(value)
    return str(value)
