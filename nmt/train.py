"""Train a model: ``python -m nmt.train +experiment=zh_en_local_p [key=value ...]``.

The run directory (Hydra's output dir) receives the resolved config, ``run_info.json``
(version, git commit), the sentencepiece models, ``checkpoints/{last,best}.pt``, TensorBoard
events and ``metrics.json``. ``trainer.resume=auto`` continues a stopped run exactly (same
losses on CPU); SIGTERM and Ctrl-C stop it gracefully after saving ``last.pt``. Under
``torchrun --nproc_per_node=N -m nmt.train ...`` it trains with DistributedDataParallel.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import hydra
import torch
import torch.nn.functional as F
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from nmt import __version__, checkpoint, compiled_step, distributed
from nmt.batching import Batch, epoch_batches, train_batches
from nmt.checkpoint import CheckpointError
from nmt.config import ConfigError, register, to_dict, validate
from nmt.data import DataError, src_normalizer
from nmt.device import autocast, set_threads
from nmt.evaluate import evaluate
from nmt.model import Seq2Seq, build_model
from nmt.optim import Schedule, build_optimizer, set_lr
from nmt.plot import PlotError, attention_figure, figure_array
from nmt.prepare import prepare
from nmt.tokenizer import PAD, Tokenizer
from nmt.translate import align

log = logging.getLogger("nmt.train")


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. repeated non-finite losses); the message says why."""


def encode_train(tok: Tokenizer, src: list[str], tgt: list[str], max_tokens: int) -> tuple[list, list]:
    """Piece ids of the training pairs, without pairs longer than ``max_tokens`` on either side."""
    s_ids, t_ids = tok.encode_src(src), tok.encode_tgt(tgt)
    keep = [i for i in range(len(s_ids)) if len(s_ids[i]) <= max_tokens and len(t_ids[i]) <= max_tokens]
    log.info("train: %d pairs, %d over %d pieces dropped", len(keep), len(s_ids) - len(keep), max_tokens)
    return [s_ids[i] for i in keep], [t_ids[i] for i in keep]


