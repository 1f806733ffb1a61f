"""The packaged default corpus (data/tatoeba): offline loading, the test split's isolation,
traditional -> simplified by default, and damaged files reported as such."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nmt.config import DataConfig
from nmt.data.corpus import load_corpus, load_raw
from nmt.data.normalize import normalizer
from nmt.data.tatoeba import PACKAGED
from nmt.data.text import DataError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def tatoeba_cfg(**kw) -> DataConfig:
    """configs/data/tatoeba.yaml as the schema types it, with ``kw`` on top."""
    cfg = OmegaConf.merge(OmegaConf.structured(DataConfig), OmegaConf.load(CONFIGS / "data" / "tatoeba.yaml"))
    return OmegaConf.merge(cfg, kw)


@pytest.fixture(scope="module")
def raw():
    return load_raw(tatoeba_cfg())


def test_packaged_splits_load_offline_with_their_sizes(raw):
    assert {k: len(v) for k, v in raw.items()} == {"train": 26155, "dev": 1000, "test": 1000}
    assert raw["train"].column_names == ["src", "tgt"]
    assert raw["dev"][0] == {"src": "他说话就像一位老师。", "tgt": "He talks as if he were a teacher."}


def test_attribution_travels_with_every_pair():
    import pyarrow.parquet as pq

    for split in ("train", "dev", "test"):
        table = pq.read_table(PACKAGED / f"{split}.parquet")
        assert table.column_names == ["zh", "en", "attribution"]
        assert all(a.startswith("CC-BY 2.0 (France) Attribution: tatoeba.org") for a in table["attribution"].to_pylist())


def test_test_split_shares_no_sentence_with_train_or_dev(raw):
    """Compared after the normalization training applies (t2s, NFKC, case), on either side."""
    zh, en = normalizer("t2s"), normalizer(None)

    def sentences(split):
        ds = raw[split]
        return {zh(s).lower() for s in ds["src"]}, {en(t).lower() for t in ds["tgt"]}

    test_zh, test_en = sentences("test")
    for split in ("train", "dev"):
        other_zh, other_en = sentences(split)
        assert not test_zh & other_zh, split
        assert not test_en & other_en, split


def test_default_config_converts_traditional_to_simplified():
    corpus = load_corpus(tatoeba_cfg(), need=("dev",), splits=("dev",))
    src = corpus["dev"]["src"]
    assert "我們必須先完成我們的功課。" not in src and "我们必须先完成我们的功课。" in src
    raw_dev = load_corpus(tatoeba_cfg(opencc=None), need=("dev",), splits=("dev",))["dev"]["src"]
    assert "我們必須先完成我們的功課。" in raw_dev


def test_reverse_direction_swaps_sides(raw):
    swapped = load_raw(tatoeba_cfg(src_lang="en", tgt_lang="zh"))
    assert swapped["dev"][0] == {"src": raw["dev"][0]["tgt"], "tgt": raw["dev"][0]["src"]}
    with pytest.raises(DataError, match="zh-en"):
        load_raw(tatoeba_cfg(src_lang="zh", tgt_lang="de"))


def copy_packaged(tmp_path: Path) -> Path:
    folder = tmp_path / "tatoeba"
    shutil.copytree(PACKAGED, folder)
    return folder


def test_truncated_file_is_reported_as_damaged(tmp_path):
    folder = copy_packaged(tmp_path)
    path = folder / "train.parquet"
    path.write_bytes(path.read_bytes()[:-1000])
    with pytest.raises(DataError, match=r"train\.parquet is damaged: its SHA-256 does not match"):
        load_raw(tatoeba_cfg(dir=str(folder)))


def test_missing_file_and_missing_checksums_are_named(tmp_path):
    folder = copy_packaged(tmp_path)
    (folder / "dev.parquet").unlink()
    with pytest.raises(DataError, match=r"dev\.parquet is missing"):
        load_raw(tatoeba_cfg(dir=str(folder)))
    (folder / "SHA256SUMS").unlink()
    with pytest.raises(DataError, match="SHA256SUMS not found"):
        load_raw(tatoeba_cfg(dir=str(folder)))


def test_training_on_a_damaged_copy_fails_in_one_line(tmp_path, run_cli, train_overrides):
    """Through the CLI: one error line naming the file, no parquet traceback."""
    folder = copy_packaged(tmp_path)
    path = folder / "test.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    overrides = [o for o in train_overrides if o != "data=hsk"]
    proc = run_cli("nmt.train", *overrides, f"data.dir={folder}", f"hydra.run.dir={tmp_path / 'r'}")
    assert proc.returncode == 1
    assert f"nmt.train: error: {path} is damaged" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_scripts_read_the_packaged_dev_split_where_it_is():
    """scripts/checks/check_unchanged.py translates the packaged dev split: its path follows the corpus (it broke once
    when the corpus moved into the package)."""
    import importlib.util

    script = Path(__file__).parents[1] / "scripts" / "checks" / "check_unchanged.py"
    spec = importlib.util.spec_from_file_location("check_unchanged", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.DEV == Path(PACKAGED) / "dev.parquet" and module.DEV.is_file()
