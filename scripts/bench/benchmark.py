"""Training and decoding throughput of a config, measured the way the peer harness measures.

    python scripts/bench/benchmark.py --config bench_small --data ../shared/data/tatoeba-cmn-eng --json bench.json
    python scripts/bench/benchmark.py --config bench_small --data DIR --checkpoint outputs/<run>/   # decode a trained model
    python scripts/bench/benchmark.py --config bench_small          # the packaged Tatoeba corpus

Training: N measured steps after a warm-up, real tokens per second (target pieces without EOS,
as the peer harness counts them), peak RSS,
model FLOPs per target token and the fraction of this machine's measured fp32 matmul peak.
Decoding: the dev split, greedy and beam 5 (with our default stop rule and with the peers'
``first``), sentences per second and BLEU, in fp32 and/or bf16 (``--decode-precision fp32,bf16``).
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from nmt import precision
from nmt.batching import Batch, epoch_batches
from nmt.build import build_model
from nmt.checkpoint import load_model
from nmt.config import register
from nmt.config_check import validate
from nmt.data.normalize import src_normalizer
from nmt.data.prepare import Prepared, prepare
from nmt.decode import translate_texts
from nmt.device import PRECISIONS, autocast, pick_device, set_threads, warn_slow_bf16
from nmt.int8 import int8_model
from nmt.metrics import score
from nmt.model import Seq2Seq
from nmt.optim import build_optimizer
from nmt.tokenizer import PAD
from nmt.update import batch_loss

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# beam5: our default stop rule (beam hypotheses finished); beam5_first: the peers' rule
DECODES = (("greedy", 1, "full"), ("beam5", 5, "full"), ("beam5_first", 5, "first"))


def matmul_peak_gflops(dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 5,
                       device: torch.device = torch.device("cpu")) -> float:
    """Measured dense matmul throughput of ``device`` in ``dtype`` (n × n by n × n)."""
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    sync_device(device)
    t = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync_device(device)
    return 2 * n**3 * repeats / (time.perf_counter() - t) / 1e9


def sync_device(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def flops_per_token(model: Seq2Seq, src_tokens: float, tgt_tokens: float, mean_src_len: float) -> float:
    """Training FLOPs per target token: 6 × (weights touched per token) + attention, fwd + bwd."""
    enc = sum(p.numel() for n, p in model.encoder.named_parameters() if not n.startswith("embed"))
    dec = sum(p.numel() for n, p in model.decoder.named_parameters() if not n.startswith("embed"))
    hidden = model.decoder.hidden
    attention = 2 * 2 * mean_src_len * hidden  # scores and context, per target token
    return 6 * enc * src_tokens / tgt_tokens + 6 * dec + 3 * attention


def compose_config(config: str, overrides: Sequence[str] = (), data: Optional[str] = None) -> DictConfig:
    """The experiment's config on a files corpus in ``data``, or on the packaged Tatoeba corpus."""
    register()
    corpus = ["data=files", f"data.dir={data}"] if data else []
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", [f"+experiment={config}", *corpus, *overrides])
    validate(cfg)
    return cfg


def prepare_corpus(cfg: DictConfig) -> Prepared:
    """The corpus as training prepares it (the same pipeline and disk cache): tokenizer, train ids, dev text."""
    return prepare(cfg.data, cfg.tokenizer, seed=cfg.trainer.seed)


def update_step(model: Seq2Seq, opt: torch.optim.Optimizer, tr: DictConfig, device: torch.device) -> Callable[[Batch], None]:
    """One training update as the benchmarks time and profile it: the batch to ``device``, the loss under
    ``tr.precision`` (with ``tr.label_smoothing``), backward, clipping at ``tr.clip_norm``, the optimizer's step."""

    def step(b: Batch) -> None:
        b = b.to(device)
        with autocast(device, tr.precision):
            loss = batch_loss(model, b, tr.label_smoothing, precision=tr.precision)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr.clip_norm)
        opt.step()

    return step


