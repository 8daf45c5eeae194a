"""The doctor's reports: the text one (each model's facts and findings, then a table when there are
several), and JUnit XML for CI systems (a test suite per model, a test case per category of check, a
failure per error — per warning too under ``--strict``)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from ..words import counted
from .findings import CATEGORIES, ERROR, NOTE, WARNING, ModelReport


def _facts(r: ModelReport) -> list[str]:
    f, lines = r.facts, [f"model        {r.model} ({r.path})"]
    if "chat_format" in f:
        c = f["chat_format"]
        lines.append(f"chat format  {c['name']} (established by {c['established_by']}"
                     + (f"; template: {c['probes']} probes identical" if c["probes"] else "") + ")")
    if "stop_ids" in f:
        lines.append("stop ids     " + ", ".join(f"{i} {t!r}" for i, t in f["stop_ids"]))
    if "tokenizer" in f:
        t = f["tokenizer"]
        lines.append(f"tokenizer    {t['id_exact']}/{t['texts']} texts id-exact with llama.cpp")
    if "prompt" in f:
        lines.append(f"chat prompt  the template's own, text and ids ({counted(f['prompt']['tokens'], 'token')})")
    if "reply" in f:
        rep = f["reply"]
        lines.append(f"reply        {rep['text'].strip()[:200]!r} ({counted(rep['tokens'], 'token')}, stop: "
                     f"{rep['stop_reason']})")
    return lines


def text_report(r: ModelReport, strict: bool) -> str:
    lines = _facts(r)
    for severity in (ERROR, WARNING, NOTE):
        for finding in (f for f in r.findings if f.severity == severity):
            lines.append(f"{severity:8} {finding.id}: {finding.message}")
            if finding.fix.rml_chat:
                lines.append(f"{'':8}   fix (rml-chat): {finding.fix.rml_chat}")
            if finding.fix.gguf:
                lines.append(f"{'':8}   fix (the file): {finding.fix.gguf}")
    for why in dict.fromkeys(r.skipped.values()):
        lines.append(f"{'skipped':8} {', '.join(c for c, w in r.skipped.items() if w == why)}: {why}")
    counts = ", ".join(counted(r.count(s), s) for s in (ERROR, WARNING, NOTE))
    lines.append(f"{'FAIL' if r.failed(strict) else 'PASS'} ({counts}{'; --strict' if strict else ''}, {r.seconds:.1f} s)")
    return "\n".join(lines)


def table(reports: list[ModelReport], strict: bool) -> str:
    width = max(len("model"), *(len(r.model) for r in reports))
    rows = [f"{'model':{width}}  errors  warnings  notes  seconds  result"]
    rows += [f"{r.model:{width}}  {r.count(ERROR):6}  {r.count(WARNING):8}  {r.count(NOTE):5}  {r.seconds:7.1f}  "
             f"{'FAIL' if r.failed(strict) else 'PASS'}" for r in reports]
    return "\n".join(rows)


def write_junit(reports: list[ModelReport], strict: bool, path: str) -> None:
    failing = (ERROR, WARNING) if strict else (ERROR,)
    suites = ET.Element("testsuites", name="rml-chat --check")
    total = failures = skipped = 0
    for r in reports:
        suite = ET.SubElement(suites, "testsuite", name=_xml(r.model), time=f"{r.seconds:.3f}")
        failed_here = 0
        for category in CATEGORIES:
            case = ET.SubElement(suite, "testcase", classname=_xml(r.model), name=category)
            if category in r.skipped:
                ET.SubElement(case, "skipped", message=_xml(r.skipped[category]))
                continue
            found = [f for f in r.findings if f.id.split(".")[0] == category]
            for finding in found:
                body = json.dumps({"evidence": finding.evidence, "fix": finding.fix.__dict__}, ensure_ascii=False)
                if finding.severity in failing:
                    ET.SubElement(case, "failure", message=_xml(finding.message),
                                  type=f"{finding.severity}:{finding.id}").text = _xml(body)
                else:
                    ET.SubElement(case, "system-out").text = _xml(f"{finding.severity} {finding.id}: {finding.message}")
            failed_here += any(f.severity in failing for f in found)
        suite.set("tests", str(len(CATEGORIES)))
        suite.set("failures", str(failed_here))
        suite.set("skipped", str(len(r.skipped)))
        total, failures, skipped = total + len(CATEGORIES), failures + failed_here, skipped + len(r.skipped)
    suites.set("tests", str(total))
    suites.set("skipped", str(skipped))
    suites.set("failures", str(failures))
    ET.indent(suites)
    Path(path).write_text(ET.tostring(suites, encoding="unicode") + "\n", encoding="utf-8")


#: what XML 1.0 can't hold at all, not even as a character reference: most C0 controls, lone surrogates
#: (a file name's bytes that are not UTF-8), U+FFFE and U+FFFF
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """Text a JUnit report can hold: each character XML can't, written as Python writes it (a model's
    name ``bad\\x1b[31m.gguf``, a byte of a file name ``caf\\udce9.gguf``), so the report still parses.

        >>> _xml("bad\\x1b[31m.gguf"), _xml("caf\\udce9")
        ('bad\\\\x1b[31m.gguf', 'caf\\\\udce9')
    """
    return _NOT_XML.sub(lambda m: ascii(m.group())[1:-1], text)
