"""The process group's collective helpers: per-rank RNG streams, and a barrier that outlasts the
default group's timeout while rank 0 works alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt import distributed
from nmt.encoder import Dropout

REPO = Path(__file__).resolve().parents[1]


def _mask(seed: int, rank: int, step: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)  # what train() does on every rank before building the model
    distributed.seed_rank(seed, rank, step)
    return Dropout(0.5).train()(torch.ones(4, 64)) > 0


def test_ranks_draw_their_own_dropout_masks_and_rank_zero_keeps_its_stream():
    """Every rank seeded alike drew the same masks: DDP then averaged gradients of one mask."""
    masks = [_mask(42, rank) for rank in range(3)]
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    torch.manual_seed(42)
    assert torch.equal(masks[0], Dropout(0.5).train()(torch.ones(4, 64)) > 0)  # one process: as before
    assert torch.equal(_mask(42, 1), masks[1])  # reproducible
    assert not torch.equal(_mask(42, 1, step=100), masks[1])  # a resumed run: fresh streams on ranks > 0


WORKER = """
import datetime, os, time
import torch.distributed as dist
from nmt import distributed
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))  # the default group's timeout
distributed.setup("cpu")
if dist.get_rank() == 0:
    time.sleep(6)  # rank 0 prepares the corpus
distributed.barrier()
print("through", distributed.from_rank0(f"choice of rank {dist.get_rank()}"), flush=True)
distributed.cleanup()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_barrier_outlasts_the_default_group_timeout():
    """Ranks > 0 wait at a barrier while rank 0 prepares the corpus, longer than the process
    group's timeout (NCCL: 10 minutes; here the group is given 2 s and rank 0 takes 6 s); then
    every rank takes rank 0's decision (as each takes rank 0's measured precision)."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2",
               CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER], cwd=REPO, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "through choice of rank 0" in out, err[-2000:]


def test_an_unknown_backend_is_refused_before_joining(monkeypatch):
    from nmt.config import ConfigError

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("NMT_DIST_BACKEND", "mpi")
    with pytest.raises(ConfigError, match="NMT_DIST_BACKEND='mpi' is not valid"):
        distributed.setup("cpu")
