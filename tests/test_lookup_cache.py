"""llama.cpp's lookup cache files (``-lcs``, ``-lcd``) for ``--spec-type ngram-cache``: read as llama.cpp's
loader reads them, refused in one line where they are not such files, and drafted from as llama-server
drafts from the files llama.cpp's own ``llama-lookup-create`` and ``llama-lookup`` make."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import model_path
from test_speculative import PROMPTS, SAMPLINGS, _as_on_server, _ids, _run

from rml_chat.engines.lookup_cache import LookupCache, LookupCacheError
from rml_chat.engines.ngram_drafts import NgramCache
from rml_chat.engines.speculative import Speculation


def _cache_file(path: Path, records: list[tuple[tuple[int, ...], list[tuple[int, int]]]]) -> Path:
    """``records`` in llama.cpp's layout (``common_ngram_cache_save``): the n-gram padded with -1 to four
    tokens, how many followers, then each follower and its count; int32s, little-endian."""
    numbers: list[int] = []
    for ngram, followers in records:
        numbers += [*ngram, *(-1,) * (4 - len(ngram)), len(followers), *(n for pair in followers for n in pair)]
    path.write_bytes(np.array(numbers, dtype="<i4").tobytes())
    return path


# ----- the files -----------------------------------------------------------------------------------------

@pytest.mark.offline
def test_a_file_is_read_as_llama_cpp_reads_it(tmp_path) -> None:
    """Every n-gram size; an n-gram recorded twice keeps its first record, and a token listed twice in a
    record its first count (llama.cpp reads both with ``emplace``); followers stay in the file's order."""
    cache = LookupCache.read(_cache_file(tmp_path / "c.bin", [
        ((7,), [(8, 2)]), ((5, 6), [(9, 1), (7, 3), (9, 4)]), ((1, 2, 3, 4), [(5, 1)]), ((5, 6), [(1, 1)])]))
    assert len(cache) == 3
    assert cache.followers((5, 6)) == {9: 1, 7: 3} and list(cache.followers((5, 6))) == [9, 7]
    assert cache.followers((7,)) == {8: 2} and cache.followers((1, 2, 3, 4)) == {5: 1}
    assert cache.followers((6,)) is None and cache.followers((7, 8)) is None and cache.followers((2, 3, 4)) is None
    assert cache.largest_token == 9
    assert len(LookupCache.read(_cache_file(tmp_path / "empty.bin", []))) == 0


@pytest.mark.offline
@pytest.mark.parametrize(("numbers", "said"), [
    ([5, 6, -1], "the file ends inside a record's n-gram (int32 0)"),
    ([5, 6, -1, -1, 0], "a record says 0 tokens followed its n-gram (int32 4)"),
    ([5, 6, -1, -1, 2, 7, 3, 8], "the file ends inside a record's 2 followers (int32 0)"),
    ([5, 6, -1, -1, 1, 7, 0], "a follower's count is below 1"),
    ([5, 6, -1, -1, 1, -4, 1], "a follower's token id is below 0"),
    ([5, -9, -1, -1, 1, 7, 1], "an n-gram holds a token id below -1"),
    ([5, 6, -1, -1, 1, 7, 1, 5, 6, -1, -1, 1_000_000_000, 1, 1], "the file ends inside a record's 1000000000 followers"),
])
def test_a_file_that_is_not_a_lookup_cache_is_refused_saying_where(tmp_path, numbers: list[int], said: str) -> None:
    path = tmp_path / "bad.bin"
    path.write_bytes(np.array(numbers, dtype="<i4").tobytes())
    with pytest.raises(LookupCacheError) as caught:
        LookupCache.read(path)
    assert str(caught.value).startswith(said)
    path.write_bytes(b"GGUG\x03")
    with pytest.raises(LookupCacheError, match="5 bytes is not a whole number of int32s"):
        LookupCache.read(path)


