"""Eole's training step against ours: the same weights, the same batches, no dropout; do the updates agree?

    python scripts/compare_train_step.py --steps 100 --json docs/results/train_step_eole.json
    python scripts/compare_train_step.py --steps 1000 --dropout 0.2 --json docs/results/train_step_eole_dropout.json

The gap ablation (docs/benchmarks.md) leaves a cost inside Eole's training unnamed. This takes the random masks out
and asks whether what remains, the model, the loss, its divisor, clipping and Adam, is the same computation: Eole
0.6.4 initializes bench-small and trains it --steps updates from the harness's pieces with its own code and dropout 0
(scripts/eole_train_steps.py, in Eole's venv); ours starts from Eole's initial weights (swap_search's mapping) and
trains on the very batches Eole's iterator yielded, through nmt's own training path (``fast_ops``, ``batch_loss``,
``build_optimizer``, clipping as ``Updater``), twice: as nmt trains (the mean over every target token, EOS
included) and with Eole's divisor (its summed loss over the target tokens without EOS). The record holds each
update's cross-entropy per token on both sides and, at the end, how far each weight tensor of ours lies from Eole's
relative to how far Eole's moved from the start. Then the masks themselves, counted: one update on each side with the
config's dropout (0.2), each dropout that acted with its calls and the elements it drew over (``dropout_census``).
With ``--dropout P`` both sides train with that rate instead: their masks differ, so the weights part ways, but
the training loss over each window of updates (``windows``) should fall alike if the two are one process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import yaml
from eole_train_steps import census
from swap_search import _safetensors, eole_model_config, eole_to_ours

from nmt.batching import Batch
from nmt.config import TrainerConfig
from nmt.device import cpu_info
from nmt.model import build_model
from nmt.ops import fast_ops
from nmt.optim import build_optimizer
from nmt.run_folder import git_commit
from nmt.update import batch_loss
from nmt.vocab import EOS, PAD

HERE = Path(__file__).resolve().parent


def to_ours(ids: torch.Tensor) -> torch.Tensor:
    """Eole's ids as ours: its <unk> 0 and <blank> (padding) 1 trade places (swap_search's vocabulary mapping)."""
    return torch.where(ids <= 1, 1 - ids, ids)


def our_batch(b: dict) -> Batch:
    """Eole's batch (src (batch, src_len), srclen, tgt (batch, 1 + tgt_len): <s> y_1 .. y_n </s>) as ours."""
    src, tgt = to_ours(b["src"]), to_ours(b["tgt"])
    tgt_in = tgt[:, :-1].clone()
    tgt_in[tgt_in == EOS] = PAD  # ours has no EOS in the decoder's input (Eole's lies past the loss's last term)
    lens = b["srclen"].long()
    return Batch(src=src, src_lens=lens, tgt_in=tgt_in, tgt_out=tgt[:, 1:].contiguous(), host_lens=lens.clone())


def windows(ce: list[float], terms: list[int], size: int = 100) -> list[float]:
    """Cross-entropy per token over each run of ``size`` updates (token-weighted, as Eole's training log)."""
    out = []
    for a in range(0, len(ce) - size + 1, size):
        out.append(sum(c * n for c, n in zip(ce[a:a + size], terms[a:a + size])) / sum(terms[a:a + size]))
    return out


def train_ours(model: torch.nn.Module, batches: list[Batch], eole_divisor: bool) -> list[float]:
    """``len(batches)`` updates as nmt.update.Updater makes them (fp32, clip 5, Adam 1e-3); the loss per term of each."""
    tr = TrainerConfig(lr=1e-3, clip_norm=5.0)
    opt = build_optimizer(tr, model.parameters())
    out = []
    for b in batches:
        loss = batch_loss(model, b)  # mean over the target tokens, EOS included
        out.append(float(loss))
        if eole_divisor:
            terms = int((b.tgt_out != PAD).sum())
            loss = loss * terms / (terms - b.size)  # Eole: the summed loss over the tokens without EOS
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr.clip_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return out


