"""How many threads llama.cpp computes with: by default, the cores other processes leave free.

llama.cpp's CPU threads meet at a barrier after every operation of the graph (hundreds a token) and spin
there. When another program takes a core, the kernel preempts one of our threads now and then, and every
other thread spins at the next barrier until it runs again. On two cores with one ``yes > /dev/null``
running, SmolLM2's decode fell from 125 to 32 tokens/s with two threads, while one thread kept 78
(docs/performance.md has the measured table). So the default is not "every core" but "every core the
others leave free", measured as the program runs:

- the kernel counts, per CPU, the time it spent busy (``/proc/stat``), and per process the time its
  threads ran (``/proc/self/stat``);
- over a window, the CPUs' busy time less our own is what other processes took; rounded to cores, that
  many of our cores are taken, and we compute on the rest (at least one);
- time the kernel gave to niced processes (``nice`` above ours: a build, an indexer) is not counted: they
  yield to us, and two threads beside a niced two-job build still ran 76 tokens/s against one thread's 72;
- the window is re-read at most every ``WINDOW`` seconds, before a decode, so a load that starts or ends in
  the middle of a reply is followed within a second, and between turns (the user typing) it measures the
  others alone.

Worked example: two cores; in the last 0.5 s the CPUs were busy 0.84 s of their 1.0 s, 0.50 s of it ours.
Others took 0.34 s / 0.5 s = 0.68 of a core, which rounds to 1 core taken: compute with 2 - 1 = 1 thread.

The thread count never changes a result: each output of an operation is computed by one thread, whichever
(tests/test_thread_choice.py checks the ids). ``-t N`` fixes the count, as llama-cli's flag does. Where the
kernel has no ``/proc`` (macOS, Windows) the default is every core, as before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

WINDOW = 0.5  # seconds between two readings while decoding: a load is followed within about a second
TURN_WINDOW = 0.1  # the shortest window worth reading at all (the kernel counts in 10 ms ticks)
_BUSY_FIELDS = (0, 2, 5, 6, 7)  # /proc/stat per CPU: user (nice) system (idle iowait) irq softirq steal
_NICE_FIELD = 1


@dataclass(frozen=True)
class CpuTimes:
    """One reading: seconds the given CPUs were busy, seconds this process ran, and when (monotonic)."""

    busy: float
    ours: float
    at: float


def cores_of_this_process() -> list[int]:
    """The CPUs this process may run on (its affinity), else all of them."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def we_are_niced() -> bool:
    try:
        return os.getpriority(os.PRIO_PROCESS, 0) > 0
    except (AttributeError, OSError):
        return False


def read_cpu_times(cpus: list[int], proc: str = "/proc", count_nice: bool | None = None) -> CpuTimes | None:
    """The kernel's counters now, or None where it has no ``/proc`` to read them from. Niced time counts
    only when we are niced ourselves (our own time is counted there then; ``count_nice`` None: look)."""
    count_nice = we_are_niced() if count_nice is None else count_nice
    fields_read = (*_BUSY_FIELDS, _NICE_FIELD) if count_nice else _BUSY_FIELDS
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    wanted = {f"cpu{n}" for n in cpus}
    try:
        with open(f"{proc}/stat", "rb") as stat:
            lines = stat.read().decode("ascii", "replace").splitlines()
        with open(f"{proc}/self/stat", "rb") as own:
            mine = own.read().decode("ascii", "replace")
    except OSError:
        return None
    busy = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if name in wanted:
            fields = rest.split()
            busy += sum(int(fields[i]) for i in fields_read if i < len(fields))
    after_name = mine.rpartition(")")[2].split()  # the name may hold spaces; utime and stime are fields 14, 15
    ours = int(after_name[11]) + int(after_name[12])
    return CpuTimes(busy / tick, ours / tick, time.monotonic())


def cores_taken(before: CpuTimes, after: CpuTimes) -> float:
    """Cores' worth of time other processes used between two readings."""
    elapsed = after.at - before.at
    if elapsed <= 0:
        return 0.0
    return max(0.0, (after.busy - before.busy) - (after.ours - before.ours)) / elapsed


class ThreadChoice:
    """The thread count for the next decode: ``fixed`` (``-t N``), or the cores others leave free.

    >>> choice = ThreadChoice(None, cpus=[0, 1], read=lambda cpus: None)   # no /proc: every core
    >>> choice.now()
    2
    """

    def __init__(self, fixed: int | None, *, cpus: list[int] | None = None,
                 read: Callable[[list[int]], CpuTimes | None] = read_cpu_times,
                 clock: Callable[[], float] = time.monotonic):
        self.cpus = cpus if cpus is not None else cores_of_this_process()
        self.fixed = fixed
        self._read, self._clock = read, clock
        self.current = fixed or len(self.cpus)
        self.taken = 0.0  # cores other processes used in the last window
        self._last = None if fixed else read(self.cpus)

    @property
    def auto(self) -> bool:
        return self.fixed is None and self._last is not None

    def now(self, window: float = WINDOW) -> int:
        """The count to compute with now: read the counters again where ``window`` seconds have passed."""
        if not self.auto or self._clock() - self._last.at < window:
            return self.current
        reading = self._read(self.cpus)
        if reading is None:
            return self.current
        self.taken = cores_taken(self._last, reading)
        self._last = reading
        self.current = max(1, len(self.cpus) - int(self.taken + 0.5))
        return self.current

    def describe(self) -> str:
        """For /info and --json: "2", or "auto: 1 of 2 cores (others use 0.9)"."""
        if not self.auto:
            return str(self.current)
        return f"auto: {self.current} of {len(self.cpus)} cores (others use {self.taken:.1f})"
