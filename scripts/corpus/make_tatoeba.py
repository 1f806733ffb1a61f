"""Build the packaged default corpus ``data/tatoeba/`` from the Tatoeba cmn-eng copy.

    python scripts/corpus/make_tatoeba.py ../shared/data/tatoeba-cmn-eng

Writes ``{train,dev,test}.parquet`` (columns ``zh``, ``en``, ``attribution``; zstd) and
``SHA256SUMS``. Dev is the copy's dev split as it is. Test is about ``--test-size`` pairs held
out of the copy's train split with a fixed seed: pairs that share a sentence on either side
(after the normalization training applies: NFKC, whitespace, traditional -> simplified, case)
are grouped first, and a whole group goes to one split, so that no test sentence occurs in
train or dev. Groups that touch a dev sentence stay in train. The text is stored as in the copy:
normalization happens when the corpus is loaded.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nmt.data.normalize import normalizer  # noqa: E402
from nmt.data.text import read_lines, read_parallel  # noqa: E402

MAX_GROUP = 20  # a group larger than this (a very common sentence) is never held out whole


def _groups(zh: list[str], en: list[str]) -> list[list[int]]:
    """Connected components of pairs linked by a shared (normalized) Chinese or English sentence."""
    parent = list(range(len(zh)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, key in enumerate(zip(zh, en)):
        for side, text in zip(("zh", "en"), key):
            j = first.setdefault((side, text), i)
            parent[find(i)] = find(j)
    out: dict[int, list[int]] = {}
    for i in range(len(zh)):
        out.setdefault(find(i), []).append(i)
    return list(out.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", type=Path, help="folder with {train,dev}.{zh,en,attribution}")
    p.add_argument("--out", type=Path, default=REPO / "data" / "tatoeba")
    p.add_argument("--test-size", type=int, default=1000)
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args()

    splits = {}
    for split in ("train", "dev"):
        pairs = read_parallel(args.src / f"{split}.zh", args.src / f"{split}.en")
        attribution = read_lines(args.src / f"{split}.attribution")
        if len(attribution) != len(pairs):
            sys.exit(f"{args.src}/{split}.attribution has {len(attribution)} lines, not {len(pairs)}")
        splits[split] = [(z, e, a) for (z, e), a in zip(pairs, attribution)]

    zh_norm, en_norm = normalizer("t2s"), normalizer(None)

    def keys(rows):
        return [zh_norm(z).lower() for z, _, _ in rows], [en_norm(e).lower() for _, e, _ in rows]

    train = splits["train"]
    tz, te = keys(train)
    dz, de = keys(splits["dev"])
    dev_zh, dev_en = set(dz), set(de)
    groups = _groups(tz, te)
    eligible = [g for g in groups if len(g) <= MAX_GROUP
                and not any(tz[i] in dev_zh or te[i] in dev_en for i in g)]
    random.Random(args.seed).shuffle(eligible)
    held: list[int] = []
    for g in eligible:
        if len(held) >= args.test_size:
            break
        held.extend(g)
    held_set = set(held)
    splits["test"] = [train[i] for i in sorted(held_set)]
    splits["train"] = [row for i, row in enumerate(train) if i not in held_set]
    overlap_dev = sum(1 for i in range(len(train)) if i not in held_set and (tz[i] in dev_zh or te[i] in dev_en))
    print(f"{len(groups)} groups in train; test: {len(splits['test'])} pairs in "
          f"{sum(1 for g in eligible if set(g) <= held_set)} groups; "
          f"train pairs sharing a normalized sentence with dev (kept in train): {overlap_dev}")

    args.out.mkdir(parents=True, exist_ok=True)
    sums = []
    for split in ("train", "dev", "test"):
        rows = splits[split]
        table = pa.table({"zh": [r[0] for r in rows], "en": [r[1] for r in rows], "attribution": [r[2] for r in rows]})
        path = args.out / f"{split}.parquet"
        pq.write_table(table, path, compression="zstd", compression_level=19, use_dictionary=False)
        sums.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
        print(f"{path}: {len(rows)} pairs, {path.stat().st_size:,} bytes")
    (args.out / "SHA256SUMS").write_text("\n".join(sums) + "\n")


if __name__ == "__main__":
    main()
