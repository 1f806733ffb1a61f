"""scripts/ablate_gap.py: its Eole-like encoder patch changes exactly what it claims to."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import ablate_gap  # noqa: E402

from nmt import encoder as enc  # noqa: E402


def test_unpacked_runs_the_encoder_over_the_padding(monkeypatch, tmp_path):
    """With the patch the shorter row's memory and final state change (its padding is read); the longest row's not."""
    monkeypatch.setattr(enc, "pack_padded_sequence", enc.pack_padded_sequence)  # undone after the test
    torch.manual_seed(0)
    model = enc.Encoder(50, 8, 8, 2, True, "lstm", 0.0).eval()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    lens = torch.tensor([4, 2])
    mem, (h, _) = model(src, lens)
    ablate_gap.unpacked(tmp_path, tmp_path)
    mem2, (h2, _) = model(src, lens)
    assert torch.allclose(mem[0], mem2[0]) and torch.allclose(h[:, 0], h2[:, 0])
    assert not torch.allclose(h[:, 1], h2[:, 1]) and not torch.allclose(mem[1, :2], mem2[1, :2])


def test_eole_batches_read_the_corpus_in_order_sorted_by_length(monkeypatch, tmp_path):
    """A bucket is EOLE_BUCKET pairs read in corpus order (cycling), sorted by (source, target) length with ties in
    reading order, cut into runs of 64; the next bucket reads on where this one stopped (nmt.train's first call only
    sizes an epoch and reads nothing)."""
    import random

    import numpy as np

    from nmt import batching

    monkeypatch.setattr(batching, "epoch_batches", batching.epoch_batches)  # undone after the test
    monkeypatch.setattr(batching, "train_batches", batching.train_batches)
    monkeypatch.setattr(ablate_gap, "EOLE_BUCKET", 300)
    ablate_gap.eole_batches(tmp_path, tmp_path)
    src = [[4] * (1 + i % 5) for i in range(110)]  # 110 pairs, source lengths 1..5
    tgt = [[4] * (1 + i % 3) for i in range(110)]
    pairs = batching.Pairs.from_lists(src, tgt)
    rng = random.Random(0)
    dev = batching.train_batches(src[:10], tgt[:10], 700, rng)  # the dev set's batches: ours, untouched
    assert sum(b.size for b in dev) == 10
    batching.epoch_batches(pairs, 700, rng)  # the sizing call
    first, second = (batching.epoch_batches(pairs, 700, rng) for _ in range(2))
    assert len(first) == 5 and sum(b.size for b in first) == 300
    keys = [(len(src[i]), len(tgt[i]), k) for k, i in enumerate((np.arange(300) % 110).tolist())]
    want = [k[2] % 110 for k in sorted(keys)]  # stable: ties in reading order
    assert first.order.tolist() == want
    assert second.order.tolist() == [(k[2] + 300) % 110 for k in sorted(
        (len(src[(j + 300) % 110]), len(tgt[(j + 300) % 110]), j) for j in range(300))]
    assert sorted(b - a for a, b in first.groups) == [44, 64, 64, 64, 64] and min(first.groups) == (0, 64)


def test_reshuffled_writes_shuffled_passes_and_a_one_pass_bucket(tmp_path):
    """eole_shuffled: every pass holds each pair once, aligned, in an order of its own; Eole's bucket is one pass."""
    import yaml

    sp = tmp_path / "data" / "sp"
    sp.mkdir(parents=True)
    (tmp_path / "eole").mkdir()
    zh = [f"z{i}" for i in range(30)]
    (sp / "train.zh").write_text("".join(x + "\n" for x in zh), encoding="utf-8")
    (sp / "train.en").write_text("".join(x.replace("z", "e") + "\n" for x in zh), encoding="utf-8")
    (tmp_path / "eole" / "bench_small.yaml").write_text("seed: 42\ntraining:\n  batch_size: 64\n")
    ablate_gap.reshuffled(tmp_path)
    got_zh = (sp / "train.zh").read_text(encoding="utf-8").splitlines()
    got_en = (sp / "train.en").read_text(encoding="utf-8").splitlines()
    assert len(got_zh) == 30 * ablate_gap.EOLE_PASSES
    assert [z.replace("z", "e") for z in got_zh] == got_en
    passes = [got_zh[k * 30:(k + 1) * 30] for k in range(ablate_gap.EOLE_PASSES)]
    assert all(sorted(p) == sorted(zh) for p in passes) and passes[0] != passes[1] and passes[0] != zh
    cfg = yaml.safe_load((tmp_path / "eole" / "bench_small.yaml").read_text())
    assert cfg["training"] == {"batch_size": 64, "bucket_size": 30} and cfg["seed"] == 42