def training_speed(model: Seq2Seq, cfg: DictConfig, batches: Sequence[Batch], warmup: int,
                   device: torch.device) -> dict:
    """Train on ``batches[:warmup]`` untimed, then time the rest: tokens/s, FLOPs, peak memory."""
    tr = cfg.trainer
    tr.precision = precision.choose(tr, model, device, batches[:8])  # as training resolves auto
    step = update_step(model, build_optimizer(tr, model.parameters()), tr, device)
    for b in batches[:warmup]:
        step(b)
    measured = batches[warmup:]
    n_src = sum(int(b.host_lens.sum()) for b in measured)
    # target pieces without EOS, as the peer harness counts (sentences × mean pieces per sentence)
    n_tgt = sum(int((b.tgt_out != PAD).sum()) - b.size for b in measured)
    n_sents = sum(b.size for b in measured)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    sync_device(device)
    t0 = time.perf_counter()
    for b in measured:
        step(b)
    sync_device(device)
    dt = time.perf_counter() - t0
    fpt = flops_per_token(model, n_src, n_tgt, n_src / n_sents)
    cuda = device.type == "cuda"
    return {
        "steps": len(measured), "seconds": dt, "tgt_tok_per_s": n_tgt / dt, "src_tok_per_s": n_src / dt,
        "sents_per_s": n_sents / dt, "steps_per_s": len(measured) / dt, "mean_batch_sents": n_sents / len(measured),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_gpu_mb": torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None,
        "flops_per_tgt_token": fpt, "model_gflops": fpt * n_tgt / dt / 1e9,
        "parameters": sum(p.numel() for p in model.parameters()), "precision": tr.precision,
    }


def decode_batch(spec: str, beam: int) -> dict:
    """``translate``'s batch settings for a batch spec as the peers' harness names them (BENCH_DECODE_BATCH):
    ``default`` (ours: 8,000 source tokens × beam), ``tokens:N`` (N source tokens, whatever the beam) or
    ``sents:N`` (N sentences)."""
    kind, _, n = spec.partition(":")
    if spec == "default":
        return {}
    if kind not in ("tokens", "sents") or not n.isdigit() or int(n) < 1:
        raise ValueError(f"decode batch {spec!r}: default, tokens:N or sents:N")
    if kind == "tokens":
        return {"batch_tokens": int(n) * beam, "batch_sentences": 100_000}
    return {"batch_tokens": 10**9, "batch_sentences": int(n)}


def decoding_speed(model: Seq2Seq, tok, cfg: DictConfig, dev_src: list[str], dev_tgt: list[str],
                   device: torch.device, runs: Sequence[tuple[str, int, str]] = DECODES,
                   precisions: Optional[Sequence[str]] = None, batch: str = "default") -> dict:
    """Sentences/s and BLEU of ``model`` on the dev sentences, per (name, beam, stop rule) and decoding
    precision: fp32 under ``name`` (``beam5``), others under ``name_precision`` (``beam5_bf16``).
    ``precisions`` None: the config's training precision, under ``name`` (as scripts/checks/gpu_check.py reads)."""
    model.eval()
    norm = src_normalizer(cfg.data)
    out = {}
    for prec in precisions or [cfg.trainer.precision]:
        suffix = "" if precisions is None or prec == "fp32" else f"_{prec}"
        decoder = int8_model(model, cfg.model) if prec == "int8" else model  # int8: a quantized copy (nmt/int8.py)
        for name, beam, stop in runs:
            t0 = time.perf_counter()  # translation only (as the peers time theirs), not the scoring
            hyps = translate_texts(decoder, tok, norm, dev_src, beam=beam, device=device, stop=stop, precision=prec,
                                   **decode_batch(batch, beam))
            dt = time.perf_counter() - t0
            scores = score(hyps, [dev_tgt], cfg.data.tgt_lang)
            out[name + suffix] = {"sents_per_s": len(dev_src) / dt, "seconds": dt, "bleu": scores.bleu,
                                  "chrf": scores.chrf, "precision": prec, "batch": batch}
    return out


