"""Why bench-small scores above the peers: our run moved toward Eole's one factor at a time, at equal updates.

    python scripts/ablate_gap.py --data ../shared/data/tatoeba-cmn-eng --json docs/results/gap_ablation.json
    python scripts/ablate_gap.py --data ../shared/data/tatoeba-cmn-eng --variants baseline,sents64 --steps 200  # smoke

Each variant trains ``+experiment=bench_small`` on the peers' corpus for ``--steps`` updates (Eole's 15-minute run
reached 8,400: ``docs/results/side_by_side_eole.json``), in fp32, then scores its final weights (no checkpoint
chosen, as the peers' harness scores theirs) on the dev split, the peers' test set, greedy and beam 5. A variant is
config overrides plus, where no setting of ours does what the peer does, a patch applied in that variant's process
only (listed in VARIANTS; not a feature). Updates, not minutes, make the runs comparable on a busy machine.
The record (date, commit, command, CPU, one row per variant) is rewritten after every variant.

The peer moved toward us (``--eole-variants``): the harness's own ``run_eole.sh``, run in a copy of its writable
folder (``--harness``, made by ``../shared/bench/peers/run.sh``) whose data or config the variant changes; its
15-minute budget run is scored by the harness. ``--reuse eole_as_is=~/.cache/nmt-peers/bench`` reads a finished
harness run instead.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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
    "eole_batches_s43": ("the same with another seed", ["trainer.valid_every=1000", "trainer.seed=43"], ["eole_batches"]),
    "harness_spm": ("the harness's sentencepiece models (the peers' pieces), our batches", [], ["harness_spm"]),
    "eole_batches_harness_spm": ("Eole's batches and the peers' pieces", ["trainer.valid_every=1000"],
                                 ["eole_batches", "harness_spm"]),
    "eole_batches_harness_spm_s43": ("Eole's batches and the peers' pieces, another seed",
                                     ["trainer.valid_every=1000", "trainer.seed=43"], ["eole_batches", "harness_spm"]),
    "eole_batches_harness_spm_s44": ("Eole's batches and the peers' pieces, a third seed",
                                     ["trainer.valid_every=1000", "trainer.seed=44"], ["eole_batches", "harness_spm"]),
    "eole_batches_harness_spm_eole_divisor": ("and Eole's loss divisor: a batch's summed cross-entropy over its target "
                                              "tokens without EOS (ours: the mean over every term, EOS included)",
                                              ["trainer.valid_every=1000"], ["eole_batches", "harness_spm", "eole_divisor"]),
    "eole_stream_harness_spm": ("Eole's own batches, as its iterator yields them with nothing skipped (not our "
                                "imitation), and the peers' pieces", ["trainer.valid_every=1000"],
                                ["harness_spm", "eole_stream"]),
    "eole_stream_harness_spm_s43": ("the same with our seed 43 (weights, dropout; Eole's stream unchanged)",
                                    ["trainer.valid_every=1000", "trainer.seed=43"], ["harness_spm", "eole_stream"]),
    "eole_stream_harness_spm_s44": ("the same with our seed 44", ["trainer.valid_every=1000", "trainer.seed=44"],
                                    ["harness_spm", "eole_stream"]),
    "eole_batches_harness_spm_dropout0": ("and no dropout (does ours then overfit as Eole's run does?)",
                                          ["trainer.valid_every=1000", "model.dropout=0.0"], ["eole_batches", "harness_spm"]),
    "eole_batches_dedup": ("Eole's batches as Eole fills them: a pair whose source the batch already holds is skipped "
                           "(never trained from that bucket)", ["trainer.valid_every=1000"], ["eole_batches_dedup"]),
}
# the peer's variants: what moves toward us (run by eole_run)
EOLE_VARIANTS = {
    "eole_as_is": "Eole 0.6.4 as the harness runs it",
    "eole_shuffled": "the corpus in a new random order at every pass, a pass a bucket (batch-mates change, as ours)",
    "eole_shuffled_s43": "the same with another seed (Eole's and the passes' orders)",
    "eole_shuffled_steps": "eole_shuffled stopped at --steps updates, not at 15 minutes",
    "eole_dropout0": "Eole as is with dropout 0 (does its dropout act? the same score would say no)",
    "eole_keep_duplicates": "Eole as is, but a batch keeps a pair whose source it already holds (nothing skipped)",
    "eole_keep_duplicates_steps": "eole_keep_duplicates stopped at --steps updates, not at 15 minutes",
    "eole_keep_duplicates_steps_s43": "the same with Eole's seed 43 (its weights, dropout masks and batch order)",
    "eole_keep_duplicates_steps_s44": "the same with Eole's seed 44",
    "eole_keep_duplicates_steps_eos_divisor": "eole_keep_duplicates_steps with its loss divided by every target token, "
                                              "EOS included, as ours (Eole leaves EOS out of the divisor, not the loss)",
}
EOLE_PASSES = 25  # eole_shuffled: passes written (Eole's 15 minutes read about 20)
EOLE_BUCKET, EOLE_SENTS = 262_144, 64  # eole/config/training.py: bucket_size's default; bench_small.yaml: batch_size


def unpacked(run_dir: Path, harness: Path) -> None:
    """Eole's encoder: every source row runs to the batch's longest length (its padding included)."""
    import nmt.encoder as enc

    pack = enc.pack_padded_sequence

    def over_the_padding(x, lengths, batch_first=True, enforce_sorted=False):
        return pack(x, [x.size(1)] * x.size(0), batch_first=batch_first, enforce_sorted=enforce_sorted)

    enc.pack_padded_sequence = over_the_padding


def eole_fill(order: list[int], source: Sequence | dict) -> list[int]:
    """``order`` as Eole's batch_iter fills runs of EOLE_SENTS from it: a pair whose ``source[i]`` the run being filled
    already holds is skipped (``_should_deduplicate``, training only)."""
    kept, seen = [], set()
    for i in order:
        if source[i] in seen:
            continue
        kept.append(i)
        seen.add(source[i])
        if len(kept) % EOLE_SENTS == 0:
            seen = set()
    return kept


def eole_batches(run_dir: Path, harness: Path, dedup: bool = False) -> None:
    """Eole's training batches (eole/inputters/dynamic_iterator.py): the corpus read in order and cycled, a bucket
    of 262,144 pairs (9.7 passes over Tatoeba) sorted by (source length, target length) with a stable sort (equal
    lengths keep reading order), cut into runs of 64, the runs shuffled. A sentence meets the same batch-mates at
    every pass, and rare length pairs put copies of one sentence into one batch. Here one bucket is an "epoch".
    ``dedup``: as Eole's batch_iter fills a batch, a pair whose source text the batch already holds is skipped
    (``_should_deduplicate``), so a bucket yields fewer batches and a rare length pair about one copy a bucket."""
    import numpy as np

    import nmt.batching as b

    calls, source_of = [0], {}

    def distinct(pairs, order: np.ndarray) -> np.ndarray:
        if not source_of:  # a pair's source as an int: equal ids, equal text (one sentencepiece model)
            texts = {}
            source_of.update({i: texts.setdefault(tuple(s), len(texts)) for i, s in enumerate(pairs.rows(
                list(range(len(pairs))))[0])})
        return np.array(eole_fill(order.tolist(), source_of))

    def bucket(pairs, batch_tokens, rng, max_sentences=100_000):
        start = max(0, calls[0] - 1) * EOLE_BUCKET  # nmt.train's first call only sizes an epoch (ETA)
        calls[0] += 1
        idx = (start + np.arange(EOLE_BUCKET)) % len(pairs)  # (bucket,) pair indices in reading order
        order = idx[np.lexsort((pairs.tgt_lens[idx], pairs.src_lens[idx]))]  # lexsort is stable
        if dedup:
            order = distinct(pairs, order)
        groups = [(a, min(a + EOLE_SENTS, len(order))) for a in range(0, len(order), EOLE_SENTS)]
        rng.shuffle(groups)
        return b.Epoch(pairs, order, groups)

    plain = b.epoch_batches
    b.epoch_batches = bucket
    b.train_batches = lambda src, tgt, batch_tokens, rng, max_sentences=100_000: plain(  # the dev set's batches
        b.Pairs.from_lists(src, tgt), batch_tokens, rng, max_sentences)


def eole_batches_dedup(run_dir: Path, harness: Path) -> None:
    eole_batches(run_dir, harness, dedup=True)


def eole_divisor(run_dir: Path, harness: Path) -> None:
    """Eole's loss divisor in our training: a batch's summed cross-entropy over its target tokens without EOS. Eole
    0.6.4's ``Trainer._accum_batches`` counts ``tgt[:, 1:]`` (tokens and EOS) and takes one a sentence off, while its
    loss sums every term: a batch weighs (n + 1) / n times its mean for n tokens a sentence, the short most
    (scripts/compare_train_step.py measures it). Gradients only: the dev loss (no grad) stays the mean per token."""
    import torch

    import nmt.update as u
    from nmt.vocab import PAD

    plain = u.batch_loss

    def eole_divided(model, batch, label_smoothing=0.0, precision="fp32"):
        loss = plain(model, batch, label_smoothing, precision)
        if not torch.is_grad_enabled():
            return loss
        terms = (batch.tgt_out != PAD).sum()
        return loss * terms / (terms - batch.size)

    u.batch_loss = eole_divided


def eole_stream(run_dir: Path, harness: Path) -> None:
    """Eole's own training batches in its order (nothing skipped, as the eole_keep_duplicates runs): the first STEPS of
    its iterator, written by scripts/eole_train_steps.py --batches-only in Eole's venv, its pieces given our ids
    (the harness's sentencepiece models as nmt.tokenizer.with_our_ids numbers them; <blank> is our <pad>)."""
    import sentencepiece as spm
    import torch

    import nmt.batching as b
    from nmt.tokenizer import with_our_ids
    from nmt.vocab import EOS, PAD, UNK

    out = run_dir / "eole_stream"
    if not (out / "batches.pt").exists():
        subprocess.run([str(harness.parent / "eole-venv" / "bin" / "python"), str(ROOT / "scripts" / "eole_train_steps.py"),
                        str(harness / "work" / "eole" / "cfg_budget.yaml"), str(out), "--steps", str(STEPS),
                        "--batches-only", "--keep-duplicates"], cwd=harness, check=True, stdout=subprocess.DEVNULL)
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    ids = {}
    for side, lang in (("src", "zh"), ("tgt", "en")):
        sp = spm.SentencePieceProcessor(model_proto=with_our_ids((harness / "data" / f"spm.{lang}.model").read_bytes()))
        ours = [sp.piece_to_id(p) for p in vocab[side]]
        ours[:4] = [UNK, PAD, 2, EOS]  # Eole's <unk> <blank> <s> </s>
        ids[side] = torch.tensor(ours)
    batches = []
    for x in torch.load(out / "batches.pt"):
        src, tgt = ids["src"][x["src"].long()], ids["tgt"][x["tgt"].long()]
        tgt_in = tgt[:, :-1].masked_fill(tgt[:, :-1] == EOS, PAD)
        lens = x["srclen"].long()
        batches.append(b.Batch(src=src, src_lens=lens, tgt_in=tgt_in, tgt_out=tgt[:, 1:].contiguous(), host_lens=lens))

    plain = b.epoch_batches
    b.epoch_batches = lambda pairs, batch_tokens, rng, max_sentences=100_000: batches  # one "epoch": the stream
    b.train_batches = lambda src, tgt, batch_tokens, rng, max_sentences=100_000: plain(  # the dev set's batches
        b.Pairs.from_lists(src, tgt), batch_tokens, rng, max_sentences)


def harness_spm(run_dir: Path, harness: Path) -> list[str]:
    """The harness's sentencepiece models (the peers' pieces) as ours: the overrides that name them (nmt gives them its
    special ids, nmt.tokenizer.with_our_ids; the segmentation stays the harness's)."""
    return [f"tokenizer.{side}_model={harness / 'data' / f'spm.{lang}.model'}" for side, lang in (("src", "zh"), ("tgt", "en"))]


PATCHES = {"unpacked": unpacked, "eole_batches": eole_batches, "eole_batches_dedup": eole_batches_dedup,
           "harness_spm": harness_spm, "eole_divisor": eole_divisor, "eole_stream": eole_stream}
STEPS = 8400  # --steps, set by child() for the patches that need it (eole_stream)


def child(name: str, run_dir: Path, data: str, steps: int, harness: Path) -> None:
    """Train the variant in this process (its patches applied), then score the final weights."""
    global STEPS
    STEPS = steps
    _, overrides, patches = VARIANTS[name]
    overrides = overrides + [o for p in patches for o in PATCHES[p](run_dir, harness) or []]
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


def batch_mates(harness: Path, sample: int = 2000) -> dict:
    """How alike a sentence's batches are from one pass over the corpus to the next, under Eole's batching and under
    ours (64 sentences sorted by length with random tie-breaks, nmt.batching): the mean Jaccard overlap of a
    sentence's batch-mates in two passes (over ``sample`` sentences), and the distinct sentences in a batch of 64."""
    import numpy as np

    from nmt.batching import Pairs, epoch_batches

    lens = [np.array([len(x.split()) for x in (harness / "data" / "sp" / f"train.{lang}").read_text(
        encoding="utf-8").splitlines()]) for lang in ("zh", "en")]
    n = len(lens[0])
    idx = np.arange(EOLE_BUCKET) % n  # one bucket, several passes, sorted by (source, target) length, stable
    eole = idx[np.lexsort((lens[1][idx], lens[0][idx]))].reshape(-1, EOLE_SENTS).tolist()  # (batches, 64) ids
    pairs = Pairs(lens[0], lens[1], lambda ids: (ids, ids))
    ours = [[e.order[slice(*g)].tolist() for g in e.groups]
            for e in (epoch_batches(pairs, 100_000, random.Random(k), EOLE_SENTS) for k in (1, 2))]

    def passes(batches: list, first: dict, second: dict) -> None:  # a sentence's batch-mates at its 1st, 2nd batch
        for b in batches:
            for s in set(b):
                (second if s in first else first).setdefault(s, set(b) - {s})

    e1, e2, o1, o2 = {}, {}, {}, {}
    passes(eole, e1, e2)  # the stable sort puts a pair's copy from an earlier pass first
    passes(ours[0], o1, {})
    passes(ours[1], o2, {})
    picks = random.Random(0).sample(range(n), min(sample, n))

    def jaccard(a: dict, b: dict) -> float:
        return float(np.mean([len(a[s] & b[s]) / max(1, len(a[s] | b[s])) for s in picks if s in a and s in b]))

    return {"eole": {"batch_mates_jaccard": jaccard(e1, e2), "distinct_per_batch": float(np.mean([len(set(b)) for b in eole]))},
            "ours_sents64": {"batch_mates_jaccard": jaccard(o1, o2),
                             "distinct_per_batch": float(np.mean([len(set(b)) for b in ours[0]]))}}


def skipped(harness: Path, steps: int) -> dict:
    """What Eole's skipping of a source the batch already holds does to the first ``steps`` batches: batches a bucket,
    and how often a pair is trained by its source length in pieces, with the skipping and without (a simulation of
    its batch_iter on the harness's pieces; its log's bucket boundaries and batch sizes agree with it)."""
    import numpy as np

    text = [(harness / "data" / "sp" / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("zh", "en")]
    src_len, tgt_len = (np.array([len(x.split()) for x in t]) for t in text)
    n, out = len(src_len), {}
    for label, dedup in (("eole", True), ("no_skip", False)):
        trained, batches, per_bucket = np.zeros(n, dtype=np.int64), 0, []
        for k in range(steps * EOLE_SENTS // EOLE_BUCKET + 2):
            idx = (k * EOLE_BUCKET + np.arange(EOLE_BUCKET)) % n
            kept = idx[np.lexsort((tgt_len[idx], src_len[idx]))].tolist()
            if dedup:
                kept = eole_fill(kept, text[0])
            runs = [kept[a : a + EOLE_SENTS] for a in range(0, len(kept), EOLE_SENTS)]
            random.Random(k).shuffle(runs)  # Eole shuffles a bucket's batches: the last bucket is read in part
            per_bucket.append(len(runs))
            for run in runs[: steps - batches]:
                np.add.at(trained, run, 1)  # a run may hold copies of one pair (without the skipping)
            batches += len(runs)
            if batches >= steps:
                break
        rows = []
        for lo, hi in ((0, 4), (5, 9), (10, 14), (15, 19), (20, 10_000)):
            m = (src_len >= lo) & (src_len <= hi)
            rows.append({"source_pieces": f"{lo}-{hi}" if hi < 10_000 else f"{lo}+", "pairs": int(m.sum()),
                         "times_trained": float(trained[m].mean()), "never": int((trained[m] == 0).sum())})
        tok = (tgt_len + 1) * trained
        out[label] = {"batches_per_bucket": per_bucket[0], "never_trained": int((trained == 0).sum()),
                      "long_target_token_share": float(tok[src_len >= 15].sum() / tok.sum()), "by_source_length": rows}
    out["corpus_long_target_token_share"] = float((tgt_len + 1)[src_len >= 15].sum() / (tgt_len + 1).sum())
    return out


def stop_at(bench: Path, steps: int, seed: int = 0) -> None:
    """Eole's run stops at ``steps`` updates by itself (and saves there: save_checkpoint_steps divides it); ``seed``:
    Eole's seed instead of the harness's 42."""
    import yaml

    cfg_path = bench / "eole" / "bench_small.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["training"]["train_steps"] = steps
    if seed:
        cfg["seed"] = seed
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def reshuffled(bench: Path, seed: int = 1234, eole_seed: int = 42, steps: int = 0) -> None:
    """eole_shuffled: the training files become EOLE_PASSES passes over the corpus, each in its own random order, and
    Eole's bucket one pass (its reading order is then a new shuffle each pass; vocabulary counts scale alike)."""
    import yaml

    sp = bench / "data" / "sp"
    zh, en = ((sp / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("zh", "en"))
    order = list(range(len(zh)))
    with open(sp / "train.zh", "w", encoding="utf-8") as fz, open(sp / "train.en", "w", encoding="utf-8") as fe:
        for k in range(EOLE_PASSES):
            random.Random(seed + k).shuffle(order)
            fz.write("".join(zh[i] + "\n" for i in order))
            fe.write("".join(en[i] + "\n" for i in order))
    cfg_path = bench / "eole" / "bench_small.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["training"]["bucket_size"] = len(zh)
    cfg["seed"] = eole_seed
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    if steps:
        stop_at(bench, steps)


def patch_runner(bench: Path, patch: str) -> None:
    """Put ``patch`` (Python lines) into the harness copy's ``sigint_run.py``, before it runs Eole's module: Eole's
    training runs in that process on a CPU with num_workers 0."""
    runner = bench / "sigint_run.py"
    text = runner.read_text()
    if "runpy.run_module(" not in text:
        raise SystemExit(f"{runner}: no runpy.run_module( line to patch before")
    runner.write_text(text.replace("runpy.run_module(", patch + "runpy.run_module(", 1))


def keep_duplicates(bench: Path) -> None:
    """eole_keep_duplicates: Eole's batch_iter keeps every pair (its ``_should_deduplicate`` returns True)."""
    patch_runner(bench, "import eole.inputters.dynamic_iterator as _d  # ablate_gap.py: eole_keep_duplicates\n"
                        "_d.DynamicDatasetIter._should_deduplicate = lambda self, src_text, seen: True\n")


def eos_divisor(bench: Path) -> None:
    """*_eos_divisor: Eole's loss divided by every target token, EOS included, as ours: ``Trainer._accum_batches``
    yields its divisor (tokens without EOS, normalization: tokens) plus one a sentence."""
    patch_runner(bench, "import eole.trainer as _t  # ablate_gap.py: eole_eos_divisor\n"
                        "_acc = _t.Trainer._accum_batches\n"
                        "_t.Trainer._accum_batches = lambda self, it: ((bs, n + sum(len(b['tgt']) for b in bs)) "
                        "for bs, n in _acc(self, it))\n")


def eole_run(name: str, harness: Path, bench: Path, batch1: bool = False, steps: int = 0) -> dict:
    """Run (unless done) the harness's run_eole.sh in ``bench``, a copy of ``harness`` changed for the variant; the row
    (with ``batch1`` also greedy BLEU decoding one sentence a batch)."""
    if not (bench / "results" / "eole.json").exists():
        if not (harness / "data" / "meta.json").exists():
            raise SystemExit(f"--harness {harness}: no prepared data (data/meta.json); run ../shared/bench/peers/run.sh once")
        shutil.rmtree(bench, ignore_errors=True)
        shutil.copytree(harness, bench, ignore=shutil.ignore_patterns("work", "results"))
        if name == "eole_shuffled":
            reshuffled(bench)
        elif name == "eole_shuffled_s43":
            reshuffled(bench, 1234 + 43, 43)
        elif name == "eole_shuffled_steps":
            reshuffled(bench, steps=steps)
        elif name == "eole_dropout0":
            import yaml

            cfg_path = bench / "eole" / "bench_small.yaml"
            cfg = yaml.safe_load(cfg_path.read_text())
            cfg["training"]["dropout"] = [0.0]
            cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        elif name.startswith("eole_keep_duplicates"):
            keep_duplicates(bench)
            if name.endswith("_eos_divisor"):
                eos_divisor(bench)
            if "_steps" in name:
                seed = re.search(r"_s(\d+)$", name)
                stop_at(bench, steps, int(seed.group(1)) if seed else 0)
        env = {**os.environ, "BENCH_DECODE_BATCH": "default", "BENCH_TPUT_REPEATS": "1", "BENCH_TPUT_WARMUP": "50",
               "BENCH_TPUT_STEPS": "50", "BENCH_DECODE_REPEATS": "1"}  # multiples of its report_every (50)
        if "_steps" in name:
            env["BENCH_BUDGET_S"] = "14400"  # the update count stops it, not the clock
        subprocess.run(["bash", str(bench / "run_eole.sh")], env=env, check=True)
    r = json.loads((bench / "results" / "eole.json").read_text())
    log = (bench / "work" / "eole" / "budget.log").read_text(encoding="utf-8", errors="replace")
    ppl = [float(x) for x in re.findall(r"Validation perplexity: ([0-9.]+)", log)]
    every = int(re.search(r"valid_steps: (\d+)", (bench / "work" / "eole" / "cfg_budget.yaml").read_text()).group(1))
    row = {"steps": r["budget"]["steps_at_eval_checkpoint"], "dev_ppl": [[every * (i + 1), p] for i, p in enumerate(ppl)]}
    for label in ("greedy", "beam5"):
        row[f"bleu_{label}"], row[f"chrf_{label}"] = r["test"][label]["bleu"], r["test"][label]["chrf"]
    from decode_side_by_side import peer_decode

    checkpoint = str(bench / "work" / "eole" / "budget" / r["budget"]["eval_checkpoint"])
    work, venvs = Path(tempfile.mkdtemp(prefix="ablate_gap_eole_")), harness.parent  # run.sh's venvs, beside it
    if r["test"]["beam5"]["batch_setting"] != "default":  # a run decoded at large batches: its checkpoint again, at Eole's
        for label, beam in (("greedy", 1), ("beam5", 5)):  # default (its BLEU falls at large batches: benchmarks.md)
            row[f"bleu_{label}"] = peer_decode("eole", bench, checkpoint, beam, "default", 2, work, venvs)["bleu"]
            row[f"chrf_{label}"] = None  # the harness's score writes BLEU only to what peer_decode returns
    if batch1:  # one sentence a batch: no padding in Eole's inference, which reads it (its BLEU falls with batch size)
        row["bleu_greedy_sents1"] = peer_decode("eole", bench, checkpoint, 1, "sents:1", 2, work, venvs)["bleu"]
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="the peers' corpus folder (train/dev .zh/.en)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--eole-variants", default="", help=f"the peer moved toward us: {', '.join(EOLE_VARIANTS)}")
    p.add_argument("--harness", type=Path, default=Path.home() / ".cache/nmt-peers/bench",
                   help="the harness's writable copy with prepared data (../shared/bench/peers/run.sh makes it)")
    p.add_argument("--eole-batch1", action="store_true",
                   help="also decode each Eole model greedily one sentence a batch (no padding read; about 2 minutes)")
    p.add_argument("--steps", type=int, default=8400)
    p.add_argument("--out", type=Path, default=Path("/tmp/gap_ablation"))
    p.add_argument("--reuse", action="append", default=[], metavar="VARIANT=RUN_DIR",
                   help="score an earlier run of a variant instead of training it (e.g. side_by_side's budget run)")
    p.add_argument("--json", type=Path, help="write the record here")
    p.add_argument("--child", nargs=2, metavar=("VARIANT", "RUN_DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    data = str(Path(args.data).resolve())
    if args.child:
        child(args.child[0], Path(args.child[1]), data, args.steps, args.harness.expanduser().resolve())
        return 0
    names = [n for n in args.variants.split(",") if n]
    peer_names = [n for n in args.eole_variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS] + [n for n in peer_names if n not in EOLE_VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {', '.join(unknown)} (known: {', '.join([*VARIANTS, *EOLE_VARIANTS])})")
    reuse = dict(r.split("=", 1) for r in args.reuse)
    sys.path.insert(0, str(ROOT))
    from nmt.device import cpu_info
    from nmt.run_folder import git_commit

    record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(), "command": sys.argv,
              "cpu": cpu_info(), "data": args.data, "steps": args.steps, "rows": {}}
    if any(n.startswith("eole_batches") for n in names):
        record["batch_mates"] = batch_mates(args.harness.expanduser().resolve())
    if "eole_batches_dedup" in names or "eole_keep_duplicates" in peer_names:
        record["skipped"] = skipped(args.harness.expanduser().resolve(), args.steps)
    for name in names:
        run_dir = Path(reuse.get(name, args.out / name)).resolve()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--data", data, "--steps", str(args.steps), "--harness",
                        str(args.harness), "--child", name, str(run_dir)], check=True, cwd=ROOT)
        row = json.loads((run_dir / "ablation.json").read_text())
        row.update(moves=VARIANTS[name][0], overrides=VARIANTS[name][1], patches=VARIANTS[name][2],
                   reused=name in reuse, wall_minutes=(time.perf_counter() - t0) / 60)
        record["rows"][name] = row
        print(f"{name}: {row['steps']} steps, BLEU greedy {row['bleu_greedy']:.2f}, beam 5 {row['bleu_beam5']:.2f}",
              flush=True)
        if args.json:
            args.json.write_text(json.dumps(record, indent=1) + "\n")
    record["peer_rows"] = {}
    for name in peer_names:
        t0 = time.perf_counter()
        bench = Path(reuse.get(name, args.out / name)).expanduser().resolve()
        row = eole_run(name, args.harness.expanduser().resolve(), bench, args.eole_batch1, args.steps)
        row.update(moves=EOLE_VARIANTS[name], reused=name in reuse, wall_minutes=(time.perf_counter() - t0) / 60)
        record["peer_rows"][name] = row
        print(f"{name}: {row['steps']} steps, BLEU greedy {row['bleu_greedy']:.2f}, beam 5 {row['bleu_beam5']:.2f}",
              flush=True)
        if args.json:
            args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
