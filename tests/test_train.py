"""In-process training: the loss, learning a synthetic task, every attention variant, ``train()``."""

from __future__ import annotations

import itertools
import json
import math
import random
import shutil
from pathlib import Path

import pytest
import torch
from helpers import digit_strings, digits_cfg
from omegaconf import OmegaConf

from nmt import checkpoint
from nmt.batching import make_batch, train_batches
from nmt.build import build_model
from nmt.config import ConfigError, ModelConfig
from nmt.data.text import DataError
from nmt.search import greedy
from nmt.train import train
from nmt.update import batch_loss


# --------------------------------------------------------------------------- the loss
def test_batch_loss_is_a_per_token_mean_that_ignores_padding(make_model, random_sources):
    """The batch loss equals the token-weighted mean of each sentence's loss computed alone."""
    model = make_model(20, 15, mode="local_p", window=2)
    src, tgt = random_sources(3, 2, 9, 20, seed=1), random_sources(3, 1, 6, 15, seed=2)
    with torch.no_grad():
        together = batch_loss(model, make_batch(src, tgt, range(3)))
        alone = [batch_loss(model, make_batch([s], [t], [0])) for s, t in zip(src, tgt)]
        smoothed = batch_loss(model, make_batch(src, tgt, range(3)), label_smoothing=0.1)
    weights = [len(t) + 1 for t in tgt]  # + EOS
    expected = sum(w * float(a) for w, a in zip(weights, alone)) / sum(weights)
    assert float(together) == pytest.approx(expected, rel=1e-5)
    assert torch.isfinite(smoothed) and float(smoothed) != pytest.approx(float(together))


# --------------------------------------------------------------------------- learning
# steps: local_p learns it last (74 % at 300 steps, 71-99 % at 400 by thread count, 98-100 % from 500 on)
@pytest.mark.parametrize("mode,input_feeding,steps", [("global", True, 300), ("local_p", True, 600), ("global", False, 400)])
def test_learns_to_reverse_digit_strings(mode, input_feeding, steps):
    """A few hundred Adam steps teach a 32-unit model to reverse unseen digit strings of 3-8 digits
    (greedy decoding, exact match), with and without input feeding."""
    torch.manual_seed(0)
    cfg = OmegaConf.structured(ModelConfig(emb_size=32, hidden_size=32, encoder_layers=1, decoder_layers=1,
                                           dropout=0.0, input_feeding=input_feeding))
    cfg.attention.mode, cfg.attention.window = mode, 5
    model = build_model(cfg, 14, 14)
    pool = digit_strings(3000, seed=1)
    seen = {tuple(s) for s in pool}
    held_out = [s for s in digit_strings(200, seed=99) if tuple(s) not in seen][:100]
    assert len(held_out) == 100
    train_src = pool
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    rng, step = random.Random(1), 0
    while step < steps:
        for b in train_batches(train_src, [s[::-1] for s in train_src], 400, rng):
            loss = batch_loss(model, b)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            step += 1
            if step == steps:
                break
    model.eval()
    hyps = greedy(model, make_batch(held_out, None, range(len(held_out))))
    accuracy = sum(h == s[::-1] for h, s in zip(hyps.tokens, held_out)) / len(held_out)
    assert accuracy >= 0.8, f"{mode}: only {accuracy:.0%} of held-out strings reversed"


@pytest.mark.parametrize("score,mode", list(itertools.product(["dot", "general", "concat"],
                                                              ["global", "local_m", "local_p"])))
def test_every_attention_variant_trains(make_model, score, mode):
    """15 Adam steps on one fixed batch of 4 pairs cut the loss by over a quarter, for each
    score × mode (a model that ignored the source could not get far below ln(11) ≈ 2.4 from 2.64)."""
    model = make_model(14, 14, score=score, mode=mode, window=3, seed=3, train=True)
    src = digit_strings(4, seed=4)
    batch = make_batch(src, [s[::-1] for s in src], range(4))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(15):
        loss = batch_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < 0.75 * losses[0], losses


