"""The reference path stands alone: a copy of the tree with ``tokenizer/accel`` deleted loads every vocabulary
to the same ids (only slower), and passes the offline tier."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, VOCABS, corpus, model_path, ours
from make_hf_test_files import NAMES as HF_NAMES
from make_hf_test_files import out_dir as hf_dir

#: every vocabulary the suite holds, by the path tokenizer.load takes
SOURCES = {**{name: model_path(name) for name in [*VOCABS, "smollm2", "gemma3"]},
           **{f"hf/{name}": hf_dir() / name / "tokenizer.json" for name in HF_NAMES}}

_DIGESTS = """
import hashlib, json, sys, tokenizer
texts = json.loads(sys.stdin.read())
for name, path in json.loads(sys.argv[1]).items():
    tok = tokenizer.load(path)
    h = hashlib.sha256()
    for text in texts:
        h.update(repr((tok.encode(text), tok.encode(text, add_special=True, parse_special=True))).encode())
    print(name, h.hexdigest(), flush=True)
"""


@pytest.fixture(scope="module")
def bare_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project without tokenizer/accel, its tests, or any build output."""
    tree = tmp_path_factory.mktemp("no-accel")
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info", ".pytest_cache")
    for part in ("tokenizer", "rml_chat", "tests", "fixtures", "scripts", "docs"):
        shutil.copytree(ROOT / part, tree / part, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tree)
    shutil.rmtree(tree / "tokenizer" / "accel")
    for accel_test in (tree / "tests").glob("test_accel_*.py"):  # the accelerator's own tests go with it
        accel_test.unlink()
    return tree


#: the editable install's finder maps every package of this checkout, tokenizer.accel too: a tree whose
#: accel/ is deleted must not find it there (as a checkout with accel/ deleted would not)
_ALONE = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
          "if 'Editable' not in getattr(f, '__name__', type(f).__name__)]\n")


def _run(tree: Path, code: str, args: list[str] = (), stdin: str = "", timeout: int = 900,
         **env_vars: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "RML_CHAT_TOKENIZER_CACHE": "off", **env_vars}
    return subprocess.run([sys.executable, "-c", _ALONE + code, *args], cwd=tree, env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def _digest(tok, texts: list[str]) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(repr((tok.encode(text), tok.encode(text, add_special=True, parse_special=True))).encode())
    return h.hexdigest()


def test_the_copy_imports_its_own_tokenizer_and_no_accelerator(bare_tree: Path) -> None:
    probe = _run(bare_tree, "import importlib.util, tokenizer; from tokenizer.speedups import installed, REFERENCE;"
                            "print(tokenizer.__file__, importlib.util.find_spec('tokenizer.accel'), installed() is REFERENCE)")
    assert probe.returncode == 0, probe.stderr
    path, spec, reference = probe.stdout.split()
    assert path.startswith(str(bare_tree)) and spec == "None" and reference == "True"


def test_without_the_accelerator_every_vocabulary_gives_the_same_ids(bare_tree: Path) -> None:
    texts = corpus()[:60] + ["<|im_start|>user\nHi<|im_end|>", "<start_of_turn>model\n<eos>", "  \n\n\t 👋🏽 ünï"]
    done = _run(bare_tree, _DIGESTS, [json.dumps({k: str(v) for k, v in SOURCES.items()})], json.dumps(texts))
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = dict(line.split() for line in done.stdout.splitlines())
    mine = {}
    for name, path in SOURCES.items():
        import tokenizer

        mine[name] = _digest(ours(name) if name in (*VOCABS, "smollm2", "gemma3") else tokenizer.load(path), texts)
    assert theirs == mine


def test_without_the_accelerator_the_offline_tier_passes_and_downloads_nothing(bare_tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "empty-cache"  # the offline tier never fetches, whatever the marker expression
    done = _run(bare_tree, "import pytest; sys.exit(pytest.main(sys.argv[1:]))",
                ["-q", "-o", "addopts=", "-p", "no:cacheprovider", "-m", "offline and not accel", "tests"],
                RML_CHAT_CACHE=str(cache))
    assert not cache.exists() or not any(cache.rglob("*")), sorted(cache.rglob("*"))[:5]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    passed = re.search(r"^(\d+) passed", done.stdout.splitlines()[-1])
    assert passed and int(passed.group(1)) >= 100 and "failed" not in done.stdout.splitlines()[-1], done.stdout[-500:]
