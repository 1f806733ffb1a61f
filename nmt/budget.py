"""When training stops: the budget (steps, epochs, minutes) and SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import time
from typing import Optional


class Budget:
    """Stops training at the first of max_steps, max_epochs, max_minutes; estimates the ETA."""

    def __init__(self, max_steps: int, max_epochs: int, max_minutes: float, steps_per_epoch: int):
        self.max_steps, self.max_epochs, self.max_seconds = max_steps, max_epochs, max_minutes * 60
        self.steps_per_epoch = steps_per_epoch
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def done(self, step: int, epoch: int) -> bool:
        return self.progress(step, epoch) >= 1.0

    def progress(self, step: int, epoch_progress: float) -> float:
        """The fraction of the budget used (0..1): the largest over the limits that are set."""
        used = ((step, self.max_steps), (epoch_progress, self.max_epochs), (self.elapsed(), self.max_seconds))
        return min(1.0, max([0.0] + [x / limit for x, limit in used if limit]))

    def eta(self, step: int, steps_done_here: int) -> float:
        """Seconds left: the nearest of the limits, extrapolated from this process's pace."""
        pace = self.elapsed() / max(steps_done_here, 1)
        left = [(limit - step) * pace for limit in (self.max_steps, self.max_epochs * self.steps_per_epoch) if limit]
        return max(0.0, min(left + ([self.max_seconds - self.elapsed()] if self.max_seconds else [])))


def fmt_time(seconds: float) -> str:
    """``12m05s`` or ``3h07m``."""
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"


class StopSignal:
    """SIGTERM or a first Ctrl-C ask for a graceful stop after the current update."""

    def __init__(self) -> None:
        self.requested: Optional[str] = None
        self.old: dict = {}

    def __enter__(self) -> StopSignal:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (e.g. called from a test runner thread)
                pass
        return self

    def _handle(self, signum, frame) -> None:
        self.requested = signal.Signals(signum).name
        if signum == signal.SIGINT:  # a second Ctrl-C interrupts at once
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc) -> None:
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
