"""The thread count on a busy machine (engines/thread_choice.py): the cores other processes leave free.

The counters are read from a made-up ``/proc`` where the arithmetic is checked, and from the real one under a
load the test makes itself (busy processes it starts and ends): the automatic count keeps generation near the
best fixed count's pace, where every core collapsed, and never changes a reply.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import busy_machine, model_path

from rml_chat.engines.thread_choice import CpuTimes, ThreadChoice, cores_taken, read_cpu_times

ROOT = Path(__file__).resolve().parent.parent


def _proc(tmp_path: Path, cpu_lines: list[str], own_utime: int, own_stime: int, name: str = "python3") -> str:
    (tmp_path / "self").mkdir(exist_ok=True)
    (tmp_path / "stat").write_text("cpu  1 2 3 4 5 6 7 8 9 10\n" + "".join(line + "\n" for line in cpu_lines)
                                   + "intr 12345\nctxt 999\n")
    fields = ["S", "1", "1", "1", "0", "-1", "4194304", "10", "0", "0", "0", str(own_utime), str(own_stime)]
    (tmp_path / "self" / "stat").write_text(f"4242 ({name}) " + " ".join(fields + ["0"] * 30) + "\n")
    return str(tmp_path)


def test_busy_time_is_read_per_cpu_of_this_process_and_its_own_time_apart(tmp_path) -> None:
    """user, system, irq, softirq and steal are busy; idle and iowait are not, nor niced time unless the
    chat is niced itself; only the CPUs named count; the process's name may hold spaces and parentheses."""
    tick = os.sysconf("SC_CLK_TCK")
    proc = _proc(tmp_path, ["cpu0 100 50 30 900 20 5 5 10 0 0", "cpu1 7 0 3 990 0 0 0 0 0 0",
                            "cpu2 1000 0 0 0 0 0 0 0 0 0"], own_utime=40, own_stime=2, name="a (b) c")
    reading = read_cpu_times([0, 1], proc, count_nice=False)
    assert reading is not None
    assert reading.busy == pytest.approx((100 + 30 + 5 + 5 + 10 + 7 + 3) / tick)
    assert reading.ours == pytest.approx(42 / tick)
    niced = read_cpu_times([0, 1], proc, count_nice=True)  # (a niced chat: its own time is niced time)
    assert niced is not None and niced.busy == pytest.approx(reading.busy + 50 / tick)
    assert read_cpu_times([0], str(tmp_path / "nowhere")) is None


def test_the_cores_others_take_are_the_busy_time_less_ours_over_the_window() -> None:
    """The module's worked example: 0.84 s busy of two cores' 1.0 s in half a second, 0.50 s of it ours."""
    before, after = CpuTimes(busy=10.0, ours=3.0, at=100.0), CpuTimes(busy=10.84, ours=3.5, at=100.5)
    assert cores_taken(before, after) == pytest.approx(0.68)
    assert cores_taken(after, after) == 0.0
    assert cores_taken(before, CpuTimes(busy=10.2, ours=3.5, at=100.5)) == 0.0  # never below nothing


def _readings(*taken: float):
    """A reader whose k-th reading comes a second after the one before, others having taken ``taken[k-1]``
    cores meanwhile and this process one."""
    seen: list[CpuTimes] = []

    def read(_cpus) -> CpuTimes:
        last = seen[-1] if seen else CpuTimes(0.0, 0.0, 0.0)
        seen.append(CpuTimes(last.busy + taken[len(seen) - 1] + 1, last.ours + 1, last.at + 1) if seen else last)
        return seen[-1]

    return read


def test_the_automatic_count_follows_a_load_that_comes_and_goes() -> None:
    choice = ThreadChoice(None, cpus=list(range(4)), read=_readings(0.0, 0.68, 2.4, 9.0, 0.3), clock=lambda: 1e9)
    assert choice.auto and choice.current == 4
    assert [choice.now() for _ in range(5)] == [4, 3, 2, 1, 4]
    soon = ThreadChoice(None, cpus=list(range(4)), read=_readings(3.0), clock=lambda: 0.2)
    assert soon.now() == 4 and soon.now(window=0.1) == 1  # read only once the window has passed
    assert choice.describe() == "auto: 4 of 4 cores (others use 0.3)"


def test_a_fixed_count_or_no_counters_means_no_reading() -> None:
    def never(_cpus):
        raise AssertionError("read")

    fixed = ThreadChoice(3, cpus=[0, 1], read=never)
    assert (fixed.auto, fixed.now(), fixed.describe()) == (False, 3, "3")
    blind = ThreadChoice(None, cpus=[0, 1, 2], read=lambda cpus: None)
    assert (blind.auto, blind.now(), blind.describe()) == (False, 3, "3")


def _run(*flags: str, tokens: int = 96) -> dict:
    done = subprocess.run([sys.executable, "-m", "rml_chat", str(model_path("smollm2")), "-p",
                           "Write a long story about a cat.", "-n", str(tokens), "--temp", "0", "--json",
                           "--ignore-eos", "on", "--repeat-guard", "0", *flags],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_core_taken_by_another_process_costs_about_its_share_not_the_whole_speed() -> None:
    """One busy process: the automatic count keeps at least 0.75x the pace of the best fixed count (one
    thread, or one fewer than the cores), measured alternately in one run; every core's count is what
    collapses, and the replies are the same ids whatever the count."""
    cores = len(os.sched_getaffinity(0))
    fixed = sorted({1, max(1, cores - 1)})
    speeds: dict[str, list[float]] = {"auto": [], **{str(n): [] for n in fixed}}
    replies = set()
    with busy_machine(1):
        for _ in range(2):
            for name in speeds:
                report = _run(*(() if name == "auto" else ("-t", name)))
                speeds[name].append(report["timings"]["tokens_per_s"])
                replies.add(report["reply"])
                if name == "auto":
                    assert report["threads"]["chosen"] == "auto"
                    assert report["threads"]["generation"] <= cores - 1, report["threads"]
    best_fixed = max(sum(speeds[str(n)]) for n in fixed)
    assert sum(speeds["auto"]) >= 0.75 * best_fixed, speeds
    assert len(replies) == 1


def test_threads_are_reported_with_how_they_were_chosen() -> None:
    auto = _run(tokens=4)["threads"]
    assert auto["chosen"] == "auto" and auto["cores"] == len(os.sched_getaffinity(0))
    assert auto["prompt_evaluation"] == auto["generation"] >= 1
    fixed = _run("-t", "1", "-tb", "2", tokens=4)["threads"]
    assert (fixed["chosen"], fixed["generation"], fixed["prompt_evaluation"]) == ("-t", 1, 2)
