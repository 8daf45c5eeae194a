"""Where rml-chat keeps what it builds once and reads back later (tokenizer tables, chat formats, test data).

``$RML_CHAT_CACHE``, else ``$XDG_CACHE_HOME/rml-chat``, else ``~/.cache/rml-chat``; each kind of entry has a
folder of its own there, which its own variable can move or turn ``off``.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path


def cache_dir() -> Path:
    """``$RML_CHAT_CACHE``, else ``$XDG_CACHE_HOME/rml-chat``, else ``~/.cache/rml-chat``."""
    if os.environ.get("RML_CHAT_CACHE"):
        return Path(os.path.expanduser(os.environ["RML_CHAT_CACHE"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rml-chat"


def cache_folder(variable: str, default: str) -> Path | None:
    """``$variable`` (a folder, or ``off``), else ``cache_dir() / default``; None when turned off."""
    setting = os.environ.get(variable, "")
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    return Path(os.path.expanduser(setting)) if setting else cache_dir() / default  # (~name of no user: as typed)


@cache
def source_hash(package: Path) -> str:
    """Hash of a package's Python sources, subpackages included: a new version of the code never reads an
    entry an old one wrote."""
    digest = hashlib.sha1()
    for source in sorted(package.rglob("*.py")):
        digest.update(str(source.relative_to(package)).encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()
