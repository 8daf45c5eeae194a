"""One model examined: loaded as a chat loads it, llama.cpp's vocabulary of the same file beside it, every
check of the table run (a check that fails is a finding, never a crash), then the real turn unless
``--no-reply``."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..core.model import Model, load_model
from ..engines.base import Engine
from ..engines.bindings import llama_log
from ..engines.llama_vocab import LlamaVocab
from ..engines.runtime import LoadError
from ..errors import AppError, ModelError
from . import reply, template, vocabulary
from .findings import CATEGORIES, ERROR, WARNING, Finding, Fix, ModelReport
from .patient import Patient

CHECKS = (*vocabulary.CHECKS, *template.CHECKS)
#: the categories of check that need the model loaded: all but the loading itself and the doctor's own failures
AFTER_LOAD = tuple(c for c in CATEGORIES if c not in ("model", "doctor"))


def examine(path: str | None, *, weights: str | None = None, chat_format: str | None = None,
            engine_for: Callable[[Model], Engine] | None = None, max_tokens: int = 96) -> ModelReport:
    """The findings for the model at ``path`` (None: the default model); ``engine_for`` opens the engine for
    the real turn (None: no turn, the weights are never loaded)."""
    started = time.perf_counter()
    report = ModelReport(path or "SmolLM2-135M-Instruct (default)", path or "")
    try:
        model = load_model(path, weights=weights, chat_format=chat_format)
    except ModelError as err:
        if err.unsupported:  # the file may be fine: rml-chat can't read its kind of vocabulary
            report.add(Finding("model.unsupported", WARNING, f"rml-chat can't check this model: {err}", {}, Fix()))
        else:
            report.add(Finding("model.load", ERROR, str(err), {}, Fix("a .gguf file or a model directory")))
        report.skip(AFTER_LOAD, "the model did not load")
        return _done(report, started)
    report.model, report.path = model.name, str(model.source)
    log = llama_log()
    said = len(log.kept)
    try:
        oracle = LlamaVocab(model.weights)
    except LoadError:
        report.add(Finding("model.llama-load", ERROR, f"llama.cpp can't load the vocabulary of {model.weights.name}: "
                           f"{log.failure_reason() or 'no reason given'}", {"llama_cpp": log.kept[said:][:5]},
                           Fix("see the evidence: llama.cpp's own words")))
        report.skip(AFTER_LOAD, "llama.cpp can't load the vocabulary")
        return _done(report, started)
    patient = Patient.of(model, oracle, log.kept[said:])
    patient.facts["stop_ids"] = [patient.token(i) for i in model.stop_ids]
    try:
        for check in CHECKS:
            _run(report, check.__name__, lambda check=check: list(check(patient)))
        if engine_for is None:
            report.skip(("reply",), "no reply asked for (--no-reply)")
        else:
            try:
                engine = engine_for(model)
            except AppError as err:
                report.add(Finding("model.weights", ERROR, f"the weights don't load: {err}", {}, Fix()))
                report.skip(("reply",), "the weights did not load")
                return _done(report, started, patient)
            try:
                _run(report, "reply", lambda: list(reply.turn(patient, engine, max_tokens)))
                engine.keep_prompt()
            finally:
                engine.close()
    finally:
        oracle.close()
    return _done(report, started, patient)


def _run(report: ModelReport, name: str, check: Callable[[], list[Finding]]) -> None:
    try:
        report.findings += check()
    except AppError as err:
        report.add(Finding(f"{name}.failed", ERROR, str(err), {}, Fix()))
    except Exception as err:  # a check that breaks on a strange file says so and the others go on
        report.add(Finding("doctor.check-failed", ERROR, f"the {name} check failed on this model "
                           f"({type(err).__name__}: {err})", {"check": name}, Fix("report it")))


def _done(report: ModelReport, started: float, patient: Patient | None = None) -> ModelReport:
    report.seconds = time.perf_counter() - started
    if patient is not None:
        report.facts = patient.facts
    return report
