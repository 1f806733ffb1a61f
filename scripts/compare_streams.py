"""Eole's own training batches against our imitation of them (ablate_gap.py's ``eole_batches``), pair by pair.

    python scripts/compare_streams.py /tmp/gap7/eole_stream_harness_spm/eole_stream --json docs/results/stream_compare.json

STREAM is the folder ``scripts/eole_train_steps.py --batches-only --keep-duplicates`` wrote (``batches.pt``,
``vocab.json``): the first updates' batches of Eole 0.6.4's iterator. The imitation is built by the very patch
``ablate_gap.py`` trains with (``eole_batches``, trainer seed 42), over the harness's pieces. A pair is its text
(source and target pieces), so the corpus's duplicate lines count as one. Per stream: the batches' sizes and
lengths, distinct sources a batch, how often each pair is trained (spread, never, most), when pairs are first met,
the mean source length over the run (a curriculum shows as a trend) and from one batch to the next (an order kept by
length shows as a correlation), how far apart a batch's repeats come; between them, how alike the pairs'
counts are (Spearman) and how many batches hold the same pairs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
WINDOW = 700  # batches a window of the length curve


def harness_pairs(harness: Path) -> list[tuple[str, str]]:
    """The training pairs as the peers read them: source and target pieces, one line each."""
    src, tgt = ((harness / "data" / "sp" / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("zh", "en"))
    if len(src) != len(tgt):
        raise SystemExit(f"{harness}/data/sp: train.zh has {len(src)} lines, train.en {len(tgt)}")
    return list(zip(src, tgt))


def eole_stream(folder: Path) -> list[list[tuple[str, str]]]:
    """Eole's batches as lists of (source, target) piece strings (no <s>, </s> or padding)."""
    import torch

    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    special = {"<blank>", "<s>", "</s>"}
    batches = []
    for x in torch.load(folder / "batches.pt"):
        src = [" ".join(p for p in (vocab["src"][i] for i in row) if p not in special) for row in x["src"].tolist()]
        tgt = [" ".join(p for p in (vocab["tgt"][i] for i in row) if p not in special) for row in x["tgt"].tolist()]
        batches.append(list(zip(src, tgt)))
    return batches


def imitation(pairs: list[tuple[str, str]], steps: int, harness: Path, seed: int = 42) -> list[list[tuple[str, str]]]:
    """The first ``steps`` batches of ablate_gap's ``eole_batches`` patch, through nmt.batching as training calls it."""
    import ablate_gap

    import nmt.batching as b

    plain = b.epoch_batches, b.train_batches
    ablate_gap.eole_batches(Path("."), harness)  # patches nmt.batching's epoch_batches and train_batches
    try:
        src_lens = np.array([len(s.split()) + 1 for s, _ in pairs])  # + EOS, as our encoding (the sort is the same)
        tgt_lens = np.array([len(t.split()) + 1 for _, t in pairs])
        corpus = b.Pairs(src_lens, tgt_lens, lambda ids: (ids, ids))
        b.epoch_batches(corpus, 700, random.Random(0))  # nmt.train's first call sizes an epoch
        rng, batches = random.Random(seed), []
        while len(batches) < steps:
            epoch = b.epoch_batches(corpus, 700, rng, 64)
            batches += [[pairs[i] for i in epoch.order[slice(*g)].tolist()] for g in epoch.groups]
    finally:
        b.epoch_batches, b.train_batches = plain
    return batches[:steps]


def describe(batches: list[list[tuple[str, str]]], corpus: set) -> dict:
    """One stream's figures (see the module's docstring)."""
    counts = Counter(p for batch in batches for p in batch)
    first: dict = {}
    for k, batch in enumerate(batches):
        for p in batch:
            first.setdefault(p, k)
    trained = np.array([counts.get(p, 0) for p in corpus])
    src_len = np.array([np.mean([len(s.split()) for s, _ in batch]) for batch in batches])
    met = np.array(sorted(first.values()))
    return {
        "batches": len(batches),
        "sentences_per_batch": float(np.mean([len(b) for b in batches])),
        "target_pieces_per_batch": float(np.mean([sum(len(t.split()) for _, t in b) for b in batches])),
        "distinct_sources_per_batch": float(np.mean([len({s for s, _ in b}) for b in batches])),
        "distinct_batches": len({tuple(sorted(b)) for b in batches}),
        "pair_counts": {"mean": float(trained.mean()), "std": float(trained.std()), "never": int((trained == 0).sum()),
                        "max": int(trained.max()), "p10": float(np.percentile(trained, 10)),
                        "p90": float(np.percentile(trained, 90))},
        "pairs_met_by": {str(k): int(np.searchsorted(met, k)) for k in (500, 1000, 2000, 4200, len(batches))},
        "source_length_by_window": [round(float(src_len[i:i + WINDOW].mean()), 2) for i in range(0, len(batches), WINDOW)],
        "source_length_lag1_correlation": float(np.corrcoef(src_len[:-1], src_len[1:])[0, 1]),  # order kept by length?
        "repeat_gap_median": repeat_gap(batches),
        "not_in_corpus": sum(1 for p in counts if p not in corpus),
    }


def repeat_gap(batches: list[list[tuple[str, str]]]) -> float:
    """The median number of batches between two batches of the same content (a bucket repeats some)."""
    last: dict = {}
    gaps = []
    for k, batch in enumerate(batches):
        key = tuple(sorted(batch))
        if key in last:
            gaps.append(k - last[key])
        last[key] = k
    return float(np.median(gaps)) if gaps else 0.0


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    def ranks(x: np.ndarray) -> np.ndarray:
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x))
        for v in np.unique(x):  # ties share their mean rank
            tied = x == v
            r[tied] = r[tied].mean()
        return r

    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stream", type=Path, help="the folder eole_train_steps.py --batches-only wrote")
    p.add_argument("--harness", type=Path, default=Path.home() / ".cache/nmt-peers/bench")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    from nmt.device import cpu_info
    from nmt.run_folder import git_commit

    harness = args.harness.expanduser().resolve()
    pairs = harness_pairs(harness)
    corpus = set(pairs)
    eole = eole_stream(args.stream)
    ours = imitation(pairs, len(eole), harness)
    figures = {"eole": describe(eole, corpus), "imitation": describe(ours, corpus)}
    counts = [Counter(x for batch in s for x in batch) for s in (eole, ours)]
    keys = sorted(corpus)
    figures["pair_count_spearman"] = spearman(*(np.array([c.get(k, 0) for k in keys]) for c in counts))
    same = {tuple(sorted(b)) for b in eole} & {tuple(sorted(b)) for b in ours}
    figures["batches_in_both"] = len(same)
    record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(), "command": sys.argv,
              "cpu": cpu_info(), "stream": str(args.stream), "corpus_pairs": len(pairs), "corpus_texts": len(corpus),
              **figures}
    print(json.dumps(record, indent=1))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
