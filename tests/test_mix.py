"""Several training corpora sampled by weight (data.mix, through datasets.interleave_datasets)."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from omegaconf import OmegaConf

from nmt.config import ConfigError, TrainConfig
from nmt.config_check import validate
from nmt.data.prepare import prepare
from nmt.data.text import DataError


def corpus(folder: Path, zh: str, en: str, n: int, dev: bool) -> Path:
    folder.mkdir()
    for split, count in (("train", n),) + ((("dev", 20),) if dev else ()):
        (folder / f"{split}.zh").write_text("".join(f"{zh} {i} {split}\n" for i in range(count)), encoding="utf-8")
        (folder / f"{split}.en").write_text("".join(f"{en} {i} {split}\n" for i in range(count)), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("mix")
    return corpus(tmp / "a", "甲", "alpha", 200, dev=True), corpus(tmp / "b", "乙", "bravo", 100, dev=False)


def cfg_for(a: Path, b: Path, weight: float = 3.0, stop: str = "all_exhausted", **entry):
    cfg = OmegaConf.structured(TrainConfig)
    cfg.data.source, cfg.data.dir, cfg.data.mix_stop = "files", str(a), stop
    cfg.data.mix = [{"source": "files", "dir": str(b), "weight": weight, **entry}]
    cfg.tokenizer.model_type, cfg.tokenizer.src_vocab_size, cfg.tokenizer.tgt_vocab_size = "word", 300, 300
    cfg.trainer.max_steps = 1
    return cfg


def mixed_targets(cfg) -> list[str]:
    validate(cfg)
    out = prepare(cfg.data, cfg.tokenizer, seed=1)
    return datasets.load_from_disk(str(out.folder / "train"))["tgt"], out


def test_corpora_are_drawn_by_weight_each_whole_at_least_once(corpora):
    tgt, out = mixed_targets(cfg_for(*corpora))
    bravo = [t for t in tgt if t.startswith("bravo")]
    assert len(bravo) / len(tgt) == pytest.approx(0.75, abs=0.05)  # weights 1 (this corpus) and 3
    assert len(set(bravo)) == 100 and len({t for t in tgt if t.startswith("alpha")}) == 200  # all_exhausted
    assert out.report["train"]["mixed"] == len(tgt) and "mix0" in out.report
    assert all(t.startswith("alpha") for t in out.dev["tgt"])  # dev (and test) come from this corpus


def test_first_exhausted_stops_with_the_first_corpus_drawn_whole(corpora):
    tgt, _ = mixed_targets(cfg_for(*corpora, stop="first_exhausted"))
    assert len(tgt) < 300 and len({t for t in tgt if t.startswith("bravo")}) == 100


def test_the_weights_are_part_of_the_prepared_corpus_and_each_entry_cleans_its_own_way(corpora):
    (_, one), (_, two) = mixed_targets(cfg_for(*corpora)), mixed_targets(cfg_for(*corpora, weight=1.0))
    assert one.folder != two.folder
    tgt, _ = mixed_targets(cfg_for(*corpora, max_chars=13))  # the entry's own cleaning keeps "bravo 0 train" .. 9
    assert len({t for t in tgt if t.startswith("bravo")}) == 10 and len({t for t in tgt if t.startswith("alpha")}) == 200
    with pytest.raises(DataError, match=r"data.mix\[0\] \(files .*b\): no training pair is left after cleaning"):
        mixed_targets(cfg_for(*corpora, max_chars=5))


def test_a_mixed_corpus_does_not_carry_dev_sentences_into_training(tmp_path, corpora):
    """An entry's pairs that share a source or a target sentence with this corpus's dev split are dropped, counted
    in the report; the rest of the entry is drawn as before."""
    b = corpus(tmp_path / "b", "乙", "bravo", 100, dev=False)
    with open(b / "train.zh", "a", encoding="utf-8") as zh, open(b / "train.en", "a", encoding="utf-8") as en:
        zh.write("甲 3 dev\n甲 5 dev\n乙 new\n")  # a dev source twice, under two other translations
        en.write("some other words\nstill other words\nalpha 7 dev\n")  # and a dev target under a new source
    tgt, out = mixed_targets(cfg_for(corpora[0], b))
    assert out.report["mix0"]["held_out"] == 3 and out.report["mix0"]["kept"] == 100
    assert not {"some other words", "still other words", "alpha 7 dev"} & set(tgt)
    assert len({t for t in tgt if t.startswith("bravo")}) == 100


@pytest.mark.parametrize("entry, message", [
    ({"source": "files", "weight": 1}, r"data.mix\[0\]: data.source=files needs data.dir"),
    ({"source": "hsk", "weight": 0}, r"data.mix\[0\].weight=0.0 must be > 0"),
    ({"source": "hsk", "wieght": 2}, r"data.mix\[0\].wieght: no such data setting"),
    ({"source": "hsk", "src_lang": "de"}, r"data.mix\[0\].src_lang: a setting of the whole run"),
    ({"source": "nope"}, r"data.mix\[0\]: data.source='nope' is not valid"),
])
def test_a_bad_mix_entry_is_refused_by_name(corpora, entry, message):
    cfg = cfg_for(*corpora)
    cfg.data.mix = [entry]
    with pytest.raises(ConfigError, match=message):
        validate(cfg)
