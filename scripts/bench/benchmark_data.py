"""Preprocessing at scale: pairs/s and peak memory of ``nmt.data.prepare`` on synthetic corpora.

    python scripts/bench/benchmark_data.py --vocab-from ../shared/data/tatoeba-cmn-eng --pairs 1000000 2000000 --json data.json

For each size, writes a synthetic corpus of that many pairs (sentence lengths and tokens drawn
from the real corpus's distributions, with 5% duplicates and 1% bad pairs for the filters to
catch), then runs the full pipeline in a fresh process: file check, Arrow copy, cleaning and
filtering, sentencepiece on a bounded sample, encoding, caching. Reports pairs/s, the peak
memory of the process tree (main process plus workers: proportional set size from /proc every 0.2 s, in all and
anonymous, i.e. without the memory-mapped file pages the kernel can drop), the cached restart
time (a second process that finds the prepared corpus) and the time to order one epoch.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402

CHILD = r"""
import json, sys, time
from omegaconf import OmegaConf
from nmt.config import DataConfig, TokenizerConfig
t0 = time.perf_counter()
from nmt.data.prepare import prepare
from nmt.batching import epoch_batches
import random
data = OmegaConf.structured(DataConfig(source="files", dir=sys.argv[1], num_proc=int(sys.argv[3])))
tok = OmegaConf.structured(TokenizerConfig(input_sentence_size=int(sys.argv[2])))
t1 = time.perf_counter()
p = prepare(data, tok, seed=1)
t2 = time.perf_counter()
epoch = epoch_batches(p.train, 4096, random.Random(0))
first = epoch[0]
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "prepare_s": t2 - t1, "epoch_order_s": t3 - t2, "batches": len(epoch),
                  "train_pairs": len(p.train), "report": p.report["train"]}))
"""


def tree_pss_mb(root: int) -> tuple[float, float]:
    """Proportional set size of ``root`` and all its descendants (Linux /proc), in all and its
    anonymous part: pages shared by forked workers count once in total, not once per process as
    a sum of RSS would; the rest is file pages (memory-mapped Arrow tables, libraries), which the
    kernel can drop and re-read."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    keep, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for c, pp in parent.items():
            if pp == p and c not in keep:
                keep.add(c)
                frontier.append(c)
    total = anon = 0
    for p in keep:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                fields = {k: v for k, v in (line.split(":", 1) for line in f if ":" in line and not line[0].isdigit())}
            total += int(fields["Pss"].split()[0])
            anon += int(fields["Pss_Anon"].split()[0])
        except (OSError, KeyError, ValueError):
            continue
    return total / 1024, anon / 1024