def test_training_forward_survives_ddp_moving_its_tensor_arguments(make_model, random_sources):
    """DistributedDataParallel(device_ids=[i]) moves every tensor argument of forward to cuda:i;
    packing needs its lengths on the CPU. Emulated with DDP's own input mover aimed at 'meta':
    whatever packing needs must come through it unmoved, and the forward must run on it."""
    from torch.distributed.utils import _to_kwargs

    model = make_model(train=True)
    src = random_sources(5, 1, 9, 19, seed=2)
    batch = make_batch(src, [s[::-1] for s in src], range(5))
    seen = {}

    class MovesLikeDDP(torch.nn.Module):
        def forward(self, *args, **kwargs):
            (moved,), _ = _to_kwargs(args, {}, torch.device("meta"), False)
            seen["moved"] = moved
            kept = [a if isinstance(m, torch.Tensor) else m for a, m in zip(args, moved)]  # meta holds no data
            return model(*kept, **kwargs)

    loss = batch_loss(MovesLikeDDP(), batch)
    assert all(m.device.type == "meta" for m in seen["moved"] if isinstance(m, torch.Tensor))
    assert list(seen["moved"][2]) == batch.host_lens.tolist()  # the packing lengths: not a tensor, not moved
    torch.testing.assert_close(loss, batch_loss(model, batch))


# --------------------------------------------------------------------------- train()  (digits_dir: conftest.py)
@pytest.fixture(scope="module")
def digits_run(digits_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("digits_run")
    # 200 steps learn the task for most batch orders, not all (seed 42 reached BLEU 21); 300 do for every seed tried
    metrics = train(digits_cfg(digits_dir, max_steps=300, valid_every=150), run)
    return run, metrics


def test_train_learns_and_reports(digits_run):
    """``train()`` on a files corpus learns the task: dev and test BLEU near 100, a validation
    every valid_every steps, and metrics.json mirroring the returned metrics."""
    run, metrics = digits_run
    assert metrics["steps"] == 300
    assert [h["step"] for h in metrics["history"]] == [150, 300]
    assert metrics["history"][-1]["valid_loss"] < metrics["history"][0]["valid_loss"]
    assert metrics["best_valid_bleu"] >= 80 and metrics["test_bleu"] >= 80
    assert metrics["test_beam"] == 2 and metrics["bleu_signature"].startswith("nrefs:1|")
    assert json.loads((run / "metrics.json").read_text()) == json.loads(json.dumps(metrics))


def test_train_writes_self_contained_checkpoints(digits_run, digits_dir):
    """best.pt holds the best validation step and translates on its own."""
    run, metrics = digits_run
    best_step = max(metrics["history"], key=lambda h: h["valid_bleu"])["step"]
    state = checkpoint.load(run / "checkpoints" / "best.pt")
    assert state["step"] == best_step and state["best_bleu"] == pytest.approx(metrics["best_valid_bleu"])
    assert checkpoint.load(run / "checkpoints" / "last.pt")["step"] == 300
    names = {p.name for p in run.iterdir()}
    assert {"metrics.json", "checkpoints", "tensorboard"} <= names
    # both sides have the same ten words, so the two models are identical and saved as one
    assert "spm.joint.model" in names or {"spm.src.model", "spm.tgt.model"} <= names
    model, tok, cfg, _ = checkpoint.load_model(run)
    ids = tok.encode_src(["1 2 3 4 5"])
    hyps = greedy(model, make_batch(ids, None, [0]))
    assert tok.decode_tgt(hyps.tokens[0]) == "5 4 3 2 1"


def test_train_is_deterministic(digits_dir, tmp_path):
    """Same config and seed, same weights."""
    weights = []
    for name in ("a", "b"):
        train(digits_cfg(digits_dir, max_steps=12, valid_every=6, test_beam=0), tmp_path / name)
        weights.append(checkpoint.load(tmp_path / name / "checkpoints" / "last.pt")["model"])
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def snapshot(run: Path) -> dict:
    return {str(p.relative_to(run)): (p.read_bytes(), p.stat().st_mtime_ns) for p in run.rglob("*") if p.is_file()}


@pytest.mark.parametrize("problem", ["misaligned data", "no budget"])
def test_a_failed_start_leaves_an_existing_run_untouched(digits_run, digits_dir, tmp_path, problem):
    """Starting again in a finished run's directory with a bad setup fails with a clear error and
    changes nothing there: no checkpoint, tokenizer file or event log is replaced or added."""
    run = tmp_path / "run"
    shutil.copytree(digits_run[0], run)
    before = snapshot(run)
    if problem == "misaligned data":
        bad = tmp_path / "bad"
        shutil.copytree(digits_dir, bad)
        (bad / "dev.en").write_text("1 2\n")
        cfg, error = digits_cfg(bad, max_steps=5), DataError
    else:
        cfg, error = digits_cfg(digits_dir, max_steps=0, max_epochs=0, max_minutes=0.0), ConfigError
    with pytest.raises(error):
        train(cfg, run)
    after = snapshot(run)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"files added or rewritten by the failed start: {changed}"


def test_training_pairs_all_over_max_tokens_is_an_error(digits_dir, tmp_path):
    """If data.max_tokens drops every training pair the run fails at once with a DataError naming
    data.max_tokens, instead of an epoch loop without batches that never takes a step (with only
    max_steps set it would spin forever; max_minutes=0.05 here is a safety net so the test ends)."""
    cfg = digits_cfg(digits_dir, max_steps=5, max_minutes=0.05, valid_every=5, test_beam=0)
    cfg.data.max_tokens = 2  # every string has 3..7 digits
    with pytest.raises(DataError, match="max_tokens"):
        train(cfg, tmp_path / "run")


# --------------------------------------------------------------------------- early stopping, non-finite
def test_early_stopping_on_dev_loss(digits_dir, tmp_path):
    """With a learning rate too small to change anything, the dev loss stops improving and the
    run ends after `patience` validations, well before max_steps."""
    cfg = digits_cfg(digits_dir, max_steps=1000, valid_every=5, test_beam=0, lr=1e-12,
                     early_stopping_patience=2, early_stopping_metric="loss")
    metrics = train(cfg, tmp_path / "run")
    assert metrics["stopped_by"] == "early stopping"
    assert metrics["steps"] <= 15


def test_non_finite_updates_are_skipped_then_stop_the_run(digits_dir, tmp_path, monkeypatch):
    """A NaN loss never reaches the weights: the update is skipped and counted; after
    max_nonfinite in a row the run stops with a clear error, the last good checkpoint intact."""
    import nmt.update as t
    from nmt.update import TrainingError

    real = t.batch_loss
    calls = {"n": 0}

    def sometimes_nan(model, batch, label_smoothing=0.0, precision="fp32"):
        loss = real(model, batch, label_smoothing, precision)
        if not model.training:  # dev loss: untouched
            return loss
        calls["n"] += 1
        return loss * float("nan") if calls["n"] > 6 else loss

    monkeypatch.setattr(t, "batch_loss", sometimes_nan)
    cfg = digits_cfg(digits_dir, max_steps=50, valid_every=3, test_beam=0, max_nonfinite=4)
    with pytest.raises(TrainingError, match="4 non-finite updates in a row"):
        train(cfg, tmp_path / "run")
    state = checkpoint.load(tmp_path / "run" / "checkpoints" / "last.pt")
    assert state["counters"]["step"] == 6
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())