@pytest.mark.offline
def test_a_model_or_a_device_given_by_mistake_is_refused_before_it_is_read(tmp_path) -> None:
    """A GGUF (many gigabytes, for a real model) at its magic; a device that never ends, or a pipe, as no
    regular file; neither is read whole."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(4_000_001))
    with pytest.raises(LookupCacheError, match=r"it is a GGUF file \(a model's\)"):
        LookupCache.read(model)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # (opened, it would wait for a writer for ever)
    for device in ("/dev/zero", "/dev/urandom", fifo):
        with pytest.raises(LookupCacheError, match="not a regular file"):
            LookupCache.read(device)


# ----- the drafts ----------------------------------------------------------------------------------------

@pytest.mark.offline
def test_ngram_cache_asks_the_chat_then_the_dynamic_file_then_the_static_one(tmp_path) -> None:
    """llama.cpp's ``common_ngram_cache_draft``: the chat's own n-grams with its lax thresholds, then the
    dynamic file's with its strict ones (a 1-gram seen 4 times, 75 %), then the static file's 2-grams."""
    static = LookupCache.read(_cache_file(tmp_path / "s.bin", [((5, 6), [(7, 2)]), ((6, 7), [(8, 3), (2, 1)]),
                                                                ((7, 8), [(9, 1)])]))
    assert NgramCache(static=static).draft([1, 5], 6) == [7, 8]  # ((7, 8) was seen once: too few)
    assert NgramCache().draft([1, 5], 6) == []
    seen_three = LookupCache.read(_cache_file(tmp_path / "d3.bin", [((6,), [(4, 3)])]))
    seen_four = LookupCache.read(_cache_file(tmp_path / "d4.bin", [((6,), [(4, 4)]), ((6, 4), [(3, 3), (2, 1)])]))
    assert NgramCache(dynamic=seen_three).draft([1, 5], 6) == []  # (3 times: the chat's own would do)
    assert NgramCache(dynamic=seen_four).draft([1, 5], 6) == [4, 3]  # ((6, 4): 3 times, 75 %)
    assert NgramCache(dynamic=seen_four, static=static).draft([1, 5], 6) == [4, 3]  # (the dynamic file first)
    chat = [6, 4, 2, 9, 6, 4, 2, 9, 0]  # (after 6, 4: the chat's 2, twice, not the dynamic file's 3)
    assert NgramCache(dynamic=seen_four).draft(chat, 6) == NgramCache().draft(chat, 6) == [4, 2, 9, 0, 6, 4, 2, 9]


@pytest.mark.offline
def test_the_static_file_weighs_the_chats_choice_as_llama_cpp_does(tmp_path) -> None:
    """A follower the static file has seen after the last two tokens counts a hundred times its static
    count: after 6, the chat's 7 (twice) loses to 8 (once), which then falls short of the 66 % a 1-gram
    needs, so the chat drafts nothing there and the static file's own choice, 3, is the draft."""
    history = [6, 7, 0, 6, 7, 1, 6, 8, 5]
    assert NgramCache().draft(history, 6)[0] == 7
    static = LookupCache.read(_cache_file(tmp_path / "s.bin", [((5, 6), [(8, 1), (3, 2)])]))
    assert NgramCache(static=static).draft(history, 6) == [3]


