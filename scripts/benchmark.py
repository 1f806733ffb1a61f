"""Training and decoding throughput of a config, measured the way the peer harness measures.

    python scripts/benchmark.py --config bench_small --data ../shared/data/tatoeba-cmn-eng --json bench.json
    python scripts/benchmark.py --config bench_small --data DIR --checkpoint outputs/<run>/   # decode a trained model

Training: N measured steps after a warm-up, real tokens per second (target pieces without EOS,
as the peer harness counts them), peak RSS,
model FLOPs per target token and the fraction of this machine's measured fp32 matmul peak.
Decoding: the dev split, greedy and beam 5 (with our default stop rule and with the peers'
``first``), sentences per second and BLEU.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from nmt.batching import train_batches
from nmt.checkpoint import load_model
from nmt.config import register, validate
from nmt.data import load_corpus, src_normalizer
from nmt.device import autocast, pick_device, set_threads
from nmt.metrics import score
from nmt.model import Seq2Seq, build_model
from nmt.optim import build_optimizer
from nmt.tokenizer import PAD, load_or_train
from nmt.train import batch_loss, encode_train
from nmt.translate import translate_texts

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def matmul_peak_gflops(dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    t = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - t) / 1e9


def flops_per_token(model: Seq2Seq, src_tokens: float, tgt_tokens: float, mean_src_len: float) -> float:
    """Training FLOPs per target token: 6 × (weights touched per token) + attention, fwd + bwd."""
    enc = sum(p.numel() for n, p in model.encoder.named_parameters() if not n.startswith("embed"))
    dec = sum(p.numel() for n, p in model.decoder.named_parameters() if not n.startswith("embed"))
    hidden = model.decoder.hidden
    attention = 2 * 2 * mean_src_len * hidden  # scores and context, per target token
    return 6 * enc * src_tokens / tgt_tokens + 6 * dec + 3 * attention


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="bench_small", help="experiment name under configs/experiment/")
    p.add_argument("--data", required=True, help="folder with train/dev.{zh,en}")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--checkpoint", help="decode with this trained model instead of the benchmarked one")
    p.add_argument("--no-decode", action="store_true")
    p.add_argument("overrides", nargs="*", help="extra config overrides, key=value")
    args = p.parse_args()

    register()
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", [f"+experiment={args.config}", "data=files", f"data.dir={args.data}", *args.overrides])
    validate(cfg)
    tr = cfg.trainer
    set_threads(tr.threads)
    device = pick_device(tr.device)
    torch.manual_seed(tr.seed)
    corpus = load_corpus(cfg.data, need=("train", "dev"))
    src_text, tgt_text = list(corpus["train"]["src"]), list(corpus["train"]["tgt"])
    tok = load_or_train(cfg.tokenizer, src_text, tgt_text, seed=tr.seed)
    src, tgt = encode_train(tok, src_text, tgt_text, cfg.data.max_tokens)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).to(device).train()
    opt = build_optimizer(tr, model.parameters())
    rng = random.Random(tr.seed)
    batches: list = []
    while len(batches) < args.warmup + args.steps:
        batches += train_batches(src, tgt, tr.batch_tokens, rng)

    def step(b) -> None:
        b = b.to(device)
        with autocast(device, tr.precision):
            loss = batch_loss(model, b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr.clip_norm)
        opt.step()

    for b in batches[: args.warmup]:
        step(b)
    measured = batches[args.warmup : args.warmup + args.steps]
    n_src = sum(int(b.host_lens.sum()) for b in measured)
    # target pieces without EOS, as the peer harness counts (sentences × mean pieces per sentence)
    n_tgt = sum(int((b.tgt_out != PAD).sum()) - b.size for b in measured)
    n_sents = sum(b.size for b in measured)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in measured:
        step(b)
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak = matmul_peak_gflops() if device.type == "cpu" else float("nan")
    fpt = flops_per_token(model, n_src, n_tgt, n_src / n_sents)
    train = {
        "steps": args.steps, "seconds": dt, "tgt_tok_per_s": n_tgt / dt, "src_tok_per_s": n_src / dt,
        "sents_per_s": n_sents / dt, "steps_per_s": args.steps / dt, "mean_batch_sents": n_sents / args.steps,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "flops_per_tgt_token": fpt, "model_gflops": fpt * n_tgt / dt / 1e9, "matmul_peak_gflops": peak,
        "matmul_peak_fraction": fpt * n_tgt / dt / 1e9 / peak, "parameters": sum(p.numel() for p in model.parameters()),
    }
    result = {"config": args.config, "overrides": args.overrides, "device": str(device),
              "threads": torch.get_num_threads(), "train": train}

    if not args.no_decode:
        dec_model, dec_tok, dec_cfg = model, tok, cfg
        if args.checkpoint:
            dec_model, dec_tok, dec_cfg, _ = load_model(args.checkpoint, device)
        dec_model.eval()
        dev_src, dev_tgt = list(corpus["dev"]["src"]), list(corpus["dev"]["tgt"])
        norm = src_normalizer(dec_cfg.data)
        result["decode"] = {}
        # beam5: our default stop rule (beam hypotheses finished); beam5_first: the peers' rule
        for name, beam, stop in (("greedy", 1, "full"), ("beam5", 5, "full"), ("beam5_first", 5, "first")):
            t0 = time.perf_counter()  # translation only (as the peers time theirs), not the scoring
            with autocast(device, tr.precision):
                hyps = translate_texts(dec_model, dec_tok, norm, dev_src, beam=beam, device=device, stop=stop)
            dt = time.perf_counter() - t0
            scores = score(hyps, [dev_tgt], dec_cfg.data.tgt_lang)
            result["decode"][name] = {"sents_per_s": len(dev_src) / dt, "seconds": dt, "bleu": scores.bleu,
                                      "chrf": scores.chrf}

    t = result["train"]
    print(f"{'config':<28}{args.config} {' '.join(args.overrides)}")
    print(f"{'train tgt tok/s':<28}{t['tgt_tok_per_s']:,.0f}   (src {t['src_tok_per_s']:,.0f}, "
          f"{t['sents_per_s']:,.0f} sents/s, {t['mean_batch_sents']:.0f} sents/batch)")
    print(f"{'peak RSS':<28}{t['peak_rss_mb']:,.0f} MB")
    print(f"{'model FLOPs':<28}{t['flops_per_tgt_token'] / 1e6:.1f} MFLOP/tgt token, {t['model_gflops']:.0f} GFLOP/s "
          f"= {t['matmul_peak_fraction']:.0%} of the measured {t['matmul_peak_gflops']:.0f} GFLOP/s fp32 matmul peak")
    for name, d in result.get("decode", {}).items():
        print(f"{'decode ' + name:<28}{d['sents_per_s']:,.0f} sents/s   BLEU {d['bleu']:.2f}  chrF {d['chrf']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
