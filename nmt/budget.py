"""When training stops: the budget (steps, epochs, minutes) and SIGTERM or Ctrl-C.

The clock is part of the run's state. It counts the wall time of the training loop (updates,
validations and checkpoint writes), not start-up (data, model, precision timing) nor what follows
the loop (the last step's validation, the test scores). Every checkpoint stores it
(``counters.train_seconds``) and a resumed run continues it, so a time budget is one budget however
often the run is stopped, and a schedule that follows the budget (``linear``, ``cosine``) continues
where it was. Under DDP every rank reads rank 0's clock.
"""

from __future__ import annotations

import signal
import time
from typing import Optional

import torch

from nmt import distributed


class Budget:
    """Stops training at the first of max_steps, max_epochs, max_minutes (0: that limit is off); estimates the ETA."""

    def __init__(self, max_steps: int, max_epochs: int, max_minutes: float, steps_per_epoch: int,
                 used_seconds: float = 0.0):
        self.max_steps, self.max_epochs, self.max_seconds = max_steps, max_epochs, max_minutes * 60
        self.steps_per_epoch = steps_per_epoch
        self.used_before, self.start = used_seconds, time.perf_counter()  # clock of the checkpoint resumed, and now
        self.now = used_seconds  # the clock at the last tick(): the same on every rank
        self.end: Optional[float] = None  # when the training loop ended (stop())

    def elapsed(self) -> float:
        """This process's reading of the run's clock (seconds), resumed runs' time included."""
        return self.used_before + self.here()

    def here(self) -> float:
        """Seconds of training in this process (throughput figures)."""
        return (self.end or time.perf_counter()) - self.start

    def stop(self) -> None:
        """Stop the clock when the training loop ends: the last validation and the test scores after it are not
        training time, so the last checkpoint's clock is the loop's (a time budget: within one update of it)."""
        self.end = time.perf_counter()

    def tick(self, device: torch.device) -> float:
        """Read the clock once for every rank (rank 0's, when a time budget makes it a decision)."""
        self.now = distributed.rank0_float(self.elapsed(), device) if self.max_seconds else self.elapsed()
        return self.now

    def done(self, step: int, epoch: float) -> bool:
        return self.progress(step, epoch) >= 1.0

    def progress(self, step: int, epoch_progress: float) -> float:
        """The fraction of the budget used (0..1) at the last tick: the largest over the limits that are set."""
        used = ((step, self.max_steps), (epoch_progress, self.max_epochs), (self.now, self.max_seconds))
        return min(1.0, max([0.0] + [x / limit for x, limit in used if limit]))

    def eta(self, step: int, steps_done_here: int) -> float:
        """Seconds left: the nearest of the limits, extrapolated from this process's pace."""
        pace = (self.now - self.used_before) / max(steps_done_here, 1)
        left = [(limit - step) * pace for limit in (self.max_steps, self.max_epochs * self.steps_per_epoch) if limit]
        return max(0.0, min(left + ([self.max_seconds - self.now] if self.max_seconds else [])))


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
