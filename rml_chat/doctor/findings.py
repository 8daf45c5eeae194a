"""What the model doctor says about a model: findings, each with an id, a severity, a message, the
evidence and a fix; and the exit code they make.

A finding reads, in the text report::

    warning  stops.not-marked   '<|im_end|>' ends the template's assistant turns but is not the GGUF's EOS
                                or EOT (EOS is 0 '<|endoftext|>') …
             evidence           {"text": "<|im_end|>", "id": 2, "eos": [0, "<|endoftext|>"]}
             fix                gguf-new-metadata IN.gguf OUT.gguf --special-token eot '<|im_end|>'

and in ``--json`` as ``{"id", "severity", "message", "evidence", "fix": {"rml_chat", "gguf"}}`` (docs/model-doctor.md,
the schema ``rml-chat.check/1``). Ids are stable: scripts match on them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCHEMA = "rml-chat.check/1"
ERROR, WARNING, NOTE = "error", "warning", "note"
SEVERITIES = (ERROR, WARNING, NOTE)


#: the categories of check, as finding ids begin: each is a JUnit test case, passing when it found nothing
CATEGORIES = ("model", "tokenizer", "stops", "bos", "pre", "tokens", "template", "prompt", "reasoning", "reply",
              "doctor")


@dataclass(frozen=True)
class Fix:
    """How to mend it: a flag (or a way) for rml-chat, and where one applies the ``gguf`` package's
    command that repairs the file (IN.gguf and OUT.gguf stand for the file and its mended copy)."""

    rml_chat: str = ""
    gguf: str = ""


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str
    message: str
    evidence: dict = field(default_factory=dict)
    fix: Fix = Fix()

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class ModelReport:
    """One model's findings, with what was measured on the way (the reply, the counts)."""

    model: str
    path: str
    findings: list[Finding] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # chat format, stop ids, sample counts, the reply …
    seconds: float = 0.0
    skipped: dict[str, str] = field(default_factory=dict)  # category of check → why it did not run

    def skip(self, categories: tuple[str, ...], why: str) -> None:
        for category in categories:
            self.skipped.setdefault(category, why)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def count(self, severity: str) -> int:
        return sum(f.severity == severity for f in self.findings)

    def failed(self, strict: bool) -> bool:
        return self.count(ERROR) > 0 or (strict and self.count(WARNING) > 0)

    def to_json(self, strict: bool) -> dict:
        return {"model": self.model, "path": self.path, "ok": not self.failed(strict),
                "counts": {s: self.count(s) for s in SEVERITIES}, "seconds": round(self.seconds, 3),
                "facts": self.facts, "findings": [f.to_json() for f in self.findings], "skipped": self.skipped}


def exit_code(reports: list[ModelReport], strict: bool) -> int:
    """1 with any error (any warning too under ``--strict``), else 0: notes never fail a check."""
    return 1 if any(r.failed(strict) for r in reports) else 0


def as_json(reports: list[ModelReport], strict: bool) -> dict:
    return {"schema": SCHEMA, "ok": exit_code(reports, strict) == 0, "strict": strict,
            "models": [r.to_json(strict) for r in reports]}
