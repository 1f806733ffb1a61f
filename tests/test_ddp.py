"""Two DDP ranks (torchrun, gloo, CPU) decide as one: the same weights on both after plateau decays, at the end of
a time budget, and after a SIGKILL and resume (equal to the uninterrupted 2-rank run's); a rank that drifts stops
the run at the step; SIGTERM stops both and saves; a 2-rank checkpoint resumes in one process.

``tests/ddp_worker.py`` saves every rank's weights at each checkpoint, so rank 1's can be compared with rank 0's."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
from helpers import BASE

from nmt import checkpoint

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "ddp_worker.py"
COMMON = [*BASE, "trainer.log_every=1", "model.dropout=0.3", "model.encoder_layers=2", "model.decoder_layers=2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(cli_env: dict, run: Path, *overrides: str, env: dict | None = None) -> tuple[list[str], dict]:
    """The command and environment of a 2-rank run of the worker into ``run`` (weights dumped to run/ranks)."""
    (run / "ranks").mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port", str(_free_port()),
            str(WORKER), *COMMON, *overrides, f"hydra.run.dir={run}"], dict(
        cli_env, OMP_NUM_THREADS="1", DUMP_DIR=str(run / "ranks"), PYTHONPATH=str(REPO), **(env or {}))


def run2(cli_env: dict, run: Path, *overrides: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd, full_env = torchrun(cli_env, run, *overrides, env=env)
    return subprocess.run(cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=300)


def ranks_equal(run: Path) -> list[int]:
    """The steps at which both ranks' weights were saved; asserts they are bit-identical at each."""
    steps = sorted(int(m.group(1)) for p in (run / "ranks").glob("rank0_step*.pt")
                   if (m := re.search(r"step(\d+)", p.name)))
    assert steps
    for s in steps:
        a, b = (torch.load(run / "ranks" / f"rank{r}_step{s}.pt") for r in (0, 1))
        for k in a:
            assert torch.equal(a[k], b[k]), f"step {s}: {k} differs between rank 0 and rank 1"
    return steps


def test_ranks_agree_after_plateau_decays(cli_env, tmp_path):
    """The plateau schedule decays on rank 0's dev BLEU; rank 1 takes the decision: equal weights at every
    checkpoint after the decays (before, rank 1 never decayed and the replicas drifted apart)."""
    run = tmp_path / "plateau"
    proc = run2(cli_env, run, "trainer.max_steps=16", "trainer.valid_every=4", "trainer.schedule=plateau",
                "trainer.plateau_patience=1", "trainer.decay_factor=0.1", "trainer.lr=0.003")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert checkpoint.load(run / "checkpoints" / "last.pt")["schedule"]["scale"] < 1  # it did decay
    assert ranks_equal(run) == [4, 8, 12, 16]
    assert out.count("ranks agree") >= 4


def test_ranks_agree_at_the_end_of_a_time_budget(cli_env, tmp_path):
    """A cosine schedule over a time budget reads rank 0's clock on every rank: the same learning rate and the same
    last step on both (each rank's own clock could end on different steps and hang the collective)."""
    run = tmp_path / "timed"
    proc = run2(cli_env, run, "trainer.max_minutes=0.15", "trainer.schedule=cosine", "trainer.valid_every=1000",
                "trainer.save_every=10")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    state = checkpoint.load(run / "checkpoints" / "last.pt")
    assert ranks_equal(run)[-1] == state["counters"]["step"] > 10
    assert 9 <= state["counters"]["train_seconds"] < 9 + 5  # 0.15 minutes, and one update and a validation past


def test_a_drifting_rank_stops_the_run_naming_the_step(cli_env, tmp_path):
    run = tmp_path / "drift"
    proc = run2(cli_env, run, "trainer.max_steps=12", "trainer.valid_every=1000", "trainer.save_every=4",
                env={"NUDGE_STEP": "8"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "step 8: the ranks' parameters differ" in out
    assert checkpoint.load(run / "checkpoints" / "last.pt")["counters"]["step"] == 4  # the last good one


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants at once, as a lost machine would (torchrun starts its workers
    in sessions of their own: killing its process group would leave them running)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_after(cli_env: dict, run: Path, steps: int, *overrides: str) -> int:
    """Start a 2-rank run, SIGKILL torchrun and both ranks once ``steps`` steps are logged; the last logged step."""
    cmd, env = torchrun(cli_env, run, *overrides)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logged, deadline = [], time.time() + 180
    while len(logged) < steps and time.time() < deadline:
        if m := re.search(r"\] - step (\d+) \|", proc.stdout.readline()):
            logged.append(int(m.group(1)))
    kill_tree(proc.pid)
    proc.wait()
    proc.stdout.close()
    return logged[-1]


def test_sigkill_and_resume_of_two_ranks_equals_the_uninterrupted_run(cli_env, tmp_path):
    """Every rank's RNG (dropout masks), the data position and the optimizer come back: after a kill -9 and a
    resume the weights are bit-identical to an uninterrupted 2-rank run's, and the ranks agree."""
    args = ["trainer.max_steps=20", "trainer.valid_every=10", "trainer.save_every=3"]
    full = tmp_path / "full"
    assert run2(cli_env, full, *args).returncode == 0
    split = tmp_path / "split"
    killed_at = _kill_after(cli_env, split, 8, *args, "trainer.resume=auto")
    saved = checkpoint.load(split / "checkpoints" / "last.pt")["counters"]["step"]
    assert 3 <= saved <= killed_at < 20  # killed mid-run
    proc = run2(cli_env, split, *args, "trainer.resume=auto")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert f"resumed at step {saved}" in proc.stdout + proc.stderr
    a, b = (checkpoint.load(r / "checkpoints" / "last.pt")["model"] for r in (full, split))
    assert all(torch.equal(a[k], b[k]) for k in a)
    ranks_equal(split)


def test_sigterm_under_ddp_stops_both_ranks_and_saves(cli_env, run_cli, tmp_path):
    """torchrun passes SIGTERM to both ranks; they agree to stop after the same update, rank 0 saves last.pt, and the
    run resumes in one process (another world size: the epoch goes on from the first batch not yet used)."""
    run = tmp_path / "term"
    cmd, env = torchrun(cli_env, run, "trainer.max_steps=100000", "trainer.valid_every=1000")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logged = []
    while len(logged) < 5:
        if m := re.search(r"\] - step (\d+) \|", proc.stdout.readline()):
            logged.append(int(m.group(1)))
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0 and "SIGTERM received" in rest, rest[-3000:]
    step = checkpoint.load(run / "checkpoints" / "last.pt")["counters"]["step"]
    assert step >= logged[-1]
    ranks_equal(run)
    one = run_cli("nmt.train", *COMMON, f"hydra.run.dir={run}", "trainer.resume=auto", f"trainer.max_steps={step + 3}",
                  "trainer.valid_every=1000")
    assert one.returncode == 0, one.stderr[-3000:]
    assert "an update took 2 batches (processes × trainer.accum_steps), now 1" in one.stdout + one.stderr
    assert checkpoint.load(run / "checkpoints" / "last.pt")["counters"]["step"] == step + 3

