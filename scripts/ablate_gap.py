"""Why bench-small scores above the peers: our run moved toward Eole's one factor at a time, at equal updates.

    python scripts/ablate_gap.py --data ../shared/data/tatoeba-cmn-eng --json docs/results/gap_ablation.json
    python scripts/ablate_gap.py --data ../shared/data/tatoeba-cmn-eng --variants baseline,sents64 --steps 200  # smoke

Each variant trains ``+experiment=bench_small`` on the peers' corpus for ``--steps`` updates (Eole's 15-minute run
reached 8,400: ``docs/results/side_by_side_eole.json``), in fp32, then scores its final weights (no checkpoint
chosen, as the peers' harness scores theirs) on the dev split, the peers' test set, greedy and beam 5. A variant is
config overrides plus, where no setting of ours does what the peer does, a patch applied in that variant's process
only (listed in VARIANTS; not a feature). Updates, not minutes, make the runs comparable on a busy machine.
The record (date, commit, command, CPU, one row per variant) is rewritten after every variant.
"""

from __future__ import annotations

import argparse
import datetime
import json
import runpy
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTS64 = ["trainer.batch_sentences=64", "trainer.batch_tokens=100000"]
# name: (what moves toward the peer, overrides, patches)
VARIANTS: dict[str, tuple[str, list[str], list[str]]] = {
    "baseline": ("ours as side_by_side.py trains it (token batches of 700)", [], []),
    "seed43": ("the baseline with another seed (the noise of one run)", ["trainer.seed=43"], []),
    "sents64": ("batches of 64 sentences, as the peers' batch_type sents", SENTS64, []),
    "sents64_unpacked": ("and the encoder runs over the padding, as Eole's (no packing)", SENTS64, ["unpacked"]),
    "eole_batches": ("Eole's batches: 64 sentences cut from 262,144-pair buckets of the corpus read in order, "
                     "sorted by length", ["trainer.valid_every=1000"], ["eole_batches"]),
}
EOLE_BUCKET, EOLE_SENTS = 262_144, 64  # eole/config/training.py: bucket_size's default; bench_small.yaml: batch_size


def unpacked() -> None:
    """Eole's encoder: every source row runs to the batch's longest length (its padding included)."""
    import nmt.encoder as enc

    pack = enc.pack_padded_sequence

    def over_the_padding(x, lengths, batch_first=True, enforce_sorted=False):
        return pack(x, [x.size(1)] * x.size(0), batch_first=batch_first, enforce_sorted=enforce_sorted)

    enc.pack_padded_sequence = over_the_padding


def eole_batches() -> None:
    """Eole's training batches (eole/inputters/dynamic_iterator.py): the corpus read in order and cycled, a bucket
    of 262,144 pairs (9.7 passes over Tatoeba) sorted by (source length, target length) with a stable sort (equal
    lengths keep reading order), cut into runs of 64, the runs shuffled. A sentence meets the same batch-mates at
    every pass, and rare length pairs put copies of one sentence into one batch. Here one bucket is an "epoch"."""
    import numpy as np

    import nmt.batching as b

    calls = [0]

    def bucket(pairs, batch_tokens, rng, max_sentences=100_000):
        start = max(0, calls[0] - 1) * EOLE_BUCKET  # nmt.train's first call only sizes an epoch (ETA)
        calls[0] += 1
        idx = (start + np.arange(EOLE_BUCKET)) % len(pairs)  # (bucket,) pair indices in reading order
        order = idx[np.lexsort((pairs.tgt_lens[idx], pairs.src_lens[idx]))]  # lexsort is stable
        groups = [(a, min(a + EOLE_SENTS, EOLE_BUCKET)) for a in range(0, EOLE_BUCKET, EOLE_SENTS)]
        rng.shuffle(groups)
        return b.Epoch(pairs, order, groups)

    b.epoch_batches = bucket


PATCHES = {"unpacked": unpacked, "eole_batches": eole_batches}


def child(name: str, run_dir: Path, data: str, steps: int) -> None:
    """Train the variant in this process (its patches applied), then score the final weights."""
    _, overrides, patches = VARIANTS[name]
    for p in patches:
        PATCHES[p]()
    if not (run_dir / "checkpoints" / "last.pt").exists():
        base = ["+experiment=bench_small", "data=files", f"data.dir={data}", "trainer.max_minutes=0",
                f"trainer.max_steps={steps}", f"trainer.valid_every={steps}", "trainer.test_beam=0",
                "trainer.precision=fp32", f"hydra.run.dir={run_dir}"]
        keys = {o.split("=", 1)[0] for o in overrides}  # a variant's value replaces the base's (Hydra takes one)
        sys.argv = ["nmt.train", *[o for o in base if o.split("=", 1)[0] not in keys], *overrides]
        try:
            runpy.run_module("nmt.train", run_name="__main__")  # as python -m nmt.train (Hydra finds nmt/configs/ so)
        except SystemExit as e:
            if e.code:
                raise
    score(run_dir, data)


def score(run_dir: Path, data: str) -> None:
    from nmt.translator import Translator

    src = Path(data, "dev.zh").read_text(encoding="utf-8").splitlines()
    ref = Path(data, "dev.en").read_text(encoding="utf-8").splitlines()
    t = Translator.load(run_dir / "checkpoints" / "last.pt", "cpu")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    out = {"steps": metrics["steps"],  # dev perplexity at each validation: Eole's log has it every 1,000 updates
           "dev_ppl": [[h["step"], h["valid_ppl"]] for h in metrics["history"] if "valid_ppl" in h]}
    for label, beam in (("greedy", 1), ("beam5", 5)):
        s = t.evaluate(src, [ref], beam=beam)
        out[f"bleu_{label}"], out[f"chrf_{label}"] = s.bleu, s.chrf
    (run_dir / "ablation.json").write_text(json.dumps(out, indent=1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="the peers' corpus folder (train/dev .zh/.en)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=8400)
    p.add_argument("--out", type=Path, default=Path("/tmp/gap_ablation"))
    p.add_argument("--reuse", action="append", default=[], metavar="VARIANT=RUN_DIR",
                   help="score an earlier run of a variant instead of training it (e.g. side_by_side's budget run)")
    p.add_argument("--json", type=Path, help="write the record here")
    p.add_argument("--child", nargs=2, metavar=("VARIANT", "RUN_DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    data = str(Path(args.data).resolve())
    if args.child:
        child(args.child[0], Path(args.child[1]), data, args.steps)
        return 0
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    reuse = dict(r.split("=", 1) for r in args.reuse)
    sys.path.insert(0, str(ROOT))
    from nmt.device import cpu_info
    from nmt.run_folder import git_commit

    record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(), "command": sys.argv,
              "cpu": cpu_info(), "data": args.data, "steps": args.steps, "rows": {}}
    for name in names:
        run_dir = Path(reuse.get(name, args.out / name)).resolve()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--data", data, "--steps", str(args.steps), "--child", name,
                        str(run_dir)], check=True, cwd=ROOT)
        row = json.loads((run_dir / "ablation.json").read_text())
        row.update(moves=VARIANTS[name][0], overrides=VARIANTS[name][1], patches=VARIANTS[name][2],
                   reused=name in reuse, wall_minutes=(time.perf_counter() - t0) / 60)
        record["rows"][name] = row
        print(f"{name}: {row['steps']} steps, BLEU greedy {row['bleu_greedy']:.2f}, beam 5 {row['bleu_beam5']:.2f}",
              flush=True)
        if args.json:
            args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
