"""Training for real runs: exact resume, kill -9 at random moments, graceful SIGTERM,
reproducibility, resume diagnostics, and DistributedDataParallel against one process.

All through the real CLI (subprocesses), on the embedded corpus with a 32-unit model.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import BASE, checkpoint_weights

from nmt import checkpoint

REPO = Path(__file__).resolve().parents[1]

def losses(run: Path) -> dict[int, float]:
    """train/loss scalars of a run's TensorBoard events, by step (later files win)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = {}
    for f in sorted((run / "tensorboard").glob("events.*"), key=lambda p: p.stat().st_mtime_ns):
        acc = EventAccumulator(str(f))
        acc.Reload()
        if "train/loss" in acc.Tags()["scalars"]:
            out.update({e.step: e.value for e in acc.Scalars("train/loss")})
    return out


def train(run_cli, run: Path, *overrides: str, timeout: float = 300):
    return run_cli("nmt.train", *BASE, *overrides, f"hydra.run.dir={run}", timeout=timeout)


def test_resumed_run_matches_an_uninterrupted_one(run_cli, tmp_path, explain):
    """40 steps in one go, and 20 steps + resume to 40: the same losses at every logged step
    (model, optimizer, RNG, batch order and data position all restored); same seed, same losses."""
    common = ["trainer.log_every=5", "trainer.valid_every=20", "model.dropout=0.3", "model.encoder_layers=2",
              "model.decoder_layers=2"]  # dropout between the layers too
    full, split = tmp_path / "full", tmp_path / "split"
    proc = train(run_cli, full, *common, "trainer.max_steps=40")
    assert proc.returncode == 0, explain(proc)
    proc = train(run_cli, split, *common, "trainer.max_steps=20")
    assert proc.returncode == 0, explain(proc)
    first = losses(split)
    assert first == {s: v for s, v in losses(full).items() if s <= 20}  # same seed, same losses
    proc = train(run_cli, split, *common, "trainer.max_steps=40", "trainer.resume=auto", "trainer.lr=0.001")
    assert proc.returncode == 0, explain(proc)
    assert "resumed at step 20" in proc.stdout + proc.stderr
    a, b = losses(full), losses(split)
    assert sorted(b) == [5, 10, 15, 20, 25, 30, 35, 40]
    assert b == pytest.approx(a, rel=1e-6, abs=1e-6)
    print("uninterrupted:", {k: round(v, 6) for k, v in sorted(a.items())})
    print("stopped at 20 and resumed:", {k: round(v, 6) for k, v in sorted(b.items())})
    assert checkpoint.load(split / "checkpoints" / "last.pt")["counters"]["step"] == 40
    info = json.loads((split / "run_info.json").read_text())
    assert info["version"] and "git_commit" in info


def test_resume_reports_what_differs_and_who_wins(run_cli, tmp_path, explain):
    run = tmp_path / "r"
    assert train(run_cli, run, "trainer.max_steps=6", "trainer.valid_every=6").returncode == 0
    proc = train(run_cli, run, "trainer.max_steps=8", "trainer.valid_every=4", "trainer.resume=auto",
                 "trainer.lr=0.002", "model.hidden_size=64", "trainer.reset_optimizer=true")
    assert proc.returncode == 0, explain(proc)
    log = proc.stdout + proc.stderr
    assert "trainer.lr is 0.001 in the checkpoint, 0.002 now: the new config wins" in log
    assert ("[WARNING] - resume: model.hidden_size=64 is ignored: the checkpoint's 32 is kept (its weights were "
            "trained with it; start a new run to change it)") in log
    assert "reset: optimizer True" in log
    assert checkpoint.load(run / "checkpoints" / "last.pt")["config"]["model"]["hidden_size"] == 32


def test_a_new_run_refuses_a_directory_with_checkpoints(run_cli, tmp_path):
    run = tmp_path / "r"
    assert train(run_cli, run, "trainer.max_steps=4", "trainer.valid_every=4").returncode == 0
    before = (run / "checkpoints" / "best.pt").read_bytes()
    proc = train(run_cli, run, "trainer.max_steps=4")
    assert proc.returncode == 1 and "trainer.resume=auto" in proc.stderr and "Traceback" not in proc.stderr
    assert (run / "checkpoints" / "best.pt").read_bytes() == before


