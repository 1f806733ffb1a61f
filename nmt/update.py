"""One update of the weights: micro-batches with gradient accumulation, the loss scaler,
clipping, skipping non-finite updates, the learning-rate schedule and the training log."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import replace
from typing import Any, Optional

import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch.utils.tensorboard import SummaryWriter

from nmt import distributed
from nmt.batching import Batch
from nmt.budget import Budget, fmt_time
from nmt.device import autocast
from nmt.model import Seq2Seq
from nmt.optim import Schedule
from nmt.train_state import TrainingState
from nmt.version import __version__
from nmt.vocab import EOS, PAD, UNK

log = logging.getLogger(__name__)


def rng_states(device: torch.device) -> dict[str, Optional[torch.Tensor]]:
    """This process's torch RNG states: dropout masks (CPU, and the device's on CUDA)."""
    return {"torch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def word_dropout(batch: Batch, src_p: float, tgt_p: float) -> Batch:
    """``batch`` with each source piece, and each decoder input piece, read as <unk> with probability ``src_p`` and
    ``tgt_p`` (word dropout: a small corpus's model learns not to lean on any one word). Special ids (PAD, BOS, EOS)
    and the targets the loss scores stay; masks drawn on the batch's device, no host sync."""
    if src_p > 0:
        src = batch.src
        batch = replace(batch, src=src.masked_fill((src > EOS) & (torch.rand(src.shape, device=src.device) < src_p), UNK))
    if tgt_p > 0 and batch.tgt_in is not None:
        tgt = batch.tgt_in
        batch = replace(batch, tgt_in=tgt.masked_fill((tgt > EOS) & (torch.rand(tgt.shape, device=tgt.device) < tgt_p), UNK))
    return batch


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. repeated non-finite losses); the message says why."""


def batch_loss(model: Seq2Seq, batch: Batch, label_smoothing: float = 0.0, precision: str = "fp32") -> torch.Tensor:
    """Mean cross-entropy per target token; one output projection over all steps (in bf16 for ``precision``
    bf16_output; the caller's autocast covers the rest). The packing lengths go in as ints:
    DistributedDataParallel(device_ids=[i]) moves every tensor argument to cuda:i; packing needs them on the CPU."""
    logits, _ = model(batch.src, batch.src_lens, tuple(batch.host_lens.tolist()), batch.tgt_in,
                      bf16_output=precision == "bf16_output")  # (batch, tgt_len, vocab)
    return F.cross_entropy(logits.flatten(0, 1).float(), batch.tgt_out.flatten(), ignore_index=PAD,
                           label_smoothing=label_smoothing)


@torch.no_grad()
def dev_loss(model: Seq2Seq, batches: list[Batch], device: torch.device, precision: str) -> float:
    """Mean cross-entropy per target token over ``batches`` (the model in eval mode)."""
    model.eval()
    total, tokens = torch.zeros((), device=device), 0
    for b in batches:
        n = int((b.tgt_out != PAD).sum())
        with autocast(device, precision):
            total += batch_loss(model, b.to(device), precision=precision) * n
        tokens += n
    model.train()
    return float(total) / max(tokens, 1)


class Updater:
    """Applies updates to ``model`` (through ``ddp`` when there is one) and logs their losses."""

    def __init__(self, tr: DictConfig, model: Seq2Seq, ddp: Optional[torch.nn.Module], opt: torch.optim.Optimizer,
                 schedule: Schedule, scaler: torch.amp.GradScaler, state: TrainingState, device: torch.device,
                 world_size: int, writer: Optional[SummaryWriter], cfg_dict: dict, tok_state: dict[str, Any]):
        self.cfg_dict, self.tok_state = cfg_dict, tok_state  # what checkpoints carry besides the weights
        self.tr, self.model, self.ddp, self.opt, self.schedule, self.scaler = tr, model, ddp, opt, schedule, scaler
        self.state, self.device, self.world_size, self.writer = state, device, world_size, writer
        self.loss_sum = torch.zeros((), device=device)
        self.window = [0, 0, 0]  # source tokens, target tokens, micro-batches since the last log line
        self.total_tgt_tokens, self.first_step = 0, state.step  # first_step: where this process started
        self.t_log = time.perf_counter()
        self.budget: Optional[Budget] = None  # its clock goes into checkpoints (set by the training loop)
        self.rank_rngs: Optional[list] = None  # every rank's RNG states at the last sync_for_checkpoint()

    def update(self, mine: list[Batch], u: int, n_updates: int, budget: Budget) -> bool:
        """Update ``u`` of ``n_updates`` in the epoch from this process's micro-batches; False if
        it was skipped for a non-finite loss or gradient."""
        tr, state = self.tr, self.state
        for k, batch in enumerate(mine):
            self._backward(batch, last=k == len(mine) - 1)
        self.scaler.unscale_(self.opt)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), tr.clip_norm or math.inf)
        state.update_in_epoch = u + 1
        # one host sync per update: a non-finite loss or gradient must not reach the weights
        if not bool(torch.isfinite(norm)):
            self._skip()
            return False
        state.nonfinite_skipped = 0
        progress = budget.progress(state.step, state.epoch + (u + 1) / n_updates)  # time: the last tick, one for all ranks
        lr = self.schedule.lr(state.step + 1, state.epoch, progress)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)
        state.step += 1
        return True

    def _backward(self, batch: Batch, last: bool) -> None:
        """Loss and gradients of one micro-batch (DDP syncs gradients on the last one only)."""
        n_src, n_tgt = int(batch.host_lens.sum()), int((batch.tgt_out != PAD).sum())
        self.window = [self.window[0] + n_src, self.window[1] + n_tgt, self.window[2] + 1]
        self.total_tgt_tokens += n_tgt
        sync = self.ddp.no_sync() if self.ddp is not None and not last else contextlib.nullcontext()
        with sync:  # one context: DDP's no_sync() cannot be entered twice
            batch = word_dropout(batch.to(self.device), self.tr.src_word_dropout, self.tr.tgt_word_dropout)
            with autocast(self.device, self.tr.precision):
                loss = batch_loss(self.ddp or self.model, batch, self.tr.label_smoothing, self.tr.precision)
            self.scaler.scale(loss / self.tr.accum_steps).backward()
        self.loss_sum += loss.detach()

    def _skip(self) -> None:
        """Drop the gradients of a non-finite update; too many in a row end training."""
        state, tr = self.state, self.tr
        self.opt.zero_grad(set_to_none=True)
        self.scaler.update()
        state.nonfinite_skipped += 1
        log.warning("non-finite loss or gradient at step %d: update skipped (%d in a row)",
                    state.step + 1, state.nonfinite_skipped)
        if state.nonfinite_skipped >= tr.max_nonfinite:
            raise TrainingError(f"{tr.max_nonfinite} non-finite updates in a row at step {state.step}: stopping "
                                "(lower trainer.lr, use trainer.precision=bf16 or fp32, or check the data)")

    def log(self, budget: Budget) -> None:
        """Every ``trainer.log_every`` steps: mean loss, lr and throughput since the last line."""
        step = self.state.step
        if step % self.tr.log_every:
            return
        if self.writer is not None:
            dt = time.perf_counter() - self.t_log
            mean = float(self.loss_sum) / max(self.window[2], 1)
            figures = {"loss": mean, "ppl": math.exp(min(mean, 50)), "lr": self.opt.param_groups[0]["lr"],
                       "src_tok_per_s": self.window[0] * self.world_size / dt,
                       "tgt_tok_per_s": self.window[1] * self.world_size / dt}
            for k, v in figures.items():
                self.writer.add_scalar(f"train/{k}", v, step)
            log.info("step %d | epoch %d | loss %.3f | ppl %.1f | lr %.3g | %.0f src + %.0f tgt tok/s | ETA %s", step,
                     self.state.epoch + 1, *figures.values(), fmt_time(budget.eta(step, step - self.first_step)))
        self.loss_sum.zero_()
        self.window = [0, 0, 0]
        self.t_log = time.perf_counter()

    def sync_for_checkpoint(self) -> None:
        """Before a checkpoint, on every rank: the replicas must be bit-identical (one all-reduce of a checksum;
        a mismatch stops the run), and every rank's RNG states go to rank 0, which writes them."""
        if self.world_size == 1:
            return
        if not distributed.ranks_agree(self.model.parameters(), self.device):
            raise TrainingError(f"step {self.state.step}: the ranks' parameters differ (DDP replicas drifted apart); "
                                "the last checkpoint before this step is the last good one")
        self.rank_rngs = distributed.all_ranks(rng_states(self.device))
        if self.writer is not None:
            log.info("step %d: ranks agree (parameter checksums of %d ranks equal)", self.state.step, self.world_size)

    def snapshot(self) -> dict:
        """Everything a checkpoint holds to translate and to resume this run exactly."""
        state, device = self.state, self.device
        if self.budget is not None:
            state.train_seconds = self.budget.elapsed()
        return {
            "model": self.model.state_dict(), "config": self.cfg_dict, "tokenizer": self.tok_state,
            "optimizer": self.opt.state_dict(), "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict(), "counters": state.state_dict(), "version": __version__,
            "rng": {**rng_states(device), "ranks": self.rank_rngs},  # ranks: every rank's, under DDP
            # kept for readers of older checkpoints
            "step": state.step, "epoch": state.epoch, "best_bleu": state.best_bleu,
        }
