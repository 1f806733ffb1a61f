"""scripts/compare_train_step.py: Eole's batches in our form, and our updates with either loss divisor."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import compare_train_step as cts  # noqa: E402
import swap_search  # noqa: E402
from test_swap_search import EOLE_CONFIG  # noqa: E402

from nmt.model import build_model  # noqa: E402
from nmt.ops import fast_ops  # noqa: E402
from nmt.vocab import BOS, EOS, PAD  # noqa: E402

EOLE_PAD, EOLE_UNK = 1, 0


def eole_batch(long: bool = False) -> dict:
    """Two sentences as Eole's iterator yields them: <s> y .. </s> then <blank> (1) padding; <unk> is 0."""
    if long:  # 12 terms, 2 sentences: Eole weighs it 12/10
        return {"src": torch.tensor([[4, 6, 8], [5, 7, 9]]), "srclen": torch.tensor([3, 3]),
                "tgt": torch.tensor([[BOS] + list(range(5, 10)) + [EOS]] * 2)}
    tgt = torch.tensor([[BOS, 5, EOLE_UNK, 7, EOS], [BOS, 9, EOS, EOLE_PAD, EOLE_PAD]])
    src = torch.tensor([[4, 6, 8], [5, EOLE_UNK, EOLE_PAD]])
    return {"src": src, "srclen": torch.tensor([3, 2]), "tgt": tgt}


def test_eoles_batch_becomes_ours():
    b = cts.our_batch(eole_batch())
    assert b.src.tolist() == [[4, 6, 8], [5, 1, PAD]]  # <unk> and padding trade ids
    assert b.tgt_in.tolist() == [[BOS, 5, 1, 7], [BOS, 9, PAD, PAD]]  # no EOS in the decoder's input
    assert b.tgt_out.tolist() == [[5, 1, 7, EOS], [9, EOS, PAD, PAD]]
    assert b.host_lens.tolist() == [3, 2] and b.size == 2


def tiny():
    cfg = swap_search.eole_model_config(EOLE_CONFIG)
    cfg.dropout = 0.0
    torch.manual_seed(0)
    return build_model(cfg, 30, 40, fast_ops())


def test_updates_with_eoles_divisor_differ_from_ours_only_after_the_first_loss():
    start = tiny().state_dict()
    batches = [cts.our_batch(eole_batch(long)) for long in (False, True, False)]
    runs = {}
    for divisor in (False, True):
        model = tiny()
        model.load_state_dict(start)
        runs[divisor] = (cts.train_ours(model, batches, divisor), model.state_dict())
    (plain, w_plain), (eole, w_eole) = runs[False], runs[True]
    assert len(plain) == 3 and plain[0] == eole[0]  # the same weights score the first batch alike
    # Adam undoes one scale for all; batches weighed 6/4 and 12/10 move the weights apart
    assert plain[2] != eole[2]
    d = cts.distance(w_eole, w_eole, start)
    assert d["max"] == 0.0
    assert cts.distance(w_plain, w_eole, start)["max"] > 0.0


def test_windows_weigh_each_update_by_its_tokens():
    assert cts.windows([1.0, 3.0, 5.0, 7.0], [10, 30, 10, 10], size=2) == [2.5, 6.0]  # (10 + 90) / 40, (50 + 70) / 20
    assert cts.windows([1.0, 3.0, 5.0], [1, 1, 1], size=2) == [2.0]  # a partial window is left out