def batch_loss(model: Seq2Seq, batch: Batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy per target token; one output projection over all steps.

    The packing lengths go in as a tuple of ints: DistributedDataParallel(device_ids=[i]) moves
    every tensor argument to cuda:i, and packing needs them on the CPU.
    """
    host_lens = tuple(batch.host_lens.tolist())
    logits, _ = model(batch.src, batch.src_lens, host_lens, batch.tgt_in)  # (batch, tgt_len, vocab)
    return F.cross_entropy(
        logits.flatten(0, 1).float(), batch.tgt_out.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


@torch.no_grad()
def dev_loss(model: Seq2Seq, batches: list[Batch], device: torch.device, precision: str) -> float:
    model.eval()
    total = torch.zeros((), device=device)
    tokens = 0
    for b in batches:
        n = int((b.tgt_out != PAD).sum())
        with autocast(device, precision):
            total += batch_loss(model, b.to(device)) * n
        tokens += n
    model.train()
    return float(total) / max(tokens, 1)


class Budget:
    """Stops training at the first of max_steps, max_epochs, max_minutes; estimates the ETA."""

    def __init__(self, max_steps: int, max_epochs: int, max_minutes: float, steps_per_epoch: int):
        if not (max_steps or max_epochs or max_minutes):
            raise ConfigError("set at least one of trainer.max_steps, trainer.max_epochs, trainer.max_minutes")
        self.max_steps, self.max_epochs, self.max_seconds = max_steps, max_epochs, max_minutes * 60
        self.steps_per_epoch = steps_per_epoch
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def done(self, step: int, epoch: int) -> bool:
        return bool(
            (self.max_steps and step >= self.max_steps)
            or (self.max_epochs and epoch >= self.max_epochs)
            or (self.max_seconds and self.elapsed() >= self.max_seconds)
        )

    def progress(self, step: int, epoch_progress: float) -> float:
        """The fraction of the budget used (0..1): the largest over the limits that are set."""
        parts = [0.0]
        if self.max_steps:
            parts.append(step / self.max_steps)
        if self.max_epochs:
            parts.append(epoch_progress / self.max_epochs)
        if self.max_seconds:
            parts.append(self.elapsed() / self.max_seconds)
        return min(1.0, max(parts))

    def eta(self, step: int, steps_done_here: int) -> float:
        """Seconds left: the nearest of the limits, extrapolated from this process's pace."""
        pace = self.elapsed() / max(steps_done_here, 1)
        left = []
        if self.max_steps:
            left.append((self.max_steps - step) * pace)
        if self.max_epochs:
            left.append((self.max_epochs * self.steps_per_epoch - step) * pace)
        if self.max_seconds:
            left.append(self.max_seconds - self.elapsed())
        return max(0.0, min(left))


def _fmt_time(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _resume_state(resume: Optional[str], run_dir: Path) -> Optional[dict]:
    """The checkpoint to continue from: a path (file or run dir), or ``auto`` (this run's last.pt)."""
    if not resume:
        return None
    if resume == "auto":
        last = run_dir / "checkpoints" / "last.pt"
        if not last.exists():
            log.info("trainer.resume=auto: no %s yet, starting a new run", last)
            return None
        return checkpoint.load(last)
    p = Path(resume).expanduser()
    if p.is_dir() and (p / "checkpoints" / "last.pt").exists():
        p = p / "checkpoints" / "last.pt"
    return checkpoint.load(p)


def _merge_resumed_config(cfg: DictConfig, state: dict) -> DictConfig:
    """Model and tokenizer settings come from the checkpoint (they define the weights); the rest
    from the new config. Every difference is logged with the side that wins."""
    old, new = _flatten(state["config"]), _flatten(to_dict(cfg))
    for key in sorted(set(old) | set(new)):
        if key.startswith("trainer.resume") or old.get(key) == new.get(key):
            continue
        wins = "checkpoint" if key.split(".")[0] in ("model", "tokenizer") else "new config"
        log.info("resume: %s is %r in the checkpoint, %r now: the %s wins", key, old.get(key), new.get(key), wins)
    merged = cfg.copy()
    OmegaConf.set_struct(merged, False)
    merged.model = OmegaConf.merge(cfg.model, state["config"]["model"])
    merged.tokenizer = OmegaConf.merge(cfg.tokenizer, state["config"]["tokenizer"])
    OmegaConf.set_struct(merged, True)
    return merged


class _StopSignal:
    """SIGTERM or a first Ctrl-C ask for a graceful stop after the current update."""

    def __init__(self) -> None:
        self.requested = None
        self.old = {}

    def __enter__(self) -> _StopSignal:
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


def train(cfg: DictConfig, run_dir: Path) -> dict:
    """Train, validate and checkpoint under ``run_dir``; return the final metrics."""
    validate(cfg)
    tr = cfg.trainer
    rank, world_size, device = distributed.setup(tr.device)
    main = rank == 0
    if tr.precision == "fp16" and device.type != "cuda":
        raise ConfigError(f"trainer.precision=fp16 needs a CUDA device (this run is on {device}); use bf16 or fp32")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    set_threads(tr.threads or max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
    random.seed(tr.seed)
    torch.manual_seed(tr.seed)
    rng = random.Random(tr.seed)  # batch order
    log.info("nmt %s | run dir %s | device %s | %d threads | rank %d of %d", __version__, run_dir, device,
             torch.get_num_threads(), rank, world_size)

    # data, tokenizer, resume
    resumed = _resume_state(tr.resume, run_dir)
    if resumed is not None:
        cfg = _merge_resumed_config(cfg, resumed)
    if not main:  # rank 0 prepares the corpus and sentencepiece; the others read its cache
        distributed.barrier()
    prepared = prepare(cfg.data, cfg.tokenizer, seed=tr.seed,
                       tokenizer=Tokenizer.from_state(resumed["tokenizer"]) if resumed is not None else None)
    if main:
        distributed.barrier()
    ckpt_dir = run_dir / "checkpoints"
    if resumed is None and (ckpt_dir / "last.pt").exists():
        raise ConfigError(
            f"{run_dir} already holds checkpoints: continue it with trainer.resume=auto, or choose another hydra.run.dir"
        )
    tok, train_pairs, data_report = prepared.tokenizer, prepared.train, prepared.report
    log.info("vocabulary: %d source / %d target pieces | %d training pairs", tok.src_vocab_size,
             tok.tgt_vocab_size, len(train_pairs))
    dev = prepared.dev
    if tr.valid_max_sentences:
        dev = dev.select(range(min(tr.valid_max_sentences, len(dev))))
    dev_src, dev_tgt = list(dev["src"]), list(dev["tgt"])
    dev_batches = list(train_batches(tok.encode_src(dev_src), tok.encode_tgt(dev_tgt), tr.batch_tokens, random.Random(0)))
    normalize = src_normalizer(cfg.data)

    # model, optimizer, schedule
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %s parameters | attention %s/%s", f"{n_params:,}", cfg.model.attention.score, cfg.model.attention.mode)
    opt = build_optimizer(tr, model.parameters())
    schedule = Schedule(tr)
    scaler = torch.amp.GradScaler(device.type, enabled=tr.precision == "fp16")
    counters = {"step": 0, "epoch": 0, "best_bleu": -1.0, "best_loss": math.inf, "bad_validations": 0,
                "update_in_epoch": 0, "epoch_rng": None, "nonfinite_skipped": 0}
    if resumed is not None:
        model.load_state_dict(resumed["model"])
        if not tr.reset_optimizer:
            opt.load_state_dict(resumed["optimizer"])
            if resumed.get("scaler"):
                scaler.load_state_dict(resumed["scaler"])
        if not tr.reset_scheduler and resumed.get("schedule"):
            schedule.load_state_dict(resumed["schedule"])
        if not tr.reset_counters:
            counters.update(resumed["counters"])
            torch.set_rng_state(resumed["rng"]["torch"])
            if device.type == "cuda" and resumed["rng"].get("cuda") is not None:
                torch.cuda.set_rng_state(resumed["rng"]["cuda"], device)
        log.info("resumed at step %d (epoch %d, update %d of it) | reset: optimizer %s, scheduler %s, counters %s",
                 counters["step"], counters["epoch"] + 1, counters["update_in_epoch"], tr.reset_optimizer,
                 tr.reset_scheduler, tr.reset_counters)
    distributed.seed_rank(tr.seed, rank, counters["step"])  # one dropout mask per rank, not one for all
    if compiled_step.wanted(tr.compile, device, model.decoder):  # runs T times a batch: fusing its small ops pays
        compiled_step.compile_step(model.decoder)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None) if world_size > 1 else None
    net = ddp or model
    writer = SummaryWriter(str(run_dir / "tensorboard")) if main else None
    cfg_dict = to_dict(cfg)
    if main:
        tok.save(run_dir)
        for stale in ckpt_dir.glob(".*.tmp*"):  # left by a process killed while writing
            stale.unlink()
        info = {"version": __version__, "git_commit": _git_commit(), "torch": torch.__version__,
                "argv": sys.argv, "world_size": world_size, "device": str(device)}
        (run_dir / "run_info.json").write_text(json.dumps(info, indent=1))
        (run_dir / "data_report.json").write_text(json.dumps(data_report, indent=1))

    def state() -> dict:
        return {
            "model": model.state_dict(), "config": cfg_dict, "tokenizer": tok.to_state(),
            "optimizer": opt.state_dict(), "schedule": schedule.state_dict(), "scaler": scaler.state_dict(),
            "counters": dict(counters), "version": __version__,
            "rng": {"torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None},
            # kept for readers of older checkpoints
            "step": counters["step"], "epoch": counters["epoch"], "best_bleu": counters["best_bleu"],
        }

    history: list[dict] = []

    def validate_now() -> bool:
        """Dev loss and BLEU, checkpoints, schedule and early stopping; True = stop training."""
        t0 = time.perf_counter()
        step = counters["step"]
        loss = dev_loss(model, dev_batches, device, tr.precision)
        with autocast(device, tr.precision):
            scores, hyps = evaluate(
                model, tok, normalize, dev_src, [dev_tgt], cfg.data.tgt_lang, beam=tr.valid_beam, device=device
            )
        record = {"step": step, "epoch": counters["epoch"], "valid_loss": loss, "valid_ppl": math.exp(min(loss, 50)),
                  "valid_bleu": scores.bleu, "valid_chrf": scores.chrf}
        history.append(record)
        for k in ("loss", "ppl", "bleu", "chrf"):
            writer.add_scalar(f"valid/{k}", record[f"valid_{k}"], step)
        improved = scores.bleu > counters["best_bleu"]
        counters["best_bleu"] = max(counters["best_bleu"], scores.bleu)
        better = improved if tr.early_stopping_metric == "bleu" else loss < counters["best_loss"]
        counters["best_loss"] = min(counters["best_loss"], loss)
        counters["bad_validations"] = 0 if better else counters["bad_validations"] + 1
        schedule.on_validation(scores.bleu)
        s = state()
        checkpoint.save(s, ckpt_dir / "last.pt")
        if improved:
            checkpoint.save(s, ckpt_dir / "best.pt")
            if tr.keep_best > 1:
                checkpoint.save(s, ckpt_dir / f"best_step{step:08d}.pt")
                ranked = sorted(ckpt_dir.glob("best_step*.pt"), key=lambda p: checkpoint.load(p)["best_bleu"])
                for old in ranked[: -(tr.keep_best - 1)]:
                    old.unlink()
        if tr.keep_last:
            checkpoint.save(s, ckpt_dir / f"step{step:08d}.pt")
            for old in sorted(ckpt_dir.glob("step*.pt"))[: -tr.keep_last]:
                old.unlink()
        log.info(
            "valid step %d | loss %.3f | ppl %.2f | BLEU %.2f | chrF %.2f%s | %.1fs | e.g. %r",
            step, loss, record["valid_ppl"], scores.bleu, scores.chrf, " | new best" if improved else "",
            time.perf_counter() - t0, hyps[0] if hyps else "",
        )
        attention_images(step, hyps)
        patience = tr.early_stopping_patience
        if patience and counters["bad_validations"] >= patience:
            log.info("early stopping: no better dev %s in %d validations", tr.early_stopping_metric, patience)
            return True
        return False

    images = {"on": tr.attention_images > 0}

    def attention_images(step: int, hyps: list[str]) -> None:
        """Heatmaps of the first few dev sentences (with p_t and the window for local modes)."""
        if not images["on"]:
            return
        try:
            for i in range(min(tr.attention_images, len(dev_src))):
                if not hyps[i]:
                    continue
                w, centres, src_pieces, tgt_pieces = align(model, tok, normalize(dev_src[i]), hyps[i], device)
                window = cfg.model.attention.window if centres is not None else None
                fig = attention_figure(w, src_pieces, tgt_pieces, centres, window, title=f"step {step}")
                writer.add_image(f"attention/dev{i}", figure_array(fig), step, dataformats="HWC")
        except PlotError as e:
            log.warning("no attention images in TensorBoard: %s", e)
            images["on"] = False

    # the loop
    max_sents = tr.batch_sentences or 100_000
    per_update = world_size * tr.accum_steps  # batches of the epoch list consumed by one update
    n_batches = len(epoch_batches(train_pairs, tr.batch_tokens, random.Random(0), max_sents))
    updates_per_epoch = max(1, n_batches // per_update)
    budget = Budget(tr.max_steps, tr.max_epochs, tr.max_minutes, updates_per_epoch)
    log.info("training: %d updates per epoch (%d batch(es) each), budget %s", updates_per_epoch, per_update,
             {k: tr[k] for k in ("max_steps", "max_epochs", "max_minutes") if tr[k]})
    model.train()
    loss_sum = torch.zeros((), device=device)
    window = [0, 0, 0]  # source tokens, target tokens, micro-batches since the last log line
    total_tgt_tokens, steps_here, start_step = 0, 0, counters["step"]
    t_log = time.perf_counter()
    stop_reason = None
    with _StopSignal() as stop:
        while stop_reason is None and not budget.done(counters["step"], counters["epoch"]):
            if counters["update_in_epoch"] == 0 or counters["epoch_rng"] is None:
                counters["epoch_rng"], counters["update_in_epoch"] = rng.getstate(), 0
            else:  # resuming inside an epoch: rebuild its batch order, then skip what was done
                rng.setstate(counters["epoch_rng"])
            batches = epoch_batches(train_pairs, tr.batch_tokens, rng, max_sents)
            n_updates = len(batches) // per_update
            if n_updates == 0:
                raise DataError(f"{len(batches)} training batches cannot make one update of {per_update} "
                                "(trainer.accum_steps × processes): lower trainer.batch_tokens")
            for u in range(counters["update_in_epoch"], n_updates):
                mine = [batches[u * per_update + k * world_size + rank] for k in range(tr.accum_steps)]
                for k, batch in enumerate(mine):
                    window[0] += int(batch.host_lens.sum())
                    n_tgt = int((batch.tgt_out != PAD).sum())
                    window[1] += n_tgt
                    total_tgt_tokens += n_tgt
                    sync = ddp.no_sync() if ddp is not None and k < len(mine) - 1 else contextlib.nullcontext()
                    with sync, autocast(device, tr.precision):
                        loss = batch_loss(net, batch.to(device), tr.label_smoothing)
                    with sync:
                        scaler.scale(loss / tr.accum_steps).backward()
                    loss_sum += loss.detach()
                    window[2] += 1
                scaler.unscale_(opt)
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), tr.clip_norm or math.inf)
                counters["update_in_epoch"] = u + 1
                # one host sync per update: a non-finite loss or gradient must not reach the weights
                if not bool(torch.isfinite(norm)):
                    opt.zero_grad(set_to_none=True)
                    scaler.update()
                    counters["nonfinite_skipped"] += 1
                    log.warning("non-finite loss or gradient at step %d: update skipped (%d in a row)",
                                counters["step"] + 1, counters["nonfinite_skipped"])
                    if counters["nonfinite_skipped"] >= tr.max_nonfinite:
                        raise TrainingError(
                            f"{tr.max_nonfinite} non-finite updates in a row at step {counters['step']}: stopping "
                            "(lower trainer.lr, use trainer.precision=bf16 or fp32, or check the data)"
                        )
                    continue
                counters["nonfinite_skipped"] = 0
                progress = budget.progress(counters["step"], counters["epoch"] + (u + 1) / n_updates)
                set_lr(opt, schedule.lr(counters["step"] + 1, counters["epoch"], progress))
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
                counters["step"] += 1
                steps_here += 1
                step = counters["step"]
                if main and step % tr.log_every == 0:
                    dt = time.perf_counter() - t_log
                    mean = float(loss_sum) / max(window[2], 1)
                    src_tps, tgt_tps = window[0] * world_size / dt, window[1] * world_size / dt
                    lr = opt.param_groups[0]["lr"]
                    for k, v in (("loss", mean), ("ppl", math.exp(min(mean, 50))), ("lr", lr),
                                 ("src_tok_per_s", src_tps), ("tgt_tok_per_s", tgt_tps)):
                        writer.add_scalar(f"train/{k}", v, step)
                    log.info("step %d | epoch %d | loss %.3f | ppl %.1f | lr %.3g | %.0f src + %.0f tgt tok/s | ETA %s",
                             step, counters["epoch"] + 1, mean, math.exp(min(mean, 50)), lr, src_tps, tgt_tps,
                             _fmt_time(budget.eta(step, steps_here)))
                if step % tr.log_every == 0:
                    loss_sum.zero_()
                    window = [0, 0, 0]
                    t_log = time.perf_counter()
                if step % tr.valid_every == 0:
                    t_valid = time.perf_counter()
                    early = validate_now() if main else False
                    distributed.barrier()
                    if distributed.any_true(early, device):
                        stop_reason = "early stopping"
                    t_log += time.perf_counter() - t_valid  # validation time is not training time
                elif main and tr.save_every and step % tr.save_every == 0:
                    checkpoint.save(state(), ckpt_dir / "last.pt")
                if distributed.any_true(stop.requested is not None, device):
                    stop_reason = f"{stop.requested or 'a stop signal (on another rank)'} received"
                if stop_reason or distributed.any_true(budget.done(step, counters["epoch"]), device):
                    break
            else:
                counters["epoch"] += 1
                counters["update_in_epoch"] = 0
    train_seconds = budget.elapsed()
    if stop_reason and "received" in stop_reason:
        if main:
            checkpoint.save(state(), ckpt_dir / "last.pt")
            log.warning("%s at step %d: saved checkpoints/last.pt; continue with trainer.resume=auto",
                        stop_reason, counters["step"])
            writer.close()
        distributed.cleanup()
        raise SystemExit(143 if "SIGTERM" in stop_reason else 130)
    if main and (not history or history[-1]["step"] != counters["step"]) and counters["step"] > start_step:
        validate_now()
    elif main and not (ckpt_dir / "last.pt").exists():
        validate_now()
    distributed.barrier()

    # final: best weights on the test split
    metrics = {
        "steps": counters["step"], "epochs": counters["epoch"], "train_seconds": train_seconds,
        "parameters": n_params, "train_tgt_tok_per_s": total_tgt_tokens * world_size / max(train_seconds, 1e-9),
        "peak_memory_mb": peak_memory_mb(device), "best_valid_bleu": counters["best_bleu"], "history": history,
        "stopped_by": stop_reason or "budget",
    }
    if main and tr.valid_max_sentences and len(prepared.dev) > len(dev_src):  # the full dev split, once
        best_model, _, _, _ = checkpoint.load_model(ckpt_dir / "best.pt", device)
        full = prepared.dev
        scores, _ = evaluate(best_model, tok, normalize, list(full["src"]), [list(full["tgt"])], cfg.data.tgt_lang,
                             beam=tr.valid_beam, device=device)
        metrics.update(full_dev_bleu=scores.bleu, full_dev_chrf=scores.chrf)
        writer.add_scalar("valid/full_dev_bleu", scores.bleu, counters["step"])
        log.info("full dev split (%d sentences, best checkpoint): BLEU %.2f | chrF %.2f", len(full), scores.bleu,
                 scores.chrf)
    test = prepared.test
    if main and test is not None and len(test) and tr.test_beam:
        best_model, _, _, _ = checkpoint.load_model(ckpt_dir / "best.pt", device)
        scores, _ = evaluate(best_model, tok, normalize, list(test["src"]), [list(test["tgt"])],
                             cfg.data.tgt_lang, beam=tr.test_beam, device=device)
        metrics.update(test_bleu=scores.bleu, test_chrf=scores.chrf, test_beam=tr.test_beam,
                       bleu_signature=scores.bleu_signature, chrf_signature=scores.chrf_signature)
        writer.add_scalar("test/bleu", scores.bleu, counters["step"])
        writer.add_scalar("test/chrf", scores.chrf, counters["step"])
        log.info("test (best checkpoint, beam %d): BLEU %.2f | chrF %.2f | %s",
                 tr.test_beam, scores.bleu, scores.chrf, scores.bleu_signature)
    if main:
        _write_hparams(writer, cfg_dict, metrics)
        writer.close()
        (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
        log.info("done: %d steps in %s | %.0f tgt tok/s | peak memory %.0f MB | best dev BLEU %.2f",
                 counters["step"], _fmt_time(train_seconds), metrics["train_tgt_tok_per_s"],
                 metrics["peak_memory_mb"], counters["best_bleu"])
    distributed.cleanup()
    return metrics


def _write_hparams(writer: SummaryWriter, cfg_dict: dict, metrics: dict) -> None:
    """The run's settings and final scores for TensorBoard's HPARAMS tab (compare a sweep's runs)."""
    best = max(metrics["history"], key=lambda r: r["valid_bleu"], default={})
    scores = {"hparams/dev_bleu": metrics["best_valid_bleu"], "hparams/dev_chrf": best.get("valid_chrf", 0.0),
              "hparams/dev_ppl": best.get("valid_ppl", 0.0), "hparams/steps": metrics["steps"],
              "hparams/tgt_tok_per_s": metrics["train_tgt_tok_per_s"]}
    scores.update({f"hparams/{k}": metrics[k] for k in ("test_bleu", "test_chrf") if k in metrics})
    params = {k: v if isinstance(v, (int, float, str, bool)) else str(v)
              for k, v in _flatten(cfg_dict).items() if not k.startswith("trainer.resume")}
    for summary in hparams(params, scores):  # into this run's events file (add_hparams would open another)
        writer.file_writer.add_summary(summary, metrics["steps"])
    for k, v in scores.items():
        writer.add_scalar(k, v, metrics["steps"])


register()


@hydra.main(version_base="1.3", config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> Optional[float]:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        metrics = train(cfg, run_dir)
    except (ConfigError, DataError, CheckpointError, TrainingError, OmegaConfBaseException) as e:
        log.error("%s", e)
        print(f"nmt.train: error: {e}", file=sys.stderr)
        sys.exit(1)
    return metrics.get("best_valid_bleu")


if __name__ == "__main__":
    main()