def test_stop_at_sets_eoles_update_count_and_seed(tmp_path):
    """The *_steps variants stop Eole at an update count; *_steps_s43 also gives it seed 43; other keys stay."""
    import yaml

    (tmp_path / "eole").mkdir()
    cfg_path = tmp_path / "eole" / "bench_small.yaml"
    cfg_path.write_text("seed: 42\ntraining:\n  batch_size: 64\n  train_steps: 1000000\n")
    ablate_gap.stop_at(tmp_path, 8400)
    assert yaml.safe_load(cfg_path.read_text()) == {"seed": 42, "training": {"batch_size": 64, "train_steps": 8400}}
    ablate_gap.stop_at(tmp_path, 8400, 43)
    assert yaml.safe_load(cfg_path.read_text()) == {"seed": 43, "training": {"batch_size": 64, "train_steps": 8400}}


def test_harness_spm_names_the_harness_models(tmp_path):
    """The variant trains on the harness's own sentencepiece files (nmt moves their special ids: test_tokenizer.py)."""
    assert ablate_gap.harness_spm(tmp_path / "run", tmp_path) == [
        f"tokenizer.src_model={tmp_path / 'data' / 'spm.zh.model'}", f"tokenizer.tgt_model={tmp_path / 'data' / 'spm.en.model'}"]


def test_eole_batches_dedup_skips_a_source_the_batch_already_holds(monkeypatch, tmp_path):
    """As Eole's batch_iter fills a batch: a pair whose source is already in the batch of 64 being filled is dropped,
    so a bucket of many copies of few sources yields fewer batches, each of distinct sources."""
    import random

    from nmt import batching

    monkeypatch.setattr(batching, "epoch_batches", batching.epoch_batches)  # undone after the test
    monkeypatch.setattr(batching, "train_batches", batching.train_batches)
    monkeypatch.setattr(ablate_gap, "EOLE_BUCKET", 640)
    ablate_gap.eole_batches_dedup(tmp_path, tmp_path)
    src = [[4 + i % 70, 5] for i in range(100)]  # 70 distinct sources (30 of them twice), one length
    tgt = [[4 + i] for i in range(100)]
    pairs = batching.Pairs.from_lists(src, tgt)
    rng = random.Random(0)
    batching.epoch_batches(pairs, 700, rng)  # the sizing call
    bucket = batching.epoch_batches(pairs, 700, rng)
    batches = [bucket.order[slice(*g)].tolist() for g in bucket.groups]
    assert all(len({tuple(src[i]) for i in b}) == len(b) for b in batches)  # no source twice in a batch
    assert len(bucket.order) < 640 and sum(map(len, batches)) == len(bucket.order)
    assert sorted(len(b) for b in batches)[1:] == [64] * (len(batches) - 1)  # runs of 64, one shorter tail
    first = bucket.order[:64].tolist()  # in reading order: pairs 0..63, then 64..69 and 100.. skipped or kept
    assert first == list(range(64))