# ----- against llama.cpp ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lookup_files(smollm, tmp_path_factory) -> tuple[Path, Path]:
    """Files made by llama.cpp's own tools over SmolLM2's greedy replies to two prompts: a static cache by
    ``llama-lookup-create`` (the 2-grams of the story's reply, twice over, so each is seen often enough),
    and a dynamic one saved by ``llama-lookup`` (the 1- to 4-grams of the days' reply three times over,
    its prompt, and 8 tokens it wrote)."""
    import cluster  # (scripts/, on the path: conftest puts it there)

    model, engine = smollm
    days, story = (model.tokenizer.decode(_run(model, engine, _ids(model, prompt), SAMPLINGS["greedy"], Speculation())[0])
                   for prompt in PROMPTS[1:3])
    cluster.build()
    folder = tmp_path_factory.mktemp("lookup")
    static, dynamic = folder / "static.bin", folder / "dynamic.bin"
    weights = str(model_path("smollm2"))
    for command in ([str(cluster.binary("llama-lookup-create")), "-m", weights, "-p", story * 2, "-lcs", str(static)],
                    [str(cluster.binary("llama-lookup")), "-m", weights, "-p", days * 3, "-n", "8", "--temp", "0",
                     "-c", "2048", "-lcd", str(dynamic)]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    return static, dynamic


@pytest.mark.server
def test_ngram_cache_drafts_from_llamas_own_files_what_llama_server_does(smollm, lookup_files) -> None:
    """llama-server with ``--spec-type ngram-cache -lcs -lcd`` over the same files, model and prompt ids,
    greedy: the same tokens, and as many tokens drafted and accepted. Each file drafts tokens that the
    chat's own n-grams don't, and the model takes them: the dynamic one in the days' reply, the static one
    in the story's."""
    model, engine = smollm
    static, dynamic = (LookupCache.read(path) for path in lookup_files)
    with_files = Speculation("ngram-cache", draft_fit=False, lookup_cache_static=static, lookup_cache_dynamic=dynamic)
    for prompt, one_file in zip(PROMPTS[1:3], (replace(with_files, lookup_cache_static=None),
                                               replace(with_files, lookup_cache_dynamic=None))):
        ids = _ids(model, prompt)
        _, alone, _ = _run(model, engine, ids, SAMPLINGS["greedy"], Speculation("ngram-cache", draft_fit=False))
        _, from_one, _ = _run(model, engine, ids, SAMPLINGS["greedy"], one_file)
        assert from_one.accepted - alone.accepted > 10, prompt
        _as_on_server(model, engine, ids, with_files, ["--spec-type", "ngram-cache", "-lcs", str(lookup_files[0]),
                                                      "-lcd", str(lookup_files[1])])


# ----- the flags -----------------------------------------------------------------------------------------

def _ask(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rml_chat", "-p", "List the days of the week.", "--temp", "0",
                           "-n", "40", "-fa", "off", "--prompt-cache", "off", "--json", *flags],
                          capture_output=True, text=True, timeout=300)


def test_lcs_and_lcd_are_read_and_reported_and_a_bad_file_is_one_line(tmp_path) -> None:
    good = _cache_file(tmp_path / "good.bin", [((28, 29), [(30, 2)]), ((30,), [(31, 1)])])  # (ids of SmolLM2's)
    done = _ask("--spec-type", "ngram-cache", "-lcs", str(good), "-lcd", str(good))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["speculative"]["type"] == \
        f"ngram-cache (static {good} (2 n-grams); dynamic {good} (2 n-grams))"
    noted = _ask("--spec-type", "ngram-mod", "-lcs", str(good))
    assert noted.returncode == 0 and "note: -lcs and -lcd draft only with --spec-type ngram-cache" in noted.stderr
    other_model = _cache_file(tmp_path / "other.bin", [((28, 29), [(151_000, 2)])])
    for flags, said in ((["-lcs", str(tmp_path / "missing.bin")], f"-lcs {tmp_path / 'missing.bin'}: No such file"),
                        (["-lcd", str(model_path("smollm2"))], "not a llama.cpp lookup cache: it is a GGUF file"),
                        (["-lcs", str(other_model)], "token id 151000 is past")):
        done = _ask("--spec-type", "ngram-cache", *flags)
        assert done.returncode == 1, done.stderr
        line = done.stderr.strip()
        assert "\n" not in line and "Traceback" not in line and said in line, line
        assert json.loads(done.stdout)["ok"] is False


def test_spec_type_given_again_adds_its_types_as_llama_cpp() -> None:
    """llama.cpp adds each ``--spec-type``'s types to the ones before, and to ``--spec-default``'s
    ngram-mod; a value with "none" in it adds none."""
    from rml_chat.frontends.flags import build_parser
    from rml_chat.frontends.launch import speculation_of

    parser = build_parser()

    def types(*argv: str) -> tuple[str, ...]:
        return speculation_of(parser.parse_args(list(argv))).types

    assert types("--spec-type", "ngram-mod", "--spec-type", "ngram-cache") == ("ngram-mod", "ngram-cache")
    assert types("--spec-type", "ngram-cache", "--spec-type", "none") == ("ngram-cache",)
    assert types("--spec-type", "ngram-cache,none") == ()
    assert types("--spec-default", "--spec-type", "ngram-simple") == ("ngram-simple", "ngram-mod")
    assert types("--spec-default") == ("ngram-mod",) and types() == ()
    done = _ask("--spec-type", "ngram-simple", "--spec-type", "ngram-mod", "--spec-ngram-mod-n-min", "4")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["speculative"]["type"] == \
        "ngram-simple (size_n=12, size_m=48), then ngram-mod (n_match=24, n_min=4, n_max=64)"