def distance(ours: dict, eole: dict, init: dict) -> dict:
    """Per tensor: max |ours - Eole| / max |Eole - start|; their median and maximum over the tensors."""
    rel = {k: float((ours[k] - eole[k]).abs().max() / (eole[k] - init[k]).abs().max().clamp_min(1e-30)) for k in eole}
    values = sorted(rel.values())
    return {"median": values[len(values) // 2], "max": values[-1], "worst": max(rel, key=rel.get)}


def our_census(cfg, init: dict, batch: Batch, p: float) -> list[dict]:
    """Each of our dropout modules that acted in one training forward of ``batch`` at rate ``p``: calls, elements."""
    cfg.dropout = p
    model = build_model(cfg, init["encoder.embed.weight"].size(0), init["decoder.out.weight"].size(0), fast_ops())
    acted, _ = census(model)
    batch_loss(model.train(), batch)
    return list(acted.values())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harness", type=Path, default=Path.home() / ".cache/nmt-peers/bench",
                   help="the harness's writable copy after an Eole run (../shared/bench/peers/run.sh makes it)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--dropout", type=float, default=0.0, help="train both sides at this rate (default 0: deterministic)")
    p.add_argument("--json", type=Path, help="write the record here")
    args = p.parse_args()
    harness = args.harness.expanduser().resolve()
    python, cfg_yaml = harness.parent / "eole-venv" / "bin" / "python", harness / "work" / "eole" / "cfg_budget.yaml"
    for need in (python, cfg_yaml):
        if not need.exists():
            raise SystemExit(f"{need}: missing; run ../shared/bench/peers/run.sh run_eole.sh once")
    with tempfile.TemporaryDirectory(prefix="compare_train_step_") as tmp:
        work = Path(tmp)
        subprocess.run([str(python), str(HERE / "eole_train_steps.py"), str(cfg_yaml), str(work), "--steps",
                        str(args.steps), "--dropout", str(args.dropout)], cwd=harness, check=True, stdout=subprocess.DEVNULL)
        for name in ("init", "final"):
            _safetensors(python, "import sys, torch; from safetensors.torch import load_file; "
                         "torch.save(load_file(sys.argv[1]), sys.argv[2])", work / f"{name}.safetensors", work / f"{name}.pt")
        init = eole_to_ours(torch.load(work / "init.pt"))
        final = eole_to_ours(torch.load(work / "final.pt"))
        batches = [our_batch(b) for b in torch.load(work / "batches.pt")]
        eole_losses = json.loads((work / "losses.json").read_text())
        subprocess.run([str(python), str(HERE / "eole_train_steps.py"), str(cfg_yaml), str(work / "census"), "--census"],
                       cwd=harness, check=True, stdout=subprocess.DEVNULL)
        eole_census = json.loads((work / "census" / "census.json").read_text())
        census_batch = our_batch(torch.load(work / "census" / "batches.pt")[0])
        rate = yaml.safe_load(cfg_yaml.read_text())["training"]["dropout"][0]
    cfg = eole_model_config(yaml.safe_load(cfg_yaml.read_text()), str(cfg_yaml))
    census = {"batch": list(census_batch.src.shape) + [census_batch.tgt_out.size(1)], "eole": eole_census,
              "ours": our_census(cfg, init, census_batch, rate)}
    cfg.dropout = args.dropout
    runs = {}
    for label, divisor in (("ours", False), ("ours_eole_divisor", True)):
        torch.manual_seed(0)
        model = build_model(cfg, init["encoder.embed.weight"].size(0), init["decoder.out.weight"].size(0), fast_ops())
        model.load_state_dict(init)
        model.train()
        losses = train_ours(model, batches, divisor)
        runs[label] = {"ce_per_token": losses, "distance": distance(model.state_dict(), final, init)}
    eole_ce = [e["loss_sum"] / e["terms"] for e in eole_losses]
    terms = [e["terms"] for e in eole_losses]
    record = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(), "command": sys.argv,
        "cpu": cpu_info(), "steps": len(batches), "dropout": args.dropout, "harness_config": str(cfg_yaml),
        "eole": {"ce_per_token": eole_ce, "divisor_over_terms": [e["divisor"] / e["terms"] for e in eole_losses],
                 "windows": windows(eole_ce, terms)},
        "runs": runs,
        "first_update_ce_difference": abs(runs["ours"]["ce_per_token"][0] - eole_ce[0]),
        "dropout_census": census,
    }
    for label, r in runs.items():
        gaps = [abs(a - b) for a, b in zip(r["ce_per_token"], eole_ce)]
        r["ce_gap_max"], r["ce_gap_last"] = max(gaps), gaps[-1]
        r["windows"] = windows(r["ce_per_token"], terms)
        print(f"{label}: loss per token within {max(gaps):.2e} of Eole's over {len(gaps)} updates (last {gaps[-1]:.2e}); "
              f"weights after them {r['distance']['median']:.2e} (median), {r['distance']['max']:.2e} (max, "
              f"{r['distance']['worst']}) of Eole's own move away from Eole's")
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