def stand_in_eole(tmp_path: Path, modules: dict[str, str], probe: str):
    """A stand-in ``eole`` package (``modules``: dotted name under eole -> source), the harness's sigint_run.py copied
    beside it, and a function that runs ``probe`` (Python source) through that runner and returns what it printed."""
    import shutil
    import subprocess

    for name, source in modules.items():
        path = tmp_path / "eole" / Path(*name.split("."))
        for folder in [tmp_path / "eole", *[p for p in path.parents if tmp_path / "eole" in p.parents]]:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()
        path.with_suffix(".py").write_text(source)
    (tmp_path / "probe.py").write_text(probe)
    harness = Path.home() / ".cache/nmt-peers/bench/sigint_run.py"
    runner = Path(__file__).resolve().parents[2] / "shared/bench/peers/sigint_run.py"
    shutil.copy(runner if runner.exists() else harness, tmp_path / "sigint_run.py")
    return lambda: subprocess.run([sys.executable, str(tmp_path / "sigint_run.py"), "probe"], cwd=tmp_path, text=True,
                                  capture_output=True, check=True, env={"PYTHONPATH": str(tmp_path)}).stdout.strip()


def test_keep_duplicates_makes_eoles_iterator_keep_every_pair(tmp_path):
    """The patched sigint_run.py replaces _should_deduplicate before the module runs (a stand-in eole package here)."""
    probe = stand_in_eole(tmp_path, {"inputters.dynamic_iterator": "class DynamicDatasetIter:\n"
                                     "    def _should_deduplicate(self, src_text, seen):\n"
                                     "        return src_text not in seen\n"},
                          "from eole.inputters.dynamic_iterator import DynamicDatasetIter\n"
                          "print(DynamicDatasetIter()._should_deduplicate('a b', {'a b'}))\n")
    assert probe() == "False"
    ablate_gap.keep_duplicates(tmp_path)
    assert probe() == "True"


def test_eos_divisor_adds_a_token_a_sentence_to_eoles_divisor(tmp_path):
    """The patched sigint_run.py makes Trainer._accum_batches yield its divisor plus one a sentence (a stand-in eole)."""
    probe = stand_in_eole(tmp_path, {"trainer": "class Trainer:\n"
                                     "    def _accum_batches(self, iterator):\n"
                                     "        for batch in iterator:\n"
                                     "            yield [batch], 7\n"},
                          "from eole.trainer import Trainer\n"
                          "print([n for _, n in Trainer()._accum_batches([{'tgt': [[2, 5, 3], [2, 6, 3]]}, "
                          "{'tgt': [[2, 3]]}])])\n")
    assert probe() == "[7, 7]"
    ablate_gap.eos_divisor(tmp_path)
    assert probe() == "[9, 8]"


def test_eole_divisor_weighs_a_batch_as_eole_does_in_training_only(monkeypatch, tmp_path):
    """Ours with Eole's divisor: the mean loss times terms / (terms - sentences) with gradients, the mean without."""
    import nmt.update as u
    from nmt.batching import Batch

    monkeypatch.setattr(u, "batch_loss", lambda model, batch, label_smoothing=0.0, precision="fp32": torch.tensor(2.0))
    ablate_gap.eole_divisor(tmp_path, tmp_path)
    tgt_out = torch.tensor([[5, 6, 7, 3], [8, 3, 0, 0]])  # 6 terms (EOS included), 2 sentences
    batch = Batch(src=torch.ones(2, 3, dtype=torch.long), src_lens=torch.tensor([3, 3]), tgt_out=tgt_out)
    assert float(u.batch_loss(None, batch)) == 2.0 * 6 / 4
    with torch.no_grad():
        assert float(u.batch_loss(None, batch)) == 2.0