def test_bf16_trains_on_cpu_and_fp16_is_refused_there(digits_dir, tmp_path):
    """bf16 autocast (where this CPU's oneDNN trains bf16 LSTMs: avx512_bf16 or AMX), and bf16 at the output
    projection only (on any CPU), train with finite, falling losses; fp16 (oneDNN has no fp16 LSTM on CPU), and
    bf16 on a CPU that cannot train it, are clear errors before anything is written."""
    from nmt.device import cpu_trains_bf16_rnns

    if not cpu_trains_bf16_rnns():
        with pytest.raises(ConfigError, match="lacks oneDNN's bf16 LSTM training primitive"):
            train(digits_cfg(digits_dir, max_steps=4, precision="bf16"), tmp_path / "rb")
        assert not (tmp_path / "rb").exists()
    for p in ("bf16", "bf16_output") if cpu_trains_bf16_rnns() else ("bf16_output",):
        metrics = train(digits_cfg(digits_dir, max_steps=40, valid_every=20, test_beam=0, precision=p), tmp_path / p)
        losses = [h["valid_loss"] for h in metrics["history"]]
        assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0] and metrics["precision"] == p
    with pytest.raises(ConfigError, match="fp16 needs a CUDA device"):
        train(digits_cfg(digits_dir, max_steps=4, precision="fp16"), tmp_path / "r16")
    assert not (tmp_path / "r16").exists()


def test_auto_precision_is_chosen_once_and_a_resumed_run_keeps_it(digits_dir, tmp_path, monkeypatch):
    """The precision auto measured goes into the checkpoint; resuming with auto does not measure again
    (another machine state could choose otherwise and change the run's numbers)."""
    from nmt import precision

    picks = iter(["bf16_output", "fp32"])
    monkeypatch.setattr(precision, "choose", lambda tr, *_: tr.precision if tr.precision != "auto" else next(picks))
    first = train(digits_cfg(digits_dir, max_steps=10, valid_every=10, test_beam=0), tmp_path / "r")
    assert first["precision"] == "bf16_output"
    assert checkpoint.load(tmp_path / "r" / "checkpoints" / "last.pt")["config"]["trainer"]["precision"] == "bf16_output"
    resumed = train(digits_cfg(digits_dir, max_steps=20, valid_every=10, test_beam=0, resume="auto"), tmp_path / "r")
    assert resumed["precision"] == "bf16_output" and resumed["steps"] == 20


