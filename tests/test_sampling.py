"""Subword regularization (tokenizer.sample_alpha): sampled segmentations of the same text, seeded per batch, from
the same prepared corpus as without sampling."""

from __future__ import annotations

import copy

import pytest
import sentencepiece as spm
from omegaconf import OmegaConf

from nmt.config import ConfigError, TrainConfig
from nmt.config_check import validate
from nmt.data.prepare import prepare
from nmt.sampling import training_pairs


@pytest.fixture(scope="module")
def prepared(hsk_cfg):
    return prepare(hsk_cfg.data, hsk_cfg.tokenizer, seed=42)


def with_alpha(hsk_cfg, alpha: float, nbest: int = -1):
    tok = copy.deepcopy(hsk_cfg.tokenizer)
    tok.sample_alpha, tok.sample_nbest = alpha, nbest
    return tok


def test_sampling_reuses_the_prepared_corpus(hsk_cfg, prepared):
    """sample_alpha is a batch-time setting: the same prepared folder; off, the pairs are the prepared ones."""
    assert prepare(hsk_cfg.data, with_alpha(hsk_cfg, 0.1), seed=42).folder == prepared.folder
    assert training_pairs(prepared, with_alpha(hsk_cfg, 0.0), 50, 42) is prepared.train


def test_sampled_batches_segment_the_same_text_differently_and_reproducibly(hsk_cfg, prepared):
    pairs = training_pairs(prepared, with_alpha(hsk_cfg, 0.1), 50, 42)
    idx = list(range(40, 104))
    best_src, best_tgt = prepared.train.rows(idx)
    src, tgt = pairs.rows(idx)
    again = pairs.rows(idx)
    assert (src, tgt) == again  # seeded by the run's seed and the batch: a resumed run draws the same
    sp_src, sp_tgt = (spm.SentencePieceProcessor(model_proto=m) for m in (prepared.tokenizer.src_model,
                                                                            prepared.tokenizer.tgt_model))
    assert sp_tgt.decode(tgt) == sp_tgt.decode(best_tgt) and sp_src.decode(src) == sp_src.decode(best_src)
    changed = sum(a != b for a, b in zip(tgt, best_tgt)) + sum(a != b for a, b in zip(src, best_src))
    assert changed > 20  # of 128 sides, alpha 0.1 resegments many
    other_seed = training_pairs(prepared, with_alpha(hsk_cfg, 0.1), 50, 43).rows(idx)
    assert other_seed != (src, tgt)


def test_a_sampled_side_over_max_tokens_keeps_its_best_segmentation(hsk_cfg, prepared):
    idx = list(range(64))
    best_src, best_tgt = prepared.train.rows(idx)
    cap = max(len(s) for s in best_tgt + best_src)
    src, tgt = training_pairs(prepared, with_alpha(hsk_cfg, 0.01), cap, 42).rows(idx)
    assert all(len(s) <= cap for s in src + tgt)
    assert any(s == b for s, b in zip(tgt, best_tgt))


def test_sampling_settings_are_checked():
    cfg = OmegaConf.structured(TrainConfig)
    cfg.trainer.max_steps, cfg.tokenizer.sample_alpha = 10, 0.1
    validate(cfg)
    cfg.tokenizer.model_type = "word"
    with pytest.raises(ConfigError, match="tokenizer.sample_alpha=0.1: sentencepiece samples unigram and bpe"):
        validate(cfg)
    cfg.tokenizer.model_type, cfg.tokenizer.sample_alpha = "bpe", 1.0
    with pytest.raises(ConfigError, match="with bpe it is a dropout probability"):
        validate(cfg)
    cfg.tokenizer.sample_alpha = -0.1
    with pytest.raises(ConfigError, match="tokenizer.sample_alpha=-0.1 must be >= 0"):
        validate(cfg)


def test_a_run_trains_with_sampled_segmentations_and_resumes_them(hsk_cfg, tmp_path):
    """Training draws from the sampled pairs; 4 steps in one go equal 2 + resume to 4 (the draws are seeded)."""
    from nmt.train import train

    def cfg(steps: int, alpha: float = 0.1, **kw):
        c = copy.deepcopy(hsk_cfg)
        c.tokenizer.sample_alpha = alpha
        m = c.model
        m.emb_size, m.hidden_size, m.encoder_layers, m.decoder_layers, m.dropout = 16, 16, 1, 1, 0.0
        c.trainer = OmegaConf.merge(c.trainer, dict(device="cpu", precision="fp32", max_steps=steps, valid_every=2,
                                                     valid_max_sentences=8, test_beam=0, attention_images=0, **kw))
        return c

    whole = train(cfg(4), tmp_path / "whole")
    train(cfg(2), tmp_path / "split")
    resumed = train(cfg(4, resume="auto"), tmp_path / "split")
    assert whole["history"][-1]["valid_loss"] == pytest.approx(resumed["history"][-1]["valid_loss"], rel=1e-6)
    plain = train(cfg(4, alpha=0.0), tmp_path / "plain")  # the same run on the best segmentations
    assert plain["history"][-1]["valid_loss"] != pytest.approx(whole["history"][-1]["valid_loss"], rel=1e-6)


def test_sampled_batches_are_cut_to_hold_the_tokens_of_unsampled_ones(hsk_cfg, prepared):
    """Batches are cut by the best lengths scaled by sampling's measured inflation: a sampled batch holds about as
    many real target tokens as an unsampled one, where cut by the best lengths it held the inflation's share more."""
    import random
    import statistics

    from nmt.batching import Pairs, epoch_batches
    from nmt.sampling import inflation

    pairs = training_pairs(prepared, with_alpha(hsk_cfg, 0.1), 50, 42)
    x_src, x_tgt = inflation(pairs.rows, prepared.train, 42)
    assert x_tgt > 1.2 and inflation(pairs.rows, prepared.train, 42) == (x_src, x_tgt)  # seeded: every start alike
    assert (pairs.tgt_lens >= prepared.train.tgt_lens).all() and pairs.tgt_lens.max() <= 50

    def tokens(p: Pairs) -> float:  # mean real target tokens of a batch, as sampled
        return statistics.mean(int((b.tgt_out != 0).sum()) for b in epoch_batches(p, 700, random.Random(0))[:60])

    by_best = Pairs(prepared.train.src_lens, prepared.train.tgt_lens, pairs.rows)  # as before: sampled, cut by best
    unsampled = tokens(prepared.train)
    assert abs(tokens(pairs) / unsampled - 1) < 0.15 and tokens(by_best) > 1.25 * unsampled
