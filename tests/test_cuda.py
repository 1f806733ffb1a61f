"""The CUDA path, on a real GPU (every test here is marked ``cuda`` and skipped without one).

Training in fp32, bf16 and fp16 (gradient scaler), the compiled decoder step (trainer.compile=true), resume,
greedy and beam search against the CPU on the same weights, two DDP ranks sharing one GPU
(gloo, ``device_ids`` set) against one process, and GPU checkpoints on the CPU.
``scripts/checks/gpu_check.py`` runs them before it measures.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import BASE, checkpoint_weights, digits_cfg

from nmt import checkpoint
from nmt.batching import make_batch
from nmt.search import beam_search
from nmt.train import train

pytestmark = pytest.mark.cuda
REPO = Path(__file__).resolve().parents[1]
CUDA = torch.device("cuda")


def gpu_cfg(data: Path, **trainer):
    """The digits task on the GPU; eager decoder step unless ``compile`` is given."""
    return digits_cfg(data, **{"device": "cuda", "precision": "fp32", "compile": False, "test_beam": 0, **trainer})


@pytest.fixture
def ieee_fp32():
    """fp32 matmuls and cuDNN RNNs without TF32 (for comparisons with the CPU), restored after."""
    before = torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = torch.backends.cudnn.rnn.fp32_precision = "ieee"
    yield
    torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision = before


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_training_steps_on_the_gpu(digits_dir, tmp_path, precision):
    """Finite, falling dev losses in each precision; fp16 trains through the gradient scaler."""
    run = tmp_path / "r"
    metrics = train(gpu_cfg(digits_dir, precision=precision, max_steps=60, valid_every=30), run)
    losses = [h["valid_loss"] for h in metrics["history"]]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses
    assert metrics["peak_memory_mb"] > 0
    state = checkpoint.load(run / "checkpoints" / "last.pt")
    assert state["rng"]["cuda"] is not None
    if precision == "fp16":
        assert state["scaler"]["scale"] > 0  # the scaler ran and is saved for a resume


def test_the_compiled_step_on_the_gpu_trains_like_eager(digits_dir, tmp_path, caplog):
    """trainer.compile=true compiles the input-feeding step on CUDA, with no eager fallback,
    to the eager run's dev loss."""
    loss = {}
    for setting in (False, True):
        metrics = train(gpu_cfg(digits_dir, compile=setting, max_steps=20, valid_every=20), tmp_path / str(setting))
        loss[setting] = metrics["history"][-1]["valid_loss"]
    assert not [r for r in caplog.records if "running it eagerly" in r.getMessage()]
    assert loss[True] == pytest.approx(loss[False], rel=1e-2)


@pytest.mark.parametrize("input_feeding", [False, True])
def test_resume_on_the_gpu_matches_an_uninterrupted_run(digits_dir, tmp_path, ieee_fp32, input_feeding):
    """20 steps in one go against 10 + resume to 20, with the zh_en recipes' shape (2-layer decoder without input
    feeding, dropout 0.3) and the paper's (input feeding): 2-layer encoder and decoder with dropout between the layers
    (every mask from torch's CUDA RNG, which the checkpoint restores; cuDNN's own inter-layer dropout state would not
    be). The bound is far below what other masks give (about 1e-2)."""

    def cfg(**kw):
        c = gpu_cfg(digits_dir, valid_every=10, **kw)
        c.model.dropout, c.model.encoder_layers, c.model.decoder_layers = 0.3, 2, 2
        c.model.input_feeding = input_feeding
        return c

    full = train(cfg(max_steps=20), tmp_path / "full")
    train(cfg(max_steps=10), tmp_path / "split")
    split = train(cfg(max_steps=20, resume="auto"), tmp_path / "split")
    assert split["steps"] == 20
    assert split["history"][-1]["valid_loss"] == pytest.approx(full["history"][-1]["valid_loss"], rel=1e-5)
    a, b = (checkpoint_weights(tmp_path / r / "checkpoints" / "last.pt") for r in ("full", "split"))
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-6, msg=k)


@pytest.mark.parametrize("compiled", [False, True])
def test_search_on_the_gpu_agrees_with_the_cpu(make_model, random_sources, ieee_fp32, compiled):
    """Greedy and beam search (also with coverage and n-best) give the CPU's hypotheses on the
    same weights, with the eager and the compiled step; the GPU syncs every 8 steps."""
    cpu = make_model(30, 25, mode="local_p", window=2, seed=3, decoder_layers=2, init_range=0.5)
    gpu = make_model(30, 25, mode="local_p", window=2, seed=3, decoder_layers=2, init_range=0.5,
                     compile_step=compiled).to(CUDA)
    gpu.load_state_dict(cpu.state_dict())
    batch = make_batch(random_sources(16, 1, 14, 30, seed=8), None, range(16))
    for kw in ({"beam": 1}, {"beam": 5}, {"beam": 4, "stop": "exact", "beta": 0.2, "n_best": 2}):
        ref, got = beam_search(cpu, batch, **kw), beam_search(gpu, batch.to(CUDA), **kw)
        assert got.tokens == ref.tokens, kw
        assert got.scores == pytest.approx(ref.scores, abs=1e-3), kw


def test_two_ddp_ranks_on_one_gpu_match_one_process(cli_env, tmp_path, explain):
    """torchrun, 2 ranks on one GPU (gloo: NCCL cannot share a device), DDP with device_ids set
    (so every tensor argument of forward moves to the GPU), against one process accumulating 2
    batches per update: the same weights after 12 updates."""
    base = [o for o in BASE if not o.startswith("trainer.device=")]
    common = [*base, "trainer.device=cuda", "trainer.precision=fp32", "trainer.compile=false", "trainer.max_steps=12",
              "trainer.valid_every=12", "trainer.log_every=4", "model.dropout=0.0"]
    env = {k: v for k, v in cli_env.items() if k != "CUDA_VISIBLE_DEVICES"}
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    proc = subprocess.run([sys.executable, "-m", "nmt.train", *common, "trainer.accum_steps=2",
                           f"hydra.run.dir={single}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, explain(proc)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port", "29527",
         "-m", "nmt.train", *common, f"hydra.run.dir={ddp}"],
        cwd=REPO, env=dict(env, NMT_DIST_BACKEND="gloo", OMP_NUM_THREADS="1"), capture_output=True, text=True,
        timeout=600,
    )
    assert proc.returncode == 0, explain(proc)
    a, b = checkpoint_weights(single / "checkpoints" / "last.pt"), checkpoint_weights(ddp / "checkpoints" / "last.pt")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-3, atol=1e-4, msg=k)


def test_a_gpu_checkpoint_loads_decodes_and_resumes_on_the_cpu(digits_dir, tmp_path, ieee_fp32):
    run = tmp_path / "gpu"
    train(gpu_cfg(digits_dir, max_steps=10, valid_every=10), run)
    model, _, _, _ = checkpoint.load_model(run / "checkpoints" / "best.pt", "cpu")
    assert all(p.device.type == "cpu" for p in model.parameters())
    on_gpu, _, _, _ = checkpoint.load_model(run / "checkpoints" / "best.pt", CUDA)
    batch = make_batch([[5, 6, 7, 8], [9, 10], [11, 12, 13]], None, range(3))
    assert beam_search(model, batch, beam=3).tokens == beam_search(on_gpu, batch.to(CUDA), beam=3).tokens
    cpu_cfg = digits_cfg(digits_dir, device="cpu", max_steps=12, valid_every=12, test_beam=0, resume=str(run))
    assert train(cpu_cfg, tmp_path / "cpu")["steps"] == 12
