"""Token-budget batching: budgets, coverage, BOS/EOS framing, padding, and the inference index."""

from __future__ import annotations

import random

import pytest
import torch

from nmt.batching import inference_batches, train_batches
from nmt.tokenizer import BOS, EOS, PAD


@pytest.fixture
def pairs(random_sources):
    src = random_sources(300, 1, 30, 50, seed=1)
    tgt = random_sources(300, 1, 25, 40, seed=2)
    return src, tgt


def test_every_pair_once_per_epoch_under_budget(pairs):
    """Each pair appears in exactly one batch; a batch's padded size (sentences × the longest of
    source and BOS+target) stays within the budget."""
    src, tgt = pairs
    budget = 200
    batches = train_batches(src, tgt, budget, random.Random(0))
    seen = sorted(i for b in batches for i in b.index.tolist())
    assert seen == list(range(len(src)))
    for b in batches:
        assert b.size * max(b.src.size(1), b.tgt_in.size(1)) <= budget


def test_rows_are_framed_and_padded(pairs):
    """src rows are the sentence then PAD; tgt_in = BOS y; tgt_out = y EOS; lengths are exact."""
    src, tgt = pairs
    for b in train_batches(src, tgt, 300, random.Random(0)):
        assert b.tgt_in.shape == b.tgt_out.shape
        assert torch.equal(b.host_lens, b.src_lens) and b.host_lens.device.type == "cpu"
        for row, i in enumerate(b.index.tolist()):
            s, t = src[i], tgt[i]
            assert b.src_lens[row] == len(s)
            assert b.src[row, : len(s)].tolist() == s and (b.src[row, len(s):] == PAD).all()
            assert b.tgt_in[row, : len(t) + 1].tolist() == [BOS, *t]
            assert b.tgt_out[row, : len(t) + 1].tolist() == [*t, EOS]
            assert (b.tgt_in[row, len(t) + 1:] == PAD).all() and (b.tgt_out[row, len(t) + 1:] == PAD).all()


def test_oversized_sentence_gets_its_own_batch():
    """A sentence longer than the budget is not dropped: it forms a batch on its own."""
    src = [[5] * 4, [6] * 50, [7] * 3]
    tgt = [[8] * 2, [9] * 5, [8] * 2]
    batches = train_batches(src, tgt, 20, random.Random(0))
    big = [b for b in batches if 1 in b.index.tolist()]
    assert len(big) == 1 and big[0].size == 1 and big[0].src.size(1) == 50
    assert sorted(i for b in batches for i in b.index.tolist()) == [0, 1, 2]


def test_max_sentences_and_sorting_keep_padding_low(random_sources):
    """max_sentences caps a batch; length sorting keeps padding far below random grouping."""
    src = random_sources(400, 1, 40, 30, seed=3)
    tgt = [s[: max(1, len(s) - 2)] for s in src]
    batches = train_batches(src, tgt, 10_000, random.Random(0), max_sentences=16)
    assert max(b.size for b in batches) <= 16
    real = sum(len(t) + 1 for t in tgt)
    padded = sum(b.tgt_in.numel() for b in batches)
    assert padded < 1.3 * real


def test_seeded_and_shuffled(pairs):
    """The same rng seed gives the same batches; later epochs come in another order."""
    src, tgt = pairs
    order = lambda bs: [b.index.tolist() for b in bs]  # noqa: E731
    a = order(train_batches(src, tgt, 200, random.Random(7)))
    b = order(train_batches(src, tgt, 200, random.Random(7)))
    assert a == b
    rng = random.Random(7)
    assert order(train_batches(src, tgt, 200, rng)) != order(train_batches(src, tgt, 200, rng))


def test_inference_batches_index_back_to_input_order(random_sources):
    """inference_batches sorts by length; ``index`` restores input order; empty sources become a
    single EOS so that attention has a position to look at."""
    src = random_sources(60, 1, 20, 30, seed=4)
    src[5] = []
    batches = inference_batches(src, 100)
    restored = [None] * len(src)
    for b in batches:
        assert b.tgt_in is None and b.tgt_out is None
        assert b.size * b.src.size(1) <= 100
        for row, i in enumerate(b.index.tolist()):
            assert restored[i] is None
            restored[i] = b.src[row, : b.src_lens[row]].tolist()
    assert restored[5] == [EOS]
    restored[5] = []
    assert restored == src


def test_batch_to_keeps_index_and_host_lens_on_cpu(pairs):
    src, tgt = pairs
    b = train_batches(src[:5], tgt[:5], 1000, random.Random(0))[0]
    moved = b.to(torch.device("cpu"))
    assert torch.equal(moved.src, b.src) and moved.index.device.type == "cpu"
    assert moved.host_lens.device.type == "cpu"


@pytest.mark.parametrize("view", ["whole", "selected", "from disk"])
def test_arrow_pairs_give_the_same_batches_as_lists(pairs, view, tmp_path):
    """Pairs read from an Arrow dataset (as nmt.data.prepare writes it, or a selected view of one)
    batch exactly like the same pairs held in lists."""
    import datasets

    from nmt.batching import Pairs, epoch_batches

    src, tgt = pairs
    ds = datasets.Dataset.from_dict({"src_ids": src, "tgt_ids": tgt, "src_len": [len(s) for s in src],
                                     "tgt_len": [len(t) for t in tgt]})
    if view == "selected":  # an indices mapping over the table, in another order
        picked = list(range(1, len(src), 2))[::-1]
        ds = ds.select(picked)
        src, tgt = [src[i] for i in picked], [tgt[i] for i in picked]
    elif view == "from disk":
        ds.save_to_disk(str(tmp_path / "train"))
        ds = datasets.load_from_disk(str(tmp_path / "train"))
    a = epoch_batches(Pairs.from_dataset(ds), 200, random.Random(4))
    b = epoch_batches(Pairs.from_lists(src, tgt), 200, random.Random(4))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for name in ("src", "tgt_in", "tgt_out", "index"):
            assert torch.equal(getattr(x, name), getattr(y, name)), name


def test_batches_for_the_cpu_never_pin_memory_on_a_cuda_machine(pairs, cuda_untouchable):
    """make_batch and Batch.to(cpu) leave CUDA alone even where it exists (pinning opens a
    context on GPU 0); pinning belongs to the copy to a CUDA device."""
    src, tgt = pairs
    for b in train_batches(src, tgt, 300, random.Random(0))[:3]:
        moved = b.to(torch.device("cpu"))
        assert torch.equal(moved.src, b.src) and torch.equal(moved.tgt_out, b.tgt_out)
    for b in inference_batches(src, 300):
        b.to(torch.device("cpu"))
