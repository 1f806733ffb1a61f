"""``python -m torch.distributed.run --nproc_per_node=2 tests/ddp_worker.py OVERRIDES...``: ``nmt.train`` with every
rank's weights saved at each checkpoint as ``$DUMP_DIR/rank{r}_step{s}.pt`` (so a test can compare the ranks), and
with ``$NUDGE_STEP`` set, rank 1's weights changed by 1e-3 at that step's checkpoint (the ranks' check must catch it)."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import torch

from nmt import update

DUMP = Path(os.environ["DUMP_DIR"])
NUDGE = int(os.environ.get("NUDGE_STEP", 0))
sync = update.Updater.sync_for_checkpoint


def dumping_sync(self: update.Updater) -> None:
    rank = int(os.environ["RANK"])
    if NUDGE and rank == 1 and self.state.step == NUDGE:
        with torch.no_grad():
            next(self.model.parameters()).view(-1)[0] += 1e-3
    sync(self)
    torch.save(self.model.state_dict(), DUMP / f"rank{rank}_step{self.state.step}.pt")


update.Updater.sync_for_checkpoint = dumping_sync
sys.argv = ["nmt.train", *sys.argv[1:]]
runpy.run_module("nmt.train", run_name="__main__")  # as ``python -m nmt.train`` (Hydra finds configs/ as nmt.configs)