def parse() -> argparse.Namespace:
    """The command line, checked."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="bench_small", help="experiment name under configs/experiment/")
    p.add_argument("--data", help="folder with train/dev.{zh,en} (default: the packaged Tatoeba corpus)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--checkpoint", help="decode with this trained model instead of the benchmarked one")
    p.add_argument("--no-decode", action="store_true")
    p.add_argument("--decode-precision", default="fp32", type=lambda v: v.split(","),
                   help="decoding precision(s), comma-separated: fp32 (default; keys greedy, beam5, beam5_first), "
                        "bf16 (keys greedy_bf16, ...), bf16_output (greedy_bf16_output, ...), int8 (greedy_int8, ...; CPU): "
                        "e.g. fp32,int8")
    p.add_argument("--decode-batch", default="default",
                   help="decoding batches: default (8,000 source tokens × beam), tokens:N (N source tokens at any beam: "
                        "the peers' harness's BENCH_DECODE_BATCH=tokens:N) or sents:N")
    p.add_argument("overrides", nargs="*", help="extra config overrides, key=value")
    args = p.parse_args()
    if any(d not in PRECISIONS for d in args.decode_precision):
        p.error(f"--decode-precision: each of {args.decode_precision} must be one of {', '.join(PRECISIONS)}")
    try:
        decode_batch(args.decode_batch, 1)
    except ValueError as e:
        p.error(f"--decode-batch: {e}")
    return args


def report(result: dict) -> None:
    """The figures of a record, a line each."""
    t, c, peaks = result["train"], result["cpu"], result["matmul_peak_gflops"]
    print(f"{'config':<28}{result['config']} {' '.join(result['overrides'])}")
    print(f"{'CPU':<28}{c['model']}, {c['cores']} cores, {' '.join(c['flags']) or 'no AMX/AVX-512'}; "
          f"matmul peak fp32 {peaks['fp32']:.0f}, bf16 {peaks['bf16']:.0f} GFLOP/s")
    print(f"{'train tgt tok/s':<28}{t['tgt_tok_per_s']:,.0f}   (src {t['src_tok_per_s']:,.0f}, "
          f"{t['sents_per_s']:,.0f} sents/s, {t['mean_batch_sents']:.0f} sents/batch)")
    print(f"{'  with batch building':<28}{t['tgt_tok_per_s_with_batching']:,.0f}   ({t['batching_ms_per_step']:.2f} ms a step)")
    print(f"{'peak RSS':<28}{t['peak_rss_mb']:,.0f} MB")
    print(f"{'model FLOPs':<28}{t['flops_per_tgt_token'] / 1e6:.1f} MFLOP/tgt token, {t['model_gflops']:.0f} GFLOP/s "
          f"= {t['matmul_peak_fraction']:.0%} of the measured {t['matmul_peak_gflops']:.0f} GFLOP/s fp32 matmul peak")
    for name, d in result.get("decode", {}).items():
        print(f"{'decode ' + name:<28}{d['sents_per_s']:,.0f} sents/s   BLEU {d['bleu']:.2f}  chrF {d['chrf']:.2f}"
              f"   ({d['precision']})")


def main() -> int:
    args = parse()
    cfg = compose_config(args.config, args.overrides, args.data)
    tr = cfg.trainer
    set_threads(tr.threads)
    device = pick_device(tr.device)
    for d in args.decode_precision:
        warn_slow_bf16(device, d)
    torch.manual_seed(tr.seed)
    corpus = prepare_corpus(cfg)
    tok = corpus.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tr.engine, bool(tr.compile))  # as training
    model = model.to(device).train()
    rng = random.Random(tr.seed)
    batches: list = []
    t0 = time.perf_counter()  # batch building, timed apart: the peers' harness times theirs inside its steps
    while len(batches) < args.warmup + args.steps:
        batches += epoch_batches(corpus.train, tr.batch_tokens, rng)
    batching_s = (time.perf_counter() - t0) / len(batches)  # a batch's share
    train = training_speed(model, cfg, batches[: args.warmup + args.steps], args.warmup, device)
    with_batching = train["seconds"] + batching_s * train["steps"]
    train.update(batching_ms_per_step=1000 * batching_s,
                 tgt_tok_per_s_with_batching=train["tgt_tok_per_s"] * train["seconds"] / with_batching)
    cpu = device.type == "cpu"
    peaks = {"fp32": matmul_peak_gflops() if cpu else float("nan"),
             "bf16": matmul_peak_gflops(torch.bfloat16) if cpu else float("nan")}
    train.update(matmul_peak_gflops=peaks["fp32"], matmul_peak_fraction=train["model_gflops"] / peaks["fp32"])
    result = record({"config": args.config, "overrides": args.overrides, "device": str(device),
                     "threads": torch.get_num_threads(), "matmul_peak_gflops": peaks, "train": train})

    if not args.no_decode:
        dec_model, dec_tok, dec_cfg = model, tok, cfg
        if args.checkpoint:
            dec_model, dec_tok, dec_cfg, _ = load_model(args.checkpoint, device)
        # beam5: our default stop rule (beam hypotheses finished); beam5_first: the peers' rule
        result["decode"] = decoding_speed(dec_model, dec_tok, dec_cfg, list(corpus.dev["src"]),
                                          list(corpus.dev["tgt"]), device, precisions=args.decode_precision,
                                          batch=args.decode_batch)

    save(args.json, result)
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
