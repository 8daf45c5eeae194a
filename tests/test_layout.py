"""The architecture as a test: which module may import what, the engine seam, docs/design.md's module table."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.offline

#: the rooms of rml_chat and what each may import of rml_chat (besides itself); tokenizer: who may use it
ROOMS = {
    "engines": {"rml_chat.errors", "rml_chat.terminal"},
    "core": {"rml_chat.engines.base", "rml_chat.engines.runtime", "rml_chat.engines.sampler_chain", "rml_chat.errors",
             "rml_chat.text_input", "rml_chat.words"},
    "frontends": {"rml_chat"},
    "tools": {"rml_chat.core", "rml_chat.engines.base", "rml_chat.engines.runtime", "rml_chat.errors"},
    "models": {"rml_chat.core.paths", "rml_chat.errors", "rml_chat.terminal"},
    "doctor": {"rml_chat.core", "rml_chat.engines.base", "rml_chat.engines.bindings", "rml_chat.engines.runtime",
               "rml_chat.engines.llama_vocab", "rml_chat.errors", "rml_chat.words"},
}


def modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[str]:
    """Every module ``path`` imports, anywhere in it (a lazy import inside a function too), absolute."""
    package = dotted(path) if path.name == "__init__.py" else dotted(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            found.append(module)
            found += [f"{module}.{alias.name}" for alias in node.names]  # "from . import words"
    return found


def test_only_the_engines_runtime_imports_llama_cpp() -> None:
    offenders = {dotted(p): name for p in modules("rml_chat", "tokenizer") for name in imports(p)
                 if name.split(".")[0] == "llama_cpp" and dotted(p) != "rml_chat.engines.runtime"}
    assert offenders == {}
    assert "llama_cpp.llama_grammar" in imports(ROOT / "rml_chat" / "engines" / "runtime.py")  # the check sees it


def test_each_room_imports_only_what_its_init_allows() -> None:
    for room, allowed in ROOMS.items():
        for path in modules(f"rml_chat/{room}"):
            own = f"rml_chat.{room}"
            for name in imports(path):
                if not name.startswith("rml_chat") or name.startswith(own) or name in ("rml_chat",):
                    continue
                assert any(name == a or name.startswith(a + ".") for a in allowed), (dotted(path), name)
    engine_files = modules("rml_chat/engines")
    assert not any(name.startswith("tokenizer") for p in engine_files for name in imports(p))


def test_each_room_says_what_it_holds_and_may_import() -> None:
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((ROOT / "rml_chat" / room / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "May import" in doc, room


def test_no_front_end_or_core_module_asks_which_engine_it_holds() -> None:
    for path in modules("rml_chat"):
        if dotted(path).startswith("rml_chat.engines"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not any(isinstance(n, ast.Attribute) and n.attr == "remote" for n in ast.walk(tree)), dotted(path)
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for alias in n.names}
        if dotted(path) != "rml_chat.frontends.launch":  # the one place that makes an engine
            assert not named & {"LocalEngine", "ServerEngine"}, dotted(path)


def test_both_engines_implement_the_protocol_with_its_signatures() -> None:
    from rml_chat.engines.base import Engine
    from rml_chat.engines.local import LocalEngine
    from rml_chat.engines.server import ServerEngine

    wanted = {name: inspect.signature(member) for name, member in vars(Engine).items()
              if callable(member) and not name.startswith("_")}
    assert {"generate", "cached_ids", "reset", "shift", "save_state", "load_state", "grammar_problem",
            "reference_tokenize", "check_vocabulary", "close"} <= set(wanted)
    for engine in (LocalEngine, ServerEngine):
        for name, signature in wanted.items():
            assert list(inspect.signature(getattr(engine, name)).parameters) == list(signature.parameters), \
                (engine.__name__, name)


def test_design_md_lists_every_module_and_only_those() -> None:
    table = (ROOT / "docs" / "design.md").read_text(encoding="utf-8").split("\n## Modules\n", 1)[1]
    listed = set(re.findall(r"^\| `([\w/.]+\.py)` \|", table, flags=re.M))
    present = {str(p.relative_to(ROOT)) for p in modules("tokenizer", "rml_chat")}
    if not (ROOT / "tokenizer" / "accel").is_dir():  # a tree without the accelerator (test_reference_alone.py)
        listed = {m for m in listed if not m.startswith("tokenizer/accel/")}
    assert sorted(present - listed) == [] and sorted(listed - present) == []


WHITE_BOX_MARKS = {"whitebox", "accel", "stages"}
_NOT_OURS = {"sys", "os", "fetch", "monkeypatch", "self", "cls"}


def _private_reads(node: ast.AST) -> list[str]:
    """Private names of the code under test read inside ``node``: ``obj._name`` and ``from ours import _name``."""
    found = []
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and re.match(r"_[a-zA-Z]", n.attr) and not (
                isinstance(n.value, ast.Name) and n.value.id in _NOT_OURS):
            found.append(n.attr)
        elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in ("tokenizer", "rml_chat"):
            found += [a.name for a in n.names if a.name.startswith("_")]
    return found


def _marks(decorators: list[ast.expr]) -> set[str]:
    return {n.attr for d in decorators for n in ast.walk(d) if isinstance(n, ast.Attribute)} & WHITE_BOX_MARKS


def test_white_box_tests_are_marked() -> None:
    """A test that reads private names is marked whitebox (or accel, stages): it may change with the insides."""
    unmarked = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_marks = {n.attr for stmt in tree.body if isinstance(stmt, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets)
                        for n in ast.walk(stmt.value) if isinstance(n, ast.Attribute)} & WHITE_BOX_MARKS
        functions = [stmt for stmt in tree.body if isinstance(stmt, ast.FunctionDef)]
        helpers = {f.name: _private_reads(f) for f in functions if not f.name.startswith("test_") and _private_reads(f)}
        for test in (f for f in functions if f.name.startswith("test_")):
            called = {n.func.id for n in ast.walk(test) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            reads = _private_reads(test) + [name for helper in called & set(helpers) for name in helpers[helper]]
            if reads and not module_marks and not _marks(test.decorator_list):
                unmarked.append(f"{path.name}::{test.name} ({', '.join(sorted(set(reads)))})")
    assert unmarked == [], "\n".join(unmarked)


def test_no_two_modules_of_the_app_import_each_other() -> None:
    graph = {dotted(p): {name for name in imports(p) if name.startswith("rml_chat.")} for p in modules("rml_chat")}
    pairs = sorted({tuple(sorted((a, b))) for a, names in graph.items() for b in names
                    if b in graph and a in graph[b] and a != b})
    assert pairs == []


def test_an_install_ships_every_module(tmp_path) -> None:
    """``pip install .`` (not editable) ships every package: a list of them by hand once left out
    rml_chat.tools and rml_chat.doctor, which an editable install hid. setuptools' own build_py, the step
    that fills a wheel with the packages, copies them here."""
    tree, built = tmp_path / "tree", tmp_path / "built"  # a clean copy: an editable install's egg-info lists all
    skip = shutil.ignore_patterns("*.egg-info", "__pycache__", "build", "*.so")
    for part in ("tokenizer", "rml_chat"):
        shutil.copytree(ROOT / part, tree / part, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    (tree / "README.md").write_text("# rml-chat\n")  # (pyproject names it; setup.py only adds the C loops)
    subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py", "-d", str(built)],
                   cwd=tree, check=True, capture_output=True, timeout=300)
    shipped = {str(p.relative_to(built)) for p in built.rglob("*.py")}
    present = {str(p.relative_to(ROOT)) for p in modules("tokenizer", "rml_chat")}
    assert len(present) > 50 and sorted(present - shipped) == []


def _writes_to_messages(path: Path) -> list[int]:
    """The lines of ``path`` that change a ``messages`` or ``branches`` list in place (a call of a list
    method that changes it, an item or slice assigned, ``+=``)."""
    changing = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in changing:
            target = node.func.value
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t.value for t in targets if isinstance(t, ast.Subscript)), None)
            if target is None and isinstance(node, ast.AugAssign):
                target = node.target
        if isinstance(target, ast.Attribute) and target.attr in ("messages", "branches"):
            found.append(node.lineno)
    return found


def test_the_conversation_is_the_only_writer_of_its_messages() -> None:
    """Everyone else reads a conversation's messages and changes them through its methods (a ``Message`` is
    frozen besides), so no module but conversation.py changes the lists in place."""
    writers = {dotted(p): lines for p in modules("rml_chat") if (lines := _writes_to_messages(p))}
    assert set(writers) == {"rml_chat.core.conversation"}, writers
    sample = ROOT / "tests" / "layout_sample.py"
    sample.write_text("def f(c):\n    c.messages.append(1)\n    c.conversation.messages[-1] = 2\n    c.branches += []\n")
    try:
        assert sorted(_writes_to_messages(sample)) == [2, 3, 4]  # (the check sees each kind)
    finally:
        sample.unlink()
