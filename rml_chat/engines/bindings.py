"""llama-cpp-python's ctypes bindings, imported early and alone, and llama.cpp's log taken over.

llama-cpp-python gives us its build of llama.cpp and its ctypes bindings (``llama_cpp.llama_cpp``).
``import llama_cpp`` runs the package's ``__init__``, which imports ``Llama`` with numpy, jinja2 and its chat
formats before a weight can load. ``bindings()`` imports the bindings alone (the difference is measured
in docs/performance.md); the package completes itself the first time anything asks it for another name
(``from llama_cpp import Llama`` still works). A package that is missing or whose library does not load
is one line with its cure (a ModelError), not a traceback.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import sys
import threading
from collections.abc import Iterator
from types import ModuleType

from ..errors import ModelError
from ..terminal import visible

_COMPLETING = threading.Lock()

NOT_INSTALLED = "llama-cpp-python, which runs the model, is not installed: pip install llama-cpp-python"
NOT_LOADED = ("llama-cpp-python's llama.cpp library could not be loaded ({why}): reinstall it: "
              "pip install --force-reinstall --no-cache-dir llama-cpp-python")


def bindings() -> ModuleType:
    """llama-cpp-python's ctypes bindings, imported without the rest of the package (see above); a
    ModelError, one line with its cure, where the package is missing (installed with ``--no-deps``, or
    removed) or its library does not load (a build for another machine, a library it needs gone)."""
    try:
        return _bindings()
    except ImportError as err:
        if isinstance(err, ModuleNotFoundError) and err.name == "llama_cpp":
            raise ModelError(NOT_INSTALLED) from err
        raise ModelError(NOT_LOADED.format(why=err)) from err
    except (OSError, RuntimeError) as err:  # llama_cpp's loader: FileNotFoundError, or RuntimeError("Failed to load …")
        raise ModelError(NOT_LOADED.format(why=err)) from err


def _bindings() -> ModuleType:
    loaded = sys.modules.get("llama_cpp.llama_cpp")
    if loaded is not None:
        return loaded
    if "llama_cpp" in sys.modules:
        return importlib.import_module("llama_cpp.llama_cpp")
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError("No module named 'llama_cpp'", name="llama_cpp")
    package = importlib.util.module_from_spec(spec)  # the package, its __init__ not run yet
    sys.modules["llama_cpp"] = package

    def complete(name: str) -> object:  # PEP 562: the first other name asked for runs the real __init__
        with _COMPLETING:
            if package.__dict__.get("__getattr__") is complete:
                del package.__getattr__
                spec.loader.exec_module(package)  # type: ignore[union-attr]
                if _LOG:  # its logger installed its own callback on import: ours again
                    _LOG[0].install()
        return getattr(package, name)

    try:
        lib = importlib.import_module("llama_cpp.llama_cpp")
    except BaseException:
        del sys.modules["llama_cpp"]
        raise
    package.__dict__.update({name: getattr(lib, name) for name in dir(lib) if not name.startswith("_")})
    package.__getattr__ = complete  # type: ignore[attr-defined]
    return lib


class LlamaLog:
    """llama.cpp's log, taken over from llama-cpp-python's callback: its warnings and errors are kept (a
    failed load shows them), and everything is printed only with --verbose. (Printing the whole log of a
    load, as llama-cpp-python does when verbose, is a large part of its load time: docs/performance.md.)"""

    _LEVEL_WARN, _LEVEL_ERROR, _LEVEL_CONT = 3, 4, 5  # ggml_log_level (llama-cpp-python's own map is older)

    def __init__(self, lib: ModuleType) -> None:
        self._lib = lib
        self.verbose = False
        self.kept: list[str] = []
        self.listening: list[list[str]] = []  # (``caught``: the warnings and errors of a call, as it runs)
        self.flash_attention: bool | None = None  # what -fa auto resolved to for the last context made
        self._last = 0

        @lib.llama_log_callback
        def callback(level: int, text: bytes, user_data: object) -> None:
            level = self._last if level == self._LEVEL_CONT else level
            self._last = level
            line = text.decode("utf-8", "replace")
            if level in (self._LEVEL_WARN, self._LEVEL_ERROR):
                if len(self.kept) < 200:
                    self.kept.append(line)
                for lines in self.listening:
                    lines.append(line)
            if ": Flash Attention " in line:  # "llama_context: Flash Attention enabled" (or "not supported, …")
                self.flash_attention = line.rstrip().endswith(" enabled")
            if self.verbose:
                print(visible(line), end="", file=sys.stderr, flush=True)

        self._callback = callback  # kept alive: llama.cpp holds only its address
        self.install()

    def install(self) -> None:
        self._lib.llama_log_set(self._callback, ctypes.c_void_p(0))

    @contextlib.contextmanager
    def caught(self) -> Iterator[list[str]]:
        """llama.cpp's warnings and errors while the block runs (a call's own reasons, which it gives only
        to the log), as a list that fills as they come."""
        lines: list[str] = []
        self.listening.append(lines)
        try:
            yield lines
        finally:
            self.listening.remove(lines)

    def failure_reason(self) -> str:
        """llama.cpp's own words for a failed load: its first error lines."""
        lines = [line.strip().split(": ", 1)[-1] for line in self.kept
                 if "error" in line.lower() or "failed" in line.lower()]
        return "; ".join(dict.fromkeys(lines[:2])) if lines else ""


_LOG: list[LlamaLog] = []
_BACKEND: list[bool] = []


def llama_log() -> LlamaLog:
    if not _LOG:
        _LOG.append(LlamaLog(bindings()))
    return _LOG[0]


def backend() -> ModuleType:
    """The bindings, with llama.cpp's backend initialised (once)."""
    lib = bindings()
    if not _BACKEND:
        lib.llama_backend_init()
        _BACKEND.append(True)
    return lib



def llama_version() -> str:
    """The llama.cpp build's version, or "unknown" (a broken llama_cpp install still lets --version answer)."""
    try:
        lib = bindings()
        return lib.llama_version().decode() if hasattr(lib, "llama_version") else "unknown"
    except Exception:
        return "unknown"
