"""Where a training run stands: the counters a checkpoint carries to resume it exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Optional


@dataclass
class TrainingState:
    """Counters of a run. Checkpoints store them as the ``counters`` dict, with these keys."""

    step: int = 0  # updates applied
    epoch: int = 0  # epochs completed
    best_bleu: float = -1.0  # best dev BLEU so far
    best_loss: float = math.inf  # best dev loss so far
    bad_validations: int = 0  # validations in a row without a better early-stopping metric
    update_in_epoch: int = 0  # updates done in the current epoch (to resume inside it)
    epoch_rng: Optional[Any] = None  # random.getstate() that shuffled the current epoch
    nonfinite_skipped: int = 0  # updates in a row skipped for a non-finite loss or gradient
    train_seconds: float = 0.0  # the run's clock when the checkpoint was written (nmt/budget.py: what it counts)
    per_update: int = 0  # batches of the epoch's list one update consumed (processes × accum_steps)

    def state_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def load_state_dict(self, counters: dict[str, Any]) -> None:
        """Take the counters of a checkpoint (keys it lacks keep their current value)."""
        for f in fields(self):
            if f.name in counters:
                setattr(self, f.name, counters[f.name])
