"""scripts/compare_streams.py: a stream of Eole's batches beside our imitation, pair by pair, as a subprocess."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import compare_streams  # noqa: E402


def harness(tmp_path: Path, n: int = 120) -> Path:
    """A harness folder whose data/sp holds ``n`` pairs of pieces of mixed lengths (one duplicated line)."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(40)]
    lines = [(" ".join(rng.choices(words, k=rng.randint(1, 9))), " ".join(rng.choices(words, k=rng.randint(1, 9))))
             for _ in range(n - 1)]
    lines.append(lines[0])
    sp = tmp_path / "bench" / "data" / "sp"
    sp.mkdir(parents=True)
    for k, lang in enumerate(("zh", "en")):
        (sp / f"train.{lang}").write_text("".join(pair[k] + "\n" for pair in lines), encoding="utf-8")
    return tmp_path / "bench"


def write_stream(folder: Path, batches: list[list[tuple[str, str]]]) -> None:
    """``batches`` as eole_train_steps.py --batches-only writes them: Eole's ids, <s> </s> around the target,
    <blank> (1) padding, no BOS or EOS on the source."""
    vocab = {side: ["<unk>", "<blank>", "<s>", "</s>"] for side in ("src", "tgt")}
    ids = {side: {p: i for i, p in enumerate(v)} for side, v in vocab.items()}

    def encode(side: str, text: str) -> list[int]:
        for p in text.split():
            if p not in ids[side]:
                ids[side][p] = len(vocab[side])
                vocab[side].append(p)
        return [ids[side][p] for p in text.split()]

    def pad(rows: list[list[int]]) -> torch.Tensor:  # <blank> (1) after the shorter rows
        return torch.tensor([r + [1] * (max(map(len, rows)) - len(r)) for r in rows], dtype=torch.int32)

    out = []
    for batch in batches:
        src = [encode("src", s) for s, _ in batch]
        tgt = [[2, *encode("tgt", t), 3] for _, t in batch]
        out.append({"src": pad(src), "srclen": torch.tensor([len(r) for r in src], dtype=torch.int32), "tgt": pad(tgt)})
    folder.mkdir()
    torch.save(out, folder / "batches.pt")
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")


def test_a_stream_of_the_imitations_own_batches_in_another_order_differs_only_in_order(tmp_path):
    bench = harness(tmp_path)
    pairs = compare_streams.harness_pairs(bench)
    ours = compare_streams.imitation(pairs, 300, bench)
    shuffled = ours[:]
    random.Random(5).shuffle(shuffled)
    write_stream(tmp_path / "stream", shuffled + [[("w1 w2 w3", "not in the corpus")] * 64])
    out = tmp_path / "record.json"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "compare_streams.py"), str(tmp_path / "stream"),
                           "--harness", str(bench), "--json", str(out)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["corpus_pairs"] == 120 and r["corpus_texts"] == 119
    assert r["eole"]["batches"] == r["imitation"]["batches"] == 301
    assert r["eole"]["not_in_corpus"] == 1 and r["imitation"]["not_in_corpus"] == 0
    # the first 300 batches of each are the same batches: all of the imitation's contents are in both
    assert r["batches_in_both"] == len({tuple(sorted(b)) for b in ours})
    assert r["eole"]["sentences_per_batch"] == 64.0
    assert 0 < r["eole"]["distinct_sources_per_batch"] <= 64


def test_the_imitation_leaves_nmt_batching_as_it_was(tmp_path):
    import nmt.batching as b

    before = b.epoch_batches, b.train_batches
    bench = harness(tmp_path)
    compare_streams.imitation(compare_streams.harness_pairs(bench), 10, bench)
    assert (b.epoch_batches, b.train_batches) == before


def test_spearman_of_ties_and_of_a_reversal():
    import numpy as np

    x = np.array([1, 2, 2, 3, 5])
    assert compare_streams.spearman(x, x) == 1.0
    assert abs(compare_streams.spearman(x, -x) + 1.0) < 1e-12
