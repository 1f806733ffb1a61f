"""Validation during training: dev loss and BLEU, the plateau schedule, checkpoint rotation,
early stopping and attention heatmaps in TensorBoard."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch.utils.tensorboard import SummaryWriter

from nmt import checkpoint
from nmt.batching import Batch
from nmt.data.text import DataError, read_lines
from nmt.device import autocast
from nmt.model import Seq2Seq
from nmt.optim import Schedule
from nmt.plot import PlotError, attention_figure, figure_array
from nmt.tokenizer import Tokenizer
from nmt.train_state import TrainingState
from nmt.translator import Translator
from nmt.update import dev_loss

log = logging.getLogger(__name__)


def rotate_checkpoints(snapshot: dict, ckpt_dir: Path, step: int, improved: bool, keep_best: int, keep_last: int) -> None:
    """``last.pt`` always; ``best.pt`` when improved, with the ``keep_best`` best and the ``keep_last``
    latest step checkpoints beside them."""
    checkpoint.save(snapshot, ckpt_dir / "last.pt")
    if improved:
        checkpoint.save(snapshot, ckpt_dir / "best.pt")
        if keep_best > 1:
            checkpoint.save(snapshot, ckpt_dir / f"best_step{step:08d}.pt")
            ranked = sorted(ckpt_dir.glob("best_step*.pt"), key=lambda p: checkpoint.load(p)["best_bleu"])
            for old in ranked[:-keep_best]:  # keep_best of them; best.pt is the best one again
                old.unlink()
    if keep_last:
        checkpoint.save(snapshot, ckpt_dir / f"step{step:08d}.pt")
        for old in sorted(ckpt_dir.glob("step*.pt"))[: -keep_last]:
            old.unlink()


def extra_dev_sets(data: DictConfig) -> dict[str, tuple[list[str], list[str]]]:
    """``data.extra_dev``: name (the prefix's file name, numbered if two are alike) -> (sources, references)."""
    sets: dict[str, tuple[list[str], list[str]]] = {}
    for i, prefix in enumerate(data.extra_dev):
        src_path, ref_path = (Path(f"{prefix}.{lang}").expanduser() for lang in (data.src_lang, data.tgt_lang))
        src, ref = read_lines(src_path), read_lines(ref_path)
        if len(src) != len(ref) or not src:
            raise DataError(f"data.extra_dev[{i}]: {src_path} has {len(src)} lines, {ref_path} {len(ref)} "
                            "(a dev set needs aligned, non-empty files)")
        name = Path(prefix).name if Path(prefix).name not in sets else f"{Path(prefix).name}{i}"
        sets[name] = (src, ref)
    return sets


class Validator:
    """Scores the dev set, keeps the best checkpoint, feeds the plateau schedule, says when to stop."""

    def __init__(self, cfg: DictConfig, model: Seq2Seq, tok: Tokenizer,
                 dev: tuple[list[str], list[str], list[Batch]], device: torch.device, writer: SummaryWriter,
                 ckpt_dir: Path, schedule: Schedule, snapshot: Callable[[], dict]):
        self.cfg, self.tr, self.model, self.tok = cfg, cfg.trainer, model, tok
        self.dev_src, self.dev_tgt, self.dev_batches = dev
        self.device, self.writer, self.ckpt_dir, self.schedule, self.snapshot = device, writer, ckpt_dir, schedule, snapshot
        self.history: list[dict] = []
        self.images = self.tr.attention_images > 0
        self.translator = Translator(model, tok, cfg, device)  # decodes as nmt.translate does
        self.extra = extra_dev_sets(cfg.data)  # name -> (sources, references): scored, not followed

    def __call__(self, state: TrainingState) -> bool:
        """Dev loss and BLEU, checkpoints, schedule and early stopping; True = stop training."""
        t0, tr, step = time.perf_counter(), self.tr, state.step
        loss = dev_loss(self.model, self.dev_batches, self.device, tr.precision)
        with autocast(self.device, tr.precision):
            scores = self.translator.evaluate(self.dev_src, [self.dev_tgt], beam=tr.valid_beam)
        hyps = scores.hypotheses
        record = {"step": step, "epoch": state.epoch, "valid_loss": loss, "valid_ppl": math.exp(min(loss, 50)),
                  "valid_bleu": scores.bleu, "valid_chrf": scores.chrf}
        for name, (src, ref) in self.extra.items():
            with autocast(self.device, tr.precision):
                other = self.translator.evaluate(src, [ref], beam=tr.valid_beam)
            record.setdefault("extra", {})[name] = {"bleu": other.bleu, "chrf": other.chrf}
            self.writer.add_scalar(f"valid_{name}/bleu", other.bleu, step)
            self.writer.add_scalar(f"valid_{name}/chrf", other.chrf, step)
        self.history.append(record)
        for k in ("loss", "ppl", "bleu", "chrf"):
            self.writer.add_scalar(f"valid/{k}", record[f"valid_{k}"], step)
        improved = scores.bleu > state.best_bleu
        state.best_bleu = max(state.best_bleu, scores.bleu)
        better = improved if tr.early_stopping_metric == "bleu" else loss < state.best_loss
        state.best_loss = min(state.best_loss, loss)
        state.bad_validations = 0 if better else state.bad_validations + 1
        self.schedule.on_validation(scores.bleu)
        rotate_checkpoints(self.snapshot(), self.ckpt_dir, step, improved, tr.keep_best, tr.keep_last)
        extra = "".join(f" | {n} BLEU {s['bleu']:.2f}" for n, s in record.get("extra", {}).items())
        log.info("valid step %d | loss %.3f | ppl %.2f | BLEU %.2f | chrF %.2f%s%s | %.1fs | e.g. %r", step, loss,
                 record["valid_ppl"], scores.bleu, scores.chrf, extra, " | new best" if improved else "",
                 time.perf_counter() - t0, hyps[0] if hyps else "")
        self.attention_images(step, hyps)
        patience = tr.early_stopping_patience
        if stop := bool(patience) and state.bad_validations >= patience:
            log.info("early stopping: no better dev %s in %d validations", tr.early_stopping_metric, patience)
        return stop

    def attention_images(self, step: int, hyps: list[str]) -> None:
        """Heatmaps of the first few dev sentences (with p_t and the window for local modes)."""
        if not self.images:
            return
        try:
            for i in range(min(self.tr.attention_images, len(self.dev_src))):
                if not hyps[i]:
                    continue
                a = self.translator.attention(self.dev_src[i], hyps[i])
                fig = attention_figure(a.weights, a.src_pieces, a.tgt_pieces, a.centres, self.cfg.model.attention.window,
                                       title=f"step {step}")
                self.writer.add_image(f"attention/dev{i}", figure_array(fig), step, dataformats="HWC")
        except PlotError as e:
            log.warning("no attention images in TensorBoard: %s", e)
            self.images = False
