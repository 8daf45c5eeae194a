"""A chat template's render, bounded in time and memory.

A chat template is code that comes with the model file. One that never ends, or builds a value of tens of
gigabytes, must not hang a load or end it in a MemoryError: its render stops, and it fails as a broken
template does (one line, a doctor finding). Real templates render in milliseconds and build a few
kilobytes, far inside both bounds.

Time: RENDER_SECONDS per render.

- On the main thread an interval timer (``SIGALRM``) interrupts whatever runs, a loop that calls
  nothing included (``{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}``),
  and keeps interrupting until the render is left.
- On any thread, the sandbox's hooks (every attribute, item, call and operator) look at the clock.

Memory: the sequence-building operators (``*``, ``+``, ``**``) are intercepted before they compute.

- One result may not hold more than MAX_VALUE items (characters of a string, elements of a list, bytes of
  a number): ``"x" * 40000000000`` is refused, not allocated.
- Together they may not build more than MAX_BUILT items in one render, so that a loop of allowed values
  (``{% set s %}{% for i in range(100000) %}{{ "x" * 100000 }}{% endfor %}{% endset %}``) stops too.
- The output is gathered piece by piece and may not pass MAX_VALUE characters.

Example::

    >>> budget = RenderBudget(seconds=1.0)
    >>> budget.result_size("*", "ab", 3), budget.result_size("+", [1], [2, 3]), budget.result_size("-", 5, 2)
    (6, 3, 0)
    >>> budget.check("*", "x", 40_000_000_000)
    Traceback (most recent call last):
    ...
    tokenizer.chat.budget.OverBudget: it builds a value of 40000000000 items (more than 67108864)
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterable, Iterator

RENDER_SECONDS = 2.0      # a render's time (the slowest real template: 6 ms with 30 tools and 4,000 words)
MAX_VALUE = 64 * 2**20    # items in one value built by an operator, and characters of the output
MAX_BUILT = 256 * 2**20   # items built by operators in one render, all together
_RETRY_S = 0.05           # after the deadline, the timer fires again until the render is left


class OverBudget(BaseException):
    """A render past its budget; str() says which. A BaseException, so that no ``except Exception`` on
    the way (jinja2's or a filter's) takes it for an error of the template's own and goes on."""


_active = threading.local()  # the budget of the render running on this thread


def active() -> RenderBudget | None:
    """The budget of this thread's render (None outside one): the sandbox's hooks ask it."""
    return getattr(_active, "budget", None)


class RenderBudget:
    """One render's budget: ``with budget.running(): ...`` starts its clock (and the main thread's timer)."""

    def __init__(self, seconds: float = RENDER_SECONDS, max_value: int = MAX_VALUE, max_built: int = MAX_BUILT):
        self.seconds, self.max_value, self.max_built = seconds, max_value, max_built
        self.deadline = float("inf")
        self.built = 0

    @contextlib.contextmanager
    def running(self) -> Iterator[RenderBudget]:
        self.deadline, self.built = time.monotonic() + self.seconds, 0
        timer = threading.current_thread() is threading.main_thread()
        if timer:
            previous = signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds, _RETRY_S)
        _active.budget = self
        try:
            yield self
        finally:
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            _active.budget = None
            self.deadline = float("inf")

    def _alarm(self, signum: int, frame: object) -> None:
        raise OverBudget(f"it did not finish within {self.seconds:g} s")

    def tick(self) -> None:
        """The hooks' look at the clock."""
        if time.monotonic() > self.deadline:
            self._alarm(0, None)

    @staticmethod
    def result_size(operator: str, left: object, right: object) -> int:
        """How many items ``left OPERATOR right`` would hold, for the operators that build: a repeated
        sequence, two joined, a power's bytes; 0 for the rest."""
        sized = (str, bytes, list, tuple)
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, sized) and isinstance(times, int):
                    return len(seq) * max(times, 0)
        elif operator == "+" and isinstance(left, sized) and isinstance(right, sized):
            return len(left) + len(right)
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            return max(abs(left).bit_length() - 1, 0) * right // 8
        return 0

    def check(self, operator: str, left: object, right: object) -> None:
        """Refuse an operation before it builds too much."""
        self.tick()
        size = self.result_size(operator, left, right)
        if size > self.max_value:
            raise OverBudget(f"it builds a value of {size} items (more than {self.max_value})")
        self.built += size
        if self.built > self.max_built:
            raise OverBudget(f"it builds more than {self.max_built} items in all")

    def gathered(self, pieces: Iterable[str]) -> str:
        """The output, its length checked as it grows."""
        out, length = [], 0
        for piece in pieces:
            length += len(piece)
            if length > self.max_value:
                raise OverBudget(f"its output passes {self.max_value} characters")
            out.append(piece)
        return "".join(out)
