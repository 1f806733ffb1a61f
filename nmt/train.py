"""Train a model: ``python -m nmt.train +experiment=zh_en_local_p [key=value ...]``.

The run directory (Hydra's output dir) receives the resolved config, the sentencepiece
models, ``checkpoints/{last,best}.pt``, TensorBoard events and ``metrics.json``.
"""

from __future__ import annotations

import json
import logging
import math
import random
import resource
import sys
import time
from pathlib import Path
from typing import Optional

import hydra
import torch
import torch.nn.functional as F
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException
from torch.utils.tensorboard import SummaryWriter

from nmt import __version__, checkpoint
from nmt.batching import Batch, train_batches
from nmt.checkpoint import CheckpointError
from nmt.config import ConfigError, register, to_dict, validate
from nmt.data import DataError, load_corpus, src_normalizer
from nmt.device import autocast, pick_device, set_threads
from nmt.evaluate import evaluate
from nmt.model import Seq2Seq, build_model
from nmt.tokenizer import PAD, Tokenizer, load_or_train

log = logging.getLogger("nmt.train")


def encode_train(tok: Tokenizer, src: list[str], tgt: list[str], max_tokens: int) -> tuple[list, list]:
    """Piece ids of the training pairs, without pairs longer than ``max_tokens`` on either side."""
    s_ids, t_ids = tok.encode_src(src), tok.encode_tgt(tgt)
    keep = [i for i in range(len(s_ids)) if len(s_ids[i]) <= max_tokens and len(t_ids[i]) <= max_tokens]
    log.info("train: %d pairs, %d over %d pieces dropped", len(keep), len(s_ids) - len(keep), max_tokens)
    return [s_ids[i] for i in keep], [t_ids[i] for i in keep]