def test_sigkill_at_random_moments_loses_at_most_one_interval(cli_env, tmp_path):
    """Ten trials: training (last.pt every 3 steps, log every step) is killed with SIGKILL at a
    random moment, several times while a checkpoint is being written; every time last.pt loads,
    holds a step at most one interval behind the last step logged, and a resume finishes the run."""
    run = tmp_path / "run"
    interval, target = 3, 400
    args = [sys.executable, "-m", "nmt.train", *BASE, f"hydra.run.dir={run}", "trainer.log_every=1",
            f"trainer.save_every={interval}", "trainer.valid_every=1000", f"trainer.max_steps={target}",
            "trainer.resume=auto"]
    rng = random.Random(1)
    outcomes = []
    for trial in range(10):
        proc = subprocess.Popen(args, cwd=REPO, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        logged, deadline = [], time.time() + 120
        wait_steps = rng.randint(interval + 1 if trial == 0 else 1, 9)
        while time.time() < deadline:  # read the log until enough steps were taken in this trial
            line = proc.stdout.readline()
            m = re.search(r"\] - step (\d+) \|", line)
            if m:
                logged.append(int(m.group(1)))
            if len(logged) >= wait_steps:
                break
        time.sleep(rng.uniform(0, 0.15))  # land anywhere in a step, or in a checkpoint write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        logged += [int(m) for m in re.findall(r"\] - step (\d+) \|", proc.stdout.read())]  # what it logged after
        proc.stdout.close()
        assert logged, f"trial {trial}: training never logged a step"
        state = checkpoint.load(run / "checkpoints" / "last.pt")  # raises if corrupt or truncated
        lost = logged[-1] - state["counters"]["step"]
        assert lost <= interval, f"trial {trial}: logged step {logged[-1]}, checkpoint at {state['counters']['step']}"
        outcomes.append(lost)
    reached = checkpoint.load(run / "checkpoints" / "last.pt")["counters"]["step"]
    done = subprocess.run([*args[:-2], f"trainer.max_steps={reached + 10}", "trainer.resume=auto"], cwd=REPO,
                          env=cli_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert checkpoint.load(run / "checkpoints" / "last.pt")["counters"]["step"] == reached + 10
    assert len(outcomes) == 10
    print("steps lost per trial:", outcomes)
    assert not list((run / "checkpoints").glob(".*.tmp*"))


def test_sigterm_stops_gracefully_and_saves(cli_env, tmp_path):
    run = tmp_path / "run"
    args = [sys.executable, "-m", "nmt.train", *BASE, f"hydra.run.dir={run}", "trainer.log_every=1",
            "trainer.valid_every=1000", "trainer.max_steps=100000"]
    proc = subprocess.Popen(args, cwd=REPO, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logged = []
    while len(logged) < 5:
        m = re.search(r"\] - step (\d+) \|", proc.stdout.readline())
        if m:
            logged.append(int(m.group(1)))
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == 143, rest[-2000:]
    assert "SIGTERM received" in rest
    step = checkpoint.load(run / "checkpoints" / "last.pt")["counters"]["step"]
    assert step >= logged[-1]


def test_ddp_two_processes_match_one_with_the_same_global_batch(cli_env, run_cli, tmp_path, explain):
    """torchrun with 2 CPU processes (gloo) accumulating 2 batches each against one process accumulating 4:
    the same batches, the same averaged gradient, so the same weights after 12 updates."""
    common = ["trainer.max_steps=12", "trainer.valid_every=12", "trainer.log_every=4", "model.dropout=0.0"]
    single = tmp_path / "single"
    proc = train(run_cli, single, *common, "trainer.accum_steps=4")
    assert proc.returncode == 0, explain(proc)
    ddp = tmp_path / "ddp"
    env = dict(cli_env, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port", "29517",
         "-m", "nmt.train", *BASE, *common, "trainer.accum_steps=2", f"hydra.run.dir={ddp}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    a, b = checkpoint_weights(single / "checkpoints" / "last.pt"), checkpoint_weights(ddp / "checkpoints" / "last.pt")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5, msg=k)
    print("DDP vs single: largest weight difference", max(float((a[k] - b[k]).abs().max()) for k in a))
    assert losses(ddp).keys() == {4, 8, 12}
    assert len(list((ddp / "tensorboard").glob("events.*"))) == 1  # rank 0 alone logs


def test_a_finished_run_resumed_into_a_new_folder_keeps_its_best_checkpoint(run_cli, tmp_path, explain):
    """Resuming a run whose budget is spent into another folder trains nothing more, takes the old run's best.pt
    with it (its counters carry that best score) and scores the test split with it; before, it ended in
    "best.pt does not exist"."""
    old, new = tmp_path / "old", tmp_path / "new"
    assert train(run_cli, old, "trainer.max_steps=6", "trainer.valid_every=3").returncode == 0
    proc = train(run_cli, new, "trainer.max_steps=6", "trainer.valid_every=3", f"trainer.resume={old}",
                 "trainer.test_beam=2")
    assert proc.returncode == 0, explain(proc)
    a, b = (checkpoint.load(r / "checkpoints" / "best.pt") for r in (old, new))
    assert a["counters"] == b["counters"] and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    metrics = json.loads((new / "metrics.json").read_text())
    assert metrics["steps"] == 6 and "test_bleu" in metrics