def test_skipped_counts_what_eoles_skipping_leaves_untrained(monkeypatch, tmp_path):
    """A length class with fewer pairs than a batch collapses to one copy a bucket under the skipping (here the one
    long pair: 10 copies a bucket, trained once), while nothing is skipped without it."""
    sp = tmp_path / "data" / "sp"
    sp.mkdir(parents=True)
    zh = [f"s{i} x" for i in range(10)] + [" ".join(["long"] * 16)]
    (sp / "train.zh").write_text("".join(x + "\n" for x in zh), encoding="utf-8")
    (sp / "train.en").write_text("".join("e\n" for _ in zh), encoding="utf-8")
    monkeypatch.setattr(ablate_gap, "EOLE_BUCKET", 110)  # 10 passes over the 11 pairs
    monkeypatch.setattr(ablate_gap, "EOLE_SENTS", 5)
    r = ablate_gap.skipped(tmp_path, steps=44)  # two buckets without the skipping (22 batches each)
    eole, plain = ({x["source_pieces"]: x for x in r[k]["by_source_length"]} for k in ("eole", "no_skip"))
    assert r["no_skip"]["batches_per_bucket"] == 22 and r["eole"]["batches_per_bucket"] == 21  # 100 short + 1 long
    assert plain["15-19"]["times_trained"] == 20 and plain["0-4"]["times_trained"] == 20 and plain["0-4"]["pairs"] == 10
    assert eole["15-19"]["times_trained"] in (2, 3)  # two buckets and two batches of a third: once a bucket


def test_eole_stream_trains_on_eoles_own_batches_with_our_ids(monkeypatch, tmp_path):
    """eole_stream: Eole's batches (written as eole_train_steps.py --batches-only writes them) become the one epoch,
    in Eole's order, each piece given our id by the harness's sentencepiece model; the dev set keeps our batching."""
    import json
    import random

    import sentencepiece as spm
    from test_tokenizer import write_spm

    from nmt import batching
    from nmt.tokenizer import with_our_ids

    texts = ["the old dog barked .", "a cat sat on the mat .", "dogs and cats are friends ."] * 20
    (tmp_path / "data").mkdir()
    for lang in ("zh", "en"):
        write_spm(tmp_path / "data" / f"spm.{lang}.model", texts)
    sp = spm.SentencePieceProcessor(model_proto=with_our_ids((tmp_path / "data" / "spm.en.model").read_bytes()))
    pieces = sp.encode_as_pieces("the old dog barked .")
    vocab = ["<unk>", "<blank>", "<s>", "</s>", *pieces[::-1]]  # Eole's own order: not spm's
    eole_id = {p: i for i, p in enumerate(vocab)}
    tgt = [[2, *[eole_id[p] for p in pieces], 3], [2, eole_id[pieces[0]], 3, *[1] * (len(pieces) - 1)]]
    src = [[eole_id[p] for p in pieces], [eole_id[pieces[1]], 0] + [1] * (len(pieces) - 2)]
    out = tmp_path / "run" / "eole_stream"
    out.mkdir(parents=True)
    (out / "vocab.json").write_text(json.dumps({"src": vocab, "tgt": vocab}))
    torch.save([{"src": torch.tensor(src, dtype=torch.int32), "srclen": torch.tensor([len(pieces), 2], dtype=torch.int32),
                 "tgt": torch.tensor(tgt, dtype=torch.int32)}] * 3, out / "batches.pt")
    monkeypatch.setattr(batching, "epoch_batches", batching.epoch_batches)
    monkeypatch.setattr(batching, "train_batches", batching.train_batches)
    ablate_gap.eole_stream(tmp_path / "run", tmp_path)
    stream = batching.epoch_batches(None, 700, random.Random(0))
    assert len(stream) == 3
    b = stream[0]
    ids = [sp.piece_to_id(p) for p in pieces]
    assert b.src.tolist() == [ids, [ids[1], 1] + [0] * (len(pieces) - 2)]  # <unk> 1, <blank> our <pad> 0
    assert b.tgt_in.tolist() == [[2, *ids], [2, ids[0]] + [0] * (len(pieces) - 1)]
    assert b.tgt_out.tolist() == [[*ids, 3], [ids[0], 3] + [0] * (len(pieces) - 1)]
    dev = batching.train_batches([[5, 6]], [[7]], 700, random.Random(0))
    assert len(dev) == 1 and dev[0].src.tolist() == [[5, 6]]