def run_measured(cmd: list[str], env: dict) -> tuple[dict, float, tuple[float, float]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peak = [0.0, 0.0]  # all, anonymous

    def sample() -> None:
        while proc.poll() is None:
            total, anon = tree_pss_mb(proc.pid)
            peak[0], peak[1] = max(peak[0], total), max(peak[1], anon)
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    t.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    t.join()
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return json.loads(out.strip().splitlines()[-1]), wall, (peak[0], peak[1])


def make_corpus(folder: Path, n: int, vocab_from: Path, seed: int) -> None:
    """n synthetic pairs from the real corpus's characters, words and length distributions."""
    zh_lines = (vocab_from / "train.zh").read_text(encoding="utf-8").splitlines()
    en_lines = (vocab_from / "train.en").read_text(encoding="utf-8").splitlines()
    chars = Counter(c for line in zh_lines for c in line if not c.isspace())
    words = Counter(w for line in en_lines for w in line.split())
    zh_vocab, zh_w = list(chars), list(itertools.accumulate(chars.values()))  # cumulative weights
    en_vocab, en_w = list(words), list(itertools.accumulate(words.values()))
    zh_lens, en_lens = [len(x) for x in zh_lines], [len(x.split()) for x in en_lines]
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, str]] = []
    with open(folder / "train.zh", "w", encoding="utf-8") as fz, open(folder / "train.en", "w", encoding="utf-8") as fe:
        for _ in range(n):
            r = rng.random()
            if r < 0.05 and made:  # an exact duplicate
                zh, en = made[rng.randrange(len(made))]
            elif r < 0.06:  # something for the filters: empty side, wrong script, control character
                zh, en = rng.choice([("", "empty source"), ("hello world", "no chinese"), ("坏\x07的", "bell")])
            else:
                k = rng.randrange(len(zh_lens))
                zh = "".join(rng.choices(zh_vocab, cum_weights=zh_w, k=max(1, zh_lens[k])))
                en = " ".join(rng.choices(en_vocab, cum_weights=en_w, k=max(1, en_lens[k])))
                if len(made) < 10_000:
                    made.append((zh, en))
            fz.write(zh + "\n")
            fe.write(en + "\n")
    for side in ("zh", "en"):  # a small dev split from the real corpus
        lines = (vocab_from / f"train.{side}").read_text(encoding="utf-8").splitlines()[:500]
        (folder / f"dev.{side}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab-from", type=Path, required=True, help="a files corpus (train.zh/train.en) to draw from")
    p.add_argument("--pairs", type=int, nargs="+", default=[1_000_000, 2_000_000])
    p.add_argument("--sample", type=int, default=1_000_000, help="tokenizer.input_sentence_size")
    p.add_argument("--num-proc", type=int, default=0, help="data.num_proc (0: one per core)")
    p.add_argument("--work", type=Path, help="where corpora and caches go (default: a temporary folder)")
    p.add_argument("--json")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="nmt-data-bench-"))
    rows = []
    for n in args.pairs:
        corpus = work / f"corpus{n}"
        t0 = time.perf_counter()
        if not (corpus / "train.en").exists():
            make_corpus(corpus, n, args.vocab_from, seed=n)
        made_s = time.perf_counter() - t0
        env = {**os.environ, "NMT_CACHE": str(work / f"cache{n}"), "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
        cmd = [sys.executable, "-c", CHILD, str(corpus), str(args.sample), str(args.num_proc)]
        cold, cold_wall, cold_peak = run_measured(cmd, env)
        warm, warm_wall, warm_peak = run_measured(cmd, env)
        row = {
            "pairs": n, "corpus_mb": round(sum(f.stat().st_size for f in corpus.glob("train.*")) / 2**20, 1),
            "kept": cold["train_pairs"], "dropped": {k: v for k, v in cold["report"].items() if k not in ("read", "kept") and v},
            "prepare_s": round(cold["prepare_s"], 1), "pairs_per_s": round(n / cold["prepare_s"]),
            "peak_pss_mb": round(cold_peak[0]), "peak_anon_mb": round(cold_peak[1]),
            "cached_prepare_s": round(warm["prepare_s"], 2), "cached_process_wall_s": round(warm_wall, 1),
            "cached_peak_pss_mb": round(warm_peak[0]), "cached_peak_anon_mb": round(warm_peak[1]),
            "epoch_order_s": round(warm["epoch_order_s"], 2), "batches": warm["batches"], "corpus_made_s": round(made_s, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'pairs':>10} {'prepare s':>10} {'pairs/s':>9} {'peak MB':>8} {'anon MB':>8} {'cached s':>9} "
          f"{'cached MB':>10} {'anon MB':>8} {'epoch s':>8}")
    for r in rows:
        print(f"{r['pairs']:>10,} {r['prepare_s']:>10} {r['pairs_per_s']:>9,} {r['peak_pss_mb']:>8} {r['peak_anon_mb']:>8} "
              f"{r['cached_prepare_s']:>9} {r['cached_peak_pss_mb']:>10} {r['cached_peak_anon_mb']:>8} {r['epoch_order_s']:>8}")
    save(args.json, record({"sample": args.sample, "num_proc": args.num_proc, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
