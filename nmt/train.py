"""Train a model: ``python -m nmt.train +experiment=zh_en_local_p [key=value ...]`` (under torchrun: DDP).

The run directory (Hydra's) receives the config, run files, ``checkpoints/``, TensorBoard events and
``metrics.json``; ``trainer.resume=auto`` continues a run stopped by SIGTERM or Ctrl-C exactly.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Optional

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from nmt import checkpoint, distributed, init_from, precision, sampling
from nmt.batching import Batch, Epoch, Pairs, epoch_batches, train_batches
from nmt.budget import Budget, StopSignal, fmt_time
from nmt.build import build_model
from nmt.config import ConfigError, register, to_dict
from nmt.config_check import validate
from nmt.data.prepare import Prepared, prepare
from nmt.data.text import DataError
from nmt.device import available_cores, cpu_trains_bf16_rnns, peak_memory_mb, set_threads
from nmt.optim import Schedule, build_optimizer
from nmt.run_folder import adopt_best, flatten, merge_resumed_config, restore, resume_state, write_run_files
from nmt.tokenizer import Tokenizer
from nmt.train_state import TrainingState
from nmt.translator import Translator
from nmt.update import TrainingError, Updater
from nmt.validation import Validator
from nmt.version import __version__

log = logging.getLogger("nmt.train")  # an entry module: __name__ would be "__main__"


def train(cfg: DictConfig, run_dir: Path) -> dict:
    """Train, validate and checkpoint under ``run_dir``; return the final metrics."""
    validate(cfg)
    tr, ckpt_dir = cfg.trainer, run_dir / "checkpoints"
    rank, world_size, device = setup(tr, run_dir)
    main, rng = rank == 0, random.Random(tr.seed)  # rng: batch order
    resumed = resume_state(tr.resume, run_dir)
    start = init_from.start_state(tr) if resumed is None else None  # a resumed fine-tuning run continues itself
    cfg = merge_resumed_config(cfg, resumed) if resumed is not None else init_from.adopt(cfg, start) if start else cfg
    prepared = prepare_data(cfg, resumed or start, main)
    if resumed is None and (ckpt_dir / "last.pt").exists():
        raise ConfigError(f"{run_dir} already holds checkpoints: continue it with trainer.resume=auto, "
                          "or choose another hydra.run.dir")
    dev = dev_set(prepared, tr)
    epoch0 = epoch_batches(prepared.train, tr.batch_tokens, random.Random(0), tr.batch_sentences or 100_000)
    per_update = world_size * tr.accum_steps  # batches of the epoch list consumed by one update
    up = build_updater(cfg, prepared, epoch0, resumed, rank, world_size, per_update, device, run_dir)
    if start is not None:  # every rank loads the same weights; the optimizer holds the parameters, not copies
        up.model.load_state_dict(start["model"])
    if main:
        write_run_files(run_dir, prepared.tokenizer, prepared.report, world_size, device)
        adopt_best(resumed, ckpt_dir)
    validator = Validator(cfg, up.model, prepared.tokenizer, dev, device, up.writer, ckpt_dir, up.schedule, up.snapshot)
    budget = up.budget = Budget(tr.max_steps, tr.max_epochs, tr.max_minutes, max(1, len(epoch0) // per_update),
                                up.state.train_seconds)  # ETA: updates per epoch
    log.info("training: %d updates per epoch (%d batch(es) each), budget %s%s", budget.steps_per_epoch, per_update,
             {k: tr[k] for k in ("max_steps", "max_epochs", "max_minutes") if tr[k]},
             f", {fmt_time(budget.used_before)} of training already used" if budget.used_before else "")
    pairs = sampling.training_pairs(prepared, cfg.tokenizer, cfg.data.max_tokens, tr.seed)  # subword regularization
    stop_reason = run_updates(up, validator, budget, pairs, rng, rank, device)
    budget.stop()
    train_seconds, seconds_here = budget.elapsed(), budget.here()
    if stop_reason and "received" in stop_reason:
        stop_now(up, ckpt_dir, stop_reason)
    state, history = up.state, validator.history
    if distributed.from_rank0(main and ((history[-1]["step"] if history else None) != state.step
                                        and state.step > up.first_step or not (ckpt_dir / "last.pt").exists())):
        validate_ranks(up, validator)  # the last step's scores and checkpoint
    metrics = {
        "steps": state.step, "epochs": state.epoch, "train_seconds": train_seconds,
        "parameters": sum(p.numel() for p in up.model.parameters()),
        "train_tgt_tok_per_s": up.total_tgt_tokens * world_size / max(seconds_here, 1e-9),
        "peak_memory_mb": peak_memory_mb(device), "best_valid_bleu": state.best_bleu, "history": history,
        "stopped_by": stop_reason or "budget", "precision": up.tr.precision,
    }
    if main:
        final_scores(cfg, prepared, validator, metrics, state.step)
        write_hparams(up.writer, to_dict(cfg), metrics)
        up.writer.close()
        (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
        log.info("done: %d steps in %s | %.0f tgt tok/s | peak memory %.0f MB | best dev BLEU %.2f", state.step,
                 fmt_time(train_seconds), metrics["train_tgt_tok_per_s"], metrics["peak_memory_mb"], state.best_bleu)
    distributed.cleanup()
    return metrics


def setup(tr: DictConfig, run_dir: Path) -> tuple[int, int, torch.device]:
    """Processes, device, threads and seeds: (rank, world size, device)."""
    rank, world_size, device = distributed.setup(tr.device)
    if tr.precision == "fp16" and device.type != "cuda":
        raise ConfigError(f"trainer.precision=fp16 needs a CUDA device (this run is on {device}); use bf16 or fp32")
    if tr.precision == "bf16" and device.type == "cpu" and not cpu_trains_bf16_rnns():
        raise ConfigError("trainer.precision=bf16: this CPU (neither avx512_bf16 nor AMX) lacks oneDNN's bf16 LSTM training "
                          "primitive and emulates bf16 matmuls; use fp32, bf16_output or auto")
    set_threads(tr.threads or max(1, available_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
    random.seed(tr.seed)
    torch.manual_seed(tr.seed)
    log.info("nmt %s | run dir %s | device %s | %d threads | rank %d of %d", __version__, run_dir, device,
             torch.get_num_threads(), rank, world_size)
    return rank, world_size, device


def prepare_data(cfg: DictConfig, resumed: Optional[dict], main: bool) -> Prepared:
    """Corpus and tokenizer (a resumed run keeps its own, trainer.init_from takes its checkpoint's); rank 0 prepares,
    the others read its cache."""
    if not main:
        distributed.barrier()
    tok = Tokenizer.from_state(resumed["tokenizer"]) if resumed is not None else None
    prepared = prepare(cfg.data, cfg.tokenizer, seed=cfg.trainer.seed, tokenizer=tok)
    if main:
        distributed.barrier()
    log.info("vocabulary: %d source / %d target pieces | %d training pairs", prepared.tokenizer.src_vocab_size,
             prepared.tokenizer.tgt_vocab_size, len(prepared.train))
    return prepared


def dev_set(prepared: Prepared, tr: DictConfig) -> tuple[list[str], list[str], list[Batch]]:
    """Sources, references and loss batches of the dev sentences validated during training."""
    dev = prepared.dev
    if tr.valid_max_sentences:
        dev = dev.select(range(min(tr.valid_max_sentences, len(dev))))
    src, tgt, tok = list(dev["src"]), list(dev["tgt"]), prepared.tokenizer
    return src, tgt, list(train_batches(tok.encode_src(src), tok.encode_tgt(tgt), tr.batch_tokens, random.Random(0)))


def build_updater(cfg: DictConfig, prepared: Prepared, epoch0: Epoch, resumed: Optional[dict], rank: int, world_size: int,
                  per_update: int, device: torch.device, run_dir: Path) -> Updater:
    """Model, optimizer, schedule, loss scaler and counters (from ``resumed`` if given); precision auto: timed on ``epoch0``."""
    tr, tok = cfg.trainer, prepared.tokenizer
    compile_step = bool(tr.compile)  # null is off: nmt/engine/compiled.py says why
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tr.engine, compile_step).to(device)
    if resumed is not None and tr.precision == "auto":  # a resumed run keeps the precision it measured
        tr.precision = resumed["config"]["trainer"]["precision"]
    timing = epoch0[:8] if tr.precision == "auto" else []
    tr.precision = distributed.from_rank0(precision.choose(tr, model, device, timing))  # resolved once, for all ranks
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %s parameters | attention %s/%s", f"{n_params:,}", cfg.model.attention.score, cfg.model.attention.mode)
    opt = build_optimizer(tr, model.parameters())
    schedule = Schedule(tr)
    scaler = torch.amp.GradScaler(device.type, enabled=tr.precision == "fp16")
    state = TrainingState(per_update=per_update)
    own_rng = resumed is not None and restore(resumed, tr, model, opt, schedule, scaler, state, rank, world_size, device)
    if not own_rng:
        distributed.seed_rank(tr.seed, rank, state.step)  # one dropout mask per rank, not one for all
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None) if world_size > 1 else None
    writer = SummaryWriter(str(run_dir / "tensorboard")) if rank == 0 else None
    return Updater(tr, model, ddp, opt, schedule, scaler, state, device, world_size, writer, to_dict(cfg), tok.to_state())


def run_updates(up: Updater, validator: Validator, budget: Budget, train_pairs: Pairs, rng: random.Random, rank: int,
                device: torch.device) -> Optional[str]:
    """Epochs of updates until the budget is spent; returns what else stopped them (None: the budget)."""
    tr, state, world_size = up.tr, up.state, up.world_size
    per_update, max_sents = world_size * tr.accum_steps, tr.batch_sentences or 100_000
    up.model.train()
    up.t_log = time.perf_counter()
    stop_reason = None
    budget.tick(device)
    with StopSignal() as stop:
        while stop_reason is None and not budget.done(state.step, state.epoch):
            if state.update_in_epoch == 0 or state.epoch_rng is None:
                state.epoch_rng, state.update_in_epoch = rng.getstate(), 0
            else:  # resuming inside an epoch: rebuild its batch order, then skip what was done
                rng.setstate(state.epoch_rng)
            batches = epoch_batches(train_pairs, tr.batch_tokens, rng, max_sents)
            n_updates = len(batches) // per_update
            if n_updates == 0:
                raise DataError(f"{len(batches)} training batches cannot make one update of {per_update} "
                                "(trainer.accum_steps × processes): lower trainer.batch_tokens")
            for u in range(state.update_in_epoch, n_updates):
                mine = [batches[u * per_update + k * world_size + rank] for k in range(tr.accum_steps)]
                if not up.update(mine, u, n_updates, budget):
                    continue
                budget.tick(device)  # the clock every rank reads until the next update
                stop_reason = after_update(up, validator, budget, stop, device)
                if stop_reason or budget.done(state.step, state.epoch):  # the same on every rank
                    break
            else:
                state.epoch, state.update_in_epoch = state.epoch + 1, 0
    return stop_reason


def after_update(up: Updater, validator: Validator, budget: Budget, stop: StopSignal, device: torch.device) -> Optional[str]:
    """Log, validate or save as the step asks; a reason to stop (early stopping, a signal) or None."""
    tr, step, main = up.tr, up.state.step, up.writer is not None
    up.log(budget)
    reason = None
    if step % tr.valid_every == 0:
        t_valid = time.perf_counter()
        reason = "early stopping" if validate_ranks(up, validator) else None
        up.t_log += time.perf_counter() - t_valid  # validation time is not in the log's throughput
    elif tr.save_every and step % tr.save_every == 0:
        up.sync_for_checkpoint()
        if main:
            checkpoint.save(up.snapshot(), validator.ckpt_dir / "last.pt")
    if distributed.any_true(stop.requested is not None, device):
        reason = f"{stop.requested or 'a stop signal (on another rank)'} received"
    return reason


def validate_ranks(up: Updater, validator: Validator) -> bool:
    """Rank 0 validates and writes the checkpoints; every rank takes its outcome (the schedule's plateau state,
    the counters, early stopping), so the ranks decide as one. True: stop early."""
    up.sync_for_checkpoint()
    early = validator(up.state) if up.writer is not None else False
    distributed.barrier()  # rank 0 may validate for long: wait without the default group's timeout
    early, schedule, counters = distributed.from_rank0((early, up.schedule.state_dict(), up.state.state_dict()))
    up.schedule.load_state_dict(schedule)
    up.state.load_state_dict(counters)
    return early


def stop_now(up: Updater, ckpt_dir: Path, reason: str) -> None:
    """After SIGTERM or Ctrl-C: save ``last.pt`` and exit (143 or 130) so that the run can resume."""
    up.sync_for_checkpoint()
    if up.writer is not None:
        checkpoint.save(up.snapshot(), ckpt_dir / "last.pt")
        log.warning("%s at step %d: saved checkpoints/last.pt; continue with trainer.resume=auto", reason, up.state.step)
        up.writer.close()
    distributed.cleanup()
    raise SystemExit(143 if "SIGTERM" in reason else 130)


def final_scores(cfg: DictConfig, prepared: Prepared, validator: Validator, metrics: dict, step: int) -> None:
    """The best checkpoint on the full dev split (if validation used part of it) and on the test split."""
    tr, writer = cfg.trainer, validator.writer
    sets: dict = {}
    if tr.valid_max_sentences and len(prepared.dev) > len(validator.dev_src):  # the full dev split, once
        sets["full_dev"] = (prepared.dev, tr.valid_beam)
    if prepared.test is not None and len(prepared.test) and tr.test_beam:
        sets["test"] = (prepared.test, tr.test_beam)
    best = checkpoint.load_model(validator.ckpt_dir / "best.pt", validator.device)[0] if sets else None
    for name, (split, beam) in sets.items():
        scores = Translator(best, validator.tok, cfg, validator.device).evaluate(list(split["src"]), [list(split["tgt"])],
                                                                                  beam=beam)
        metrics.update({f"{name}_bleu": scores.bleu, f"{name}_chrf": scores.chrf})
        for k in ("bleu", "chrf"):
            writer.add_scalar(f"test/{k}" if name == "test" else f"valid/full_dev_{k}", getattr(scores, k), step)
        if name == "test":
            metrics.update(test_beam=beam, bleu_signature=scores.bleu_signature, chrf_signature=scores.chrf_signature)
        log.info("%s split (%d sentences, best checkpoint, beam %d): BLEU %.2f | chrF %.2f | %s", name.replace("_", " "),
                 len(split), beam, scores.bleu, scores.chrf, scores.bleu_signature)


def write_hparams(writer: SummaryWriter, cfg_dict: dict, metrics: dict) -> None:
    """The run's settings and final scores for TensorBoard's HPARAMS tab (compare a sweep's runs)."""
    best = max(metrics["history"], key=lambda r: r["valid_bleu"], default={})
    scores = {"hparams/dev_bleu": metrics["best_valid_bleu"], "hparams/dev_chrf": best.get("valid_chrf", 0.0),
              "hparams/dev_ppl": best.get("valid_ppl", 0.0), "hparams/steps": metrics["steps"],
              "hparams/tgt_tok_per_s": metrics["train_tgt_tok_per_s"]}
    scores.update({f"hparams/{k}": metrics[k] for k in ("test_bleu", "test_chrf") if k in metrics})
    params = {k: v if isinstance(v, (int, float, str, bool)) else str(v)
              for k, v in flatten(cfg_dict).items() if not k.startswith("trainer.resume")}
    for summary in hparams(params, scores):  # into this run's events file (add_hparams would open another)
        writer.file_writer.add_summary(summary, metrics["steps"])
    for k, v in scores.items():
        writer.add_scalar(k, v, metrics["steps"])


register()


@hydra.main(version_base="1.3", config_path="pkg://nmt.configs", config_name="train")  # configs/, as a package
def main(cfg: DictConfig) -> Optional[float]:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        metrics = train(cfg, run_dir)
    except (ConfigError, DataError, checkpoint.CheckpointError, TrainingError, OmegaConfBaseException) as e:
        log.error("%s", e)
        print(f"nmt.train: error: {e}", file=sys.stderr)
        sys.exit(1)
    return metrics.get("best_valid_bleu")


if __name__ == "__main__":
    main()