def batch_loss(model: Seq2Seq, batch: Batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy per target token; one output projection over all steps."""
    logits, _ = model(batch.src, batch.src_lens, batch.host_lens, batch.tgt_in)  # (batch, tgt_len, vocab)
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

    def eta(self, step: int) -> float:
        """Seconds left: the nearest of the limits, extrapolated from the pace so far."""
        pace = self.elapsed() / max(step, 1)
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


def train(cfg: DictConfig, run_dir: Path) -> dict:
    """Train, validate and checkpoint under ``run_dir``; return the final metrics."""
    validate(cfg)
    tr = cfg.trainer
    set_threads(tr.threads)
    device = pick_device(tr.device)
    random.seed(tr.seed)
    torch.manual_seed(tr.seed)
    rng = random.Random(tr.seed)
    log.info("nmt %s | run dir %s | device %s | %d threads", __version__, run_dir, device, torch.get_num_threads())

    # data and tokenizer
    corpus = load_corpus(cfg.data, need=("train", "dev"))
    src_text, tgt_text = list(corpus["train"]["src"]), list(corpus["train"]["tgt"])
    tok = load_or_train(cfg.tokenizer, src_text, tgt_text, seed=tr.seed)
    tok.save(run_dir)
    log.info("vocabulary: %d source / %d target pieces", tok.src_vocab_size, tok.tgt_vocab_size)
    train_src, train_tgt = encode_train(tok, src_text, tgt_text, cfg.data.max_tokens)
    if not train_src:
        raise DataError(f"no training pairs left: all {len(src_text)} have a side over data.max_tokens={cfg.data.max_tokens} pieces")
    dev = corpus["dev"]
    if tr.valid_max_sentences:
        dev = dev.select(range(min(tr.valid_max_sentences, len(dev))))
    dev_src, dev_tgt = list(dev["src"]), list(dev["tgt"])
    dev_batches = train_batches(tok.encode_src(dev_src), tok.encode_tgt(dev_tgt), tr.batch_tokens, random.Random(0))
    normalize = src_normalizer(cfg.data)

    # model and optimizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %s parameters | attention %s/%s", f"{n_params:,}", cfg.model.attention.score, cfg.model.attention.mode)
    opt = torch.optim.Adam(model.parameters(), lr=tr.lr)
    scaler = torch.amp.GradScaler(device.type, enabled=tr.precision == "fp16")
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    ckpt_dir = run_dir / "checkpoints"
    cfg_dict = to_dict(cfg)

    def state(step: int, epoch: int, best: float) -> dict:
        return {
            "model": model.state_dict(), "config": cfg_dict, "tokenizer": tok.to_state(),
            "optimizer": opt.state_dict(), "step": step, "epoch": epoch, "best_bleu": best, "version": __version__,
        }

    step, epoch, best_bleu = 0, 0, -1.0
    history: list[dict] = []

    def validate_now() -> None:
        nonlocal best_bleu
        t0 = time.perf_counter()
        loss = dev_loss(model, dev_batches, device, tr.precision)
        with autocast(device, tr.precision):
            scores, hyps = evaluate(
                model, tok, normalize, dev_src, [dev_tgt], cfg.data.tgt_lang, beam=tr.valid_beam, device=device
            )
        record = {"step": step, "epoch": epoch, "valid_loss": loss, "valid_ppl": math.exp(min(loss, 50)),
                  "valid_bleu": scores.bleu, "valid_chrf": scores.chrf}
        history.append(record)
        for k in ("loss", "ppl", "bleu", "chrf"):
            writer.add_scalar(f"valid/{k}", record[f"valid_{k}"], step)
        improved = scores.bleu > best_bleu
        if improved:
            best_bleu = scores.bleu
        checkpoint.save(state(step, epoch, best_bleu), ckpt_dir / "last.pt")
        if improved:
            checkpoint.save(state(step, epoch, best_bleu), ckpt_dir / "best.pt")
        log.info(
            "valid step %d | loss %.3f | ppl %.2f | BLEU %.2f | chrF %.2f%s | %.1fs | e.g. %r",
            step, loss, record["valid_ppl"], scores.bleu, scores.chrf, " | new best" if improved else "",
            time.perf_counter() - t0, hyps[0] if hyps else "",
        )

    # the loop
    steps_per_epoch = len(train_batches(train_src, train_tgt, tr.batch_tokens, random.Random(0)))
    budget = Budget(tr.max_steps, tr.max_epochs, tr.max_minutes, steps_per_epoch)
    log.info("training: %d steps per epoch, budget %s", steps_per_epoch,
             {k: tr[k] for k in ("max_steps", "max_epochs", "max_minutes") if tr[k]})
    model.train()
    loss_sum = torch.zeros((), device=device)
    window_tokens = [0, 0, 0]  # source tokens, target tokens, steps since the last log line
    total_tgt_tokens = 0
    t_log = time.perf_counter()
    try:
        while not budget.done(step, epoch):
            for batch in train_batches(train_src, train_tgt, tr.batch_tokens, rng):
                n_src, n_tgt = int(batch.host_lens.sum()), int((batch.tgt_out != PAD).sum())
                batch = batch.to(device)
                with autocast(device, tr.precision):
                    loss = batch_loss(model, batch, tr.label_smoothing)
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                if tr.clip_norm:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), tr.clip_norm)
                scaler.step(opt)
                scaler.update()
                step += 1
                loss_sum += loss.detach()
                window_tokens[0] += n_src
                window_tokens[1] += n_tgt
                window_tokens[2] += 1
                total_tgt_tokens += n_tgt
                if step % tr.log_every == 0:
                    dt = time.perf_counter() - t_log
                    mean = float(loss_sum) / window_tokens[2]
                    src_tps, tgt_tps = window_tokens[0] / dt, window_tokens[1] / dt
                    for k, v in (("loss", mean), ("ppl", math.exp(min(mean, 50))), ("lr", opt.param_groups[0]["lr"]),
                                 ("src_tok_per_s", src_tps), ("tgt_tok_per_s", tgt_tps)):
                        writer.add_scalar(f"train/{k}", v, step)
                    log.info("step %d | epoch %d | loss %.3f | ppl %.1f | lr %.2g | %.0f src + %.0f tgt tok/s | ETA %s",
                             step, epoch + 1, mean, math.exp(min(mean, 50)), opt.param_groups[0]["lr"],
                             src_tps, tgt_tps, _fmt_time(budget.eta(step)))
                    loss_sum.zero_()
                    window_tokens = [0, 0, 0]
                    t_log = time.perf_counter()
                if step % tr.valid_every == 0:
                    t_valid = time.perf_counter()
                    validate_now()
                    t_log += time.perf_counter() - t_valid  # validation time is not training time
                if budget.done(step, epoch):
                    break
            else:
                epoch += 1
    except KeyboardInterrupt:
        log.warning("interrupted at step %d: saving checkpoints/last.pt", step)
        checkpoint.save(state(step, epoch, best_bleu), ckpt_dir / "last.pt")
        writer.close()
        raise SystemExit(130) from None
    train_seconds = budget.elapsed()
    if not history or history[-1]["step"] != step:
        validate_now()

    # final: best weights on the test split
    metrics = {
        "steps": step, "epochs": epoch, "train_seconds": train_seconds, "parameters": n_params,
        "train_tgt_tok_per_s": total_tgt_tokens / max(train_seconds, 1e-9),
        "peak_memory_mb": peak_memory_mb(device), "best_valid_bleu": best_bleu, "history": history,
    }
    if "test" in corpus and tr.test_beam:
        best_model, _, _, _ = checkpoint.load_model(ckpt_dir / "best.pt", device)
        scores, _ = evaluate(best_model, tok, normalize, list(corpus["test"]["src"]), [list(corpus["test"]["tgt"])],
                             cfg.data.tgt_lang, beam=tr.test_beam, device=device)
        metrics.update(test_bleu=scores.bleu, test_chrf=scores.chrf, test_beam=tr.test_beam,
                       bleu_signature=scores.bleu_signature, chrf_signature=scores.chrf_signature)
        writer.add_scalar("test/bleu", scores.bleu, step)
        writer.add_scalar("test/chrf", scores.chrf, step)
        log.info("test (best checkpoint, beam %d): BLEU %.2f | chrF %.2f | %s",
                 tr.test_beam, scores.bleu, scores.chrf, scores.bleu_signature)
    writer.close()
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
    log.info("done: %d steps in %s | %.0f tgt tok/s | peak memory %.0f MB | best dev BLEU %.2f",
             step, _fmt_time(train_seconds), metrics["train_tgt_tok_per_s"], metrics["peak_memory_mb"], best_bleu)
    return metrics


register()


@hydra.main(version_base="1.3", config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> Optional[float]:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        metrics = train(cfg, run_dir)
    except (ConfigError, DataError, CheckpointError, OmegaConfBaseException) as e:
        log.error("%s", e)
        print(f"nmt.train: error: {e}", file=sys.stderr)
        sys.exit(1)
    return metrics.get("best_valid_bleu")


if __name__ == "__main__":
    main()