def test_keep_best_and_last_and_full_dev_at_the_end(digits_dir, tmp_path):
    """keep_last=2 keeps the two newest step checkpoints, keep_best=2 the two last new bests (best.pt is the
    best); with a dev subsample for frequent validation, the whole dev split is scored once at the end."""
    from nmt import Translator
    from nmt.data.corpus import load_corpus

    run = tmp_path / "r"
    cfg = digits_cfg(digits_dir, max_steps=40, valid_every=4, test_beam=0, keep_last=2, keep_best=2, valid_max_sentences=10)
    metrics = train(cfg, run)
    ckpts = run / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("step*.pt")) == ["step00000036.pt", "step00000040.pt"]
    best, improved = -1.0, []  # the validations that beat every one before them (TrainingState.best_bleu starts at -1)
    for h in metrics["history"]:
        if h["valid_bleu"] > best:
            best, improved = h["valid_bleu"], [*improved, h]
    assert len(improved) >= 3, [h["valid_bleu"] for h in metrics["history"]]  # so that one was dropped
    two_best = sorted(improved, key=lambda h: h["valid_bleu"])[-2:]
    assert sorted(p.name for p in ckpts.glob("best_step*.pt")) == [f"best_step{h['step']:08d}.pt" for h in two_best]
    assert checkpoint.load(ckpts / "best.pt")["step"] == two_best[-1]["step"]
    dev = load_corpus(cfg.data, need=("dev",), splits=("dev",))["dev"]
    assert len(dev) > 10  # more than validation scored
    full = Translator.load(ckpts / "best.pt", "cpu").evaluate(list(dev["src"]), [list(dev["tgt"])], beam=cfg.trainer.valid_beam)
    assert metrics["full_dev_bleu"] == pytest.approx(full.bleu)


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="torch.compile on CPU needs a C++ compiler")
def test_compiled_decoder_step_trains_like_eager(digits_dir, tmp_path):
    """trainer.compile=true (torch.compile of the decoder step) gives the eager run's dev loss."""
    losses = []
    for compiled in (False, True):
        metrics = train(digits_cfg(digits_dir, max_steps=20, valid_every=20, test_beam=0, compile=compiled),
                        tmp_path / f"run{compiled}")
        losses.append(metrics["history"][-1]["valid_loss"])
    assert losses[1] == pytest.approx(losses[0], rel=1e-3)


def test_cpu_training_never_touches_cuda_on_a_cuda_machine(digits_dir, tmp_path, cuda_untouchable, monkeypatch):
    """trainer.device=cpu where CUDA exists: no pinned memory, no CUDA context (on GPU 0), and
    trainer.compile's auto stays eager, as on any CPU."""
    monkeypatch.setattr(torch, "compile", lambda *a, **k: pytest.fail("auto compiled on the CPU"))
    metrics = train(digits_cfg(digits_dir, max_steps=4, valid_every=4, test_beam=0), tmp_path / "r")
    assert metrics["steps"] == 4


def test_a_failed_compile_falls_back_to_the_eager_step(digits_dir, tmp_path, monkeypatch, caplog):
    """Where torch.compile cannot build the step (no triton, no C++ compiler) training runs the
    eager step, to the same dev loss, after one warning."""
    from torch._dynamo.exc import BackendCompilerFailed

    def broken(fn, **kw):
        def call(*args):
            raise BackendCompilerFailed(fn, RuntimeError("Cannot find a working triton installation"), None)
        return call

    cfg = dict(max_steps=6, valid_every=6, test_beam=0)
    eager = train(digits_cfg(digits_dir, **cfg, compile=False), tmp_path / "eager")
    monkeypatch.setattr(torch, "compile", broken)
    fallback = train(digits_cfg(digits_dir, **cfg, compile=True), tmp_path / "fallback")
    assert fallback["history"][-1]["valid_loss"] == eager["history"][-1]["valid_loss"]
    warnings = [r for r in caplog.records if "running it eagerly" in r.getMessage()]
    assert len(warnings) == 1 and "triton" in warnings[0].getMessage()
