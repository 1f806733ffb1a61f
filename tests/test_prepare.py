"""Data at scale: TSV and local hub copies, held-out splits, the cached multiprocess pipeline,
bounded sentencepiece sampling, hub presets, and the bad-input errors where data enters."""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path

import datasets
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from nmt.config import DataConfig, TokenizerConfig, register
from nmt.config_check import validate
from nmt.data import prepare as prepare_module
from nmt.data.corpus import load_corpus
from nmt.data.prepare import prepare
from nmt.data.text import DataError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
ZH = "我你他她们是不好大小人天中国学生喜欢吃饭喝水看书去来说话"
EN = "i you he she they are not good big small people day china student like eat rice drink water read book go come talk".split()


def pairs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(2, 8)
        idx = [rng.randrange(len(ZH)) for _ in range(k)]
        out.append(("".join(ZH[i] for i in idx), " ".join(EN[i % len(EN)] for i in idx)))
    return out


def write_files(folder: Path, splits: dict[str, int]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for seed, (split, n) in enumerate(splits.items()):
        ps = pairs(n, seed)
        (folder / f"{split}.zh").write_text("".join(a + "\n" for a, _ in ps), encoding="utf-8")
        (folder / f"{split}.en").write_text("".join(b + "\n" for _, b in ps), encoding="utf-8")
    return folder


def data_cfg(**kw):
    return OmegaConf.structured(DataConfig(**kw))


def tok_cfg(**kw):
    return OmegaConf.structured(TokenizerConfig(**{"src_vocab_size": 60, "tgt_vocab_size": 60, **kw}))


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))


# --------------------------------------------------------------------------- TSV
def test_tsv_files_load_in_either_column_order(tmp_path):
    (tmp_path / "train.tsv").write_text("你好\thello\n谢谢\tthanks\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("再见\tbye\n", encoding="utf-8")
    corpus = load_corpus(data_cfg(source="files", dir=str(tmp_path), format="tsv"))
    assert list(corpus["train"]["src"]) == ["你好", "谢谢"] and list(corpus["dev"]["tgt"]) == ["bye"]
    (tmp_path / "train.tsv").write_text("hello\t你好\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("bye\t再见\n", encoding="utf-8")
    swapped = load_corpus(data_cfg(source="files", dir=str(tmp_path), format="tsv", tsv_columns=["en", "zh"]))
    assert list(swapped["train"]["src"]) == ["你好"] and list(swapped["train"]["tgt"]) == ["hello"]


def test_tsv_row_with_the_wrong_number_of_fields_names_file_and_line(tmp_path):
    (tmp_path / "train.tsv").write_text("你好\thello\n谢谢\tthanks\textra\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.tsv:2: expected 2 tab-separated fields, found 3"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path), format="tsv"), need=("train",))
    (tmp_path / "train.tsv").write_text("你好 hello\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.tsv:1: expected 2 tab-separated fields, found 1"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path), format="tsv"), need=("train",))


def test_tsv_empty_and_invalid_utf8(tmp_path):
    (tmp_path / "train.tsv").write_bytes(b"")
    with pytest.raises(DataError, match=r"train\.tsv is empty"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path), format="tsv"), need=("train",))
    (tmp_path / "train.tsv").write_bytes("你好\thello\n".encode() + b"\xff\xfe\tbad\n")
    with pytest.raises(DataError, match=r"train\.tsv:2: invalid UTF-8"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path), format="tsv"), need=("train",))


def test_bad_tsv_columns_config_is_rejected():
    cfg = OmegaConf.structured({"data": DataConfig(tsv_columns=["zh", "de"])})
    from nmt.config import ConfigError, TrainConfig

    full = OmegaConf.merge(OmegaConf.structured(TrainConfig), cfg)
    with pytest.raises(ConfigError, match="data.tsv_columns"):
        validate(full)


# --------------------------------------------------------------------------- local hub copies
def translation_table(ps, langs=("zh", "en")) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"translation": [{langs[0]: a, langs[1]: b} for a, b in ps]})


@pytest.mark.parametrize("layout", ["zh-en/{split}-00000-of-00001.parquet", "iwslt2017-zh-en/{split}/0000.parquet",
                                    "wmt19-{split}.parquet", "{split}.jsonl"])
def test_local_hub_copy_in_hub_file_layouts(tmp_path, layout):
    """Parquet or JSON Lines files laid out as on the hub load offline; splits come from the names."""
    root = tmp_path / "copy"
    for split, n in (("train", 5), ("validation", 2)):
        path = root / layout.format(split=split)
        path.parent.mkdir(parents=True, exist_ok=True)
        table = translation_table(pairs(n, 1))
        table.to_parquet(str(path)) if path.suffix == ".parquet" else table.to_json(str(path), force_ascii=False)
    corpus = load_corpus(data_cfg(source="hub", name=str(root)))
    assert len(corpus["train"]) == 5 and len(corpus["dev"]) == 2
    assert list(corpus["dev"]["src"]) == [a for a, _ in pairs(2, 1)]
    assert not [p for p in root.rglob("*") if p.name.startswith("cache-")]  # nothing written into the copy


def test_local_hub_copy_without_the_language_pair_lists_what_it_has(tmp_path):
    root = tmp_path / "copy"
    root.mkdir()
    translation_table([("Hallo", "hello")], ("de", "en")).to_parquet(str(root / "train-0.parquet"))
    with pytest.raises(DataError, match=r"has languages \['de', 'en'\], not zh-en"):
        load_corpus(data_cfg(source="hub", name=str(root)), need=("train",))


def test_empty_local_folder_is_an_error(tmp_path):
    with pytest.raises(DataError, match="neither a save_to_disk copy nor parquet/JSON files"):
        load_corpus(data_cfg(source="hub", name=str(tmp_path)))


def test_holdout_carves_seeded_disjoint_dev_and_test_from_train(tmp_path):
    """A dataset with only a train split (news commentary) gets seeded held-out dev/test sets."""
    ps = [(f"{a}{i}", f"{b} {i}") for i, (a, b) in enumerate(pairs(100, 3))]
    datasets.DatasetDict({"train": translation_table(ps)}).save_to_disk(str(tmp_path / "nc"))
    cfg = data_cfg(source="hub", name=str(tmp_path / "nc"), holdout=True, dev_size=10, test_size=5, seed=7)
    a = load_corpus(cfg, need=("train", "dev", "test"))
    assert (len(a["train"]), len(a["dev"]), len(a["test"])) == (85, 10, 5)
    sets = [set(a[s]["src"]) for s in ("train", "dev", "test")]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    assert list(load_corpus(cfg, need=("dev",))["dev"]["src"]) == list(a["dev"]["src"])
    cfg.seed = 8
    assert list(load_corpus(cfg, need=("dev",))["dev"]["src"]) != list(a["dev"]["src"])
    cfg.holdout = False
    with pytest.raises(DataError, match="no 'dev' split"):
        load_corpus(cfg)


# --------------------------------------------------------------------------- presets
@pytest.mark.parametrize("preset,name", [("wmt19_zh_en", "wmt/wmt19"), ("news_commentary_zh_en", "Helsinki-NLP/news_commentary"),
                                         ("iwslt2017_zh_en", "IWSLT/iwslt2017")])
def test_hub_presets_compose_and_validate(preset, name):
    register()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=[f"data={preset}", "+experiment=zh_en_local_p"])
    validate(cfg)
    assert cfg.data.source == "hub" and cfg.data.name == name and cfg.data.src_lang == "zh"


# --------------------------------------------------------------------------- the prepared corpus
def test_prepare_encodes_filters_and_reports(tmp_path):
    folder = write_files(tmp_path / "c", {"train": 300, "dev": 20, "test": 20})
    with open(folder / "train.zh", "a", encoding="utf-8") as f, open(folder / "train.en", "a", encoding="utf-8") as g:
        f.write("\n" + "长" * 80 + "\n")
        g.write("empty source\n" + " ".join(["long"] * 80) + "\n")
    p = prepare(data_cfg(source="files", dir=str(folder), max_tokens=30), tok_cfg(), seed=1)
    r = p.report["train"]
    assert r["read"] == 302 and r["empty"] == 1
    assert r["kept"] == len(p.train) == r["read"] - sum(v for k, v in r.items() if k not in ("read", "kept"))
    assert len(p.dev) == 20 and len(p.test) == 20
    assert r["too_many_pieces"] >= 1 and max(p.train.src_lens.max(), p.train.tgt_lens.max()) <= 30
    src, tgt = p.train.rows([0, 1])
    originals = dict(pairs(300, 0))
    assert originals[p.tokenizer.src.decode(src[0])] == p.tokenizer.tgt.decode(tgt[0])  # still aligned
    assert p.train.src_lens.dtype.name == "int32" and int(p.train.src_lens[0]) == len(src[0])
    assert json.loads((p.folder / "report.json").read_text()) == p.report


def test_prepare_reuses_its_cache_and_rebuilds_when_the_corpus_or_settings_change(tmp_path, monkeypatch, caplog):
    folder = write_files(tmp_path / "c", {"train": 200, "dev": 10})
    cfg = data_cfg(source="files", dir=str(folder))
    first = prepare(cfg, tok_cfg(), seed=1)
    calls = []
    monkeypatch.setattr(prepare_module, "clean_splits", lambda *a, **k: calls.append(1) or pytest.fail("cleaned again"))
    with caplog.at_level(logging.INFO, logger="nmt.data.prepare"):
        again = prepare(cfg, tok_cfg(), seed=1)
    assert again.folder == first.folder and "reusing" in caplog.text and not calls
    assert again.train.rows([3]) == first.train.rows([3])
    monkeypatch.undo()
    changed = prepare(data_cfg(source="files", dir=str(folder), max_tokens=10), tok_cfg(), seed=1)
    assert changed.folder != first.folder
    with open(folder / "train.zh", "a", encoding="utf-8") as f, open(folder / "train.en", "a", encoding="utf-8") as g:
        f.write("新的\n")
        g.write("new\n")
    os.utime(folder / "train.zh", ns=(1, 1))  # a changed file is seen even with an old time: the size differs
    grown = prepare(cfg, tok_cfg(), seed=1)
    assert grown.folder != first.folder and grown.report["train"]["read"] == 201


def test_prepare_in_two_processes_equals_one(tmp_path):
    folder = write_files(tmp_path / "c", {"train": 400, "dev": 10})
    with open(folder / "train.zh", "a", encoding="utf-8") as f, open(folder / "train.en", "a", encoding="utf-8") as g:
        for a, b in pairs(50, 0):  # duplicates of the first 50 pairs, spread over both workers' shards
            f.write(a + "\n")
            g.write(b + "\n")
    one = prepare(data_cfg(source="files", dir=str(folder), num_proc=1), tok_cfg(), seed=1)
    two = prepare(data_cfg(source="files", dir=str(folder), num_proc=2), tok_cfg(), seed=1)
    assert one.report == two.report and one.report["train"]["duplicate"] >= 50
    everything = list(range(len(one.train)))
    assert one.train.rows(everything) == two.train.rows(everything)


def test_sentencepiece_trains_on_a_bounded_sample(tmp_path, monkeypatch):
    folder = write_files(tmp_path / "c", {"train": 300, "dev": 10})
    seen = {}
    real = prepare_module.load_or_train

    def spy(cfg, src, tgt, seed=0):
        seen["n"] = (len(src), len(tgt))
        return real(cfg, src, tgt, seed)

    monkeypatch.setattr(prepare_module, "load_or_train", spy)
    prepare(data_cfg(source="files", dir=str(folder)), tok_cfg(input_sentence_size=120), seed=1)
    assert seen["n"] == (120, 120)


def test_a_damaged_prepared_corpus_is_a_clear_error(tmp_path):
    folder = write_files(tmp_path / "c", {"train": 100, "dev": 10})
    p = prepare(data_cfg(source="files", dir=str(folder)), tok_cfg(), seed=1)
    (p.folder / "src.model").unlink()
    with pytest.raises(DataError, match="damaged.*delete the folder"):
        prepare(data_cfg(source="files", dir=str(folder)), tok_cfg(), seed=1)


def test_prepare_needs_train_and_dev(tmp_path):
    folder = write_files(tmp_path / "c", {"train": 50})
    with pytest.raises(DataError, match="no 'dev' split, which is needed here"):
        prepare(data_cfg(source="files", dir=str(folder)), tok_cfg(), seed=1)


def test_duplicate_removal_keeps_the_first_copy_of_each_kept_pair():
    """The bucketed hash sort drops exactly the later copies among rows still kept, across chunks."""
    import numpy as np
    import pyarrow as pa

    from nmt.data.clean import drop_duplicates

    rng = np.random.default_rng(0)
    keys = rng.integers(-50, 50, size=3000)  # many repeats, negative hashes too
    keep = rng.random(3000) > 0.1  # rows already dropped by a filter do not count as first copies
    expected, seen = keep.copy(), set()
    for i, k in enumerate(keys.tolist()):
        if keep[i]:
            if k in seen:
                expected[i] = False
            seen.add(k)
    n_kept = int(keep.sum())
    dropped = drop_duplicates(pa.chunked_array([keys[:1000], keys[1000:1700], keys[1700:]]), keep)
    assert (keep == expected).all()
    assert dropped == n_kept - int(expected.sum())


def test_a_resumed_run_reuses_the_corpus_its_first_run_prepared(tmp_path, monkeypatch):
    """With the checkpoint's sentencepiece models (resume), the first run's prepared corpus is
    reused when its models are the same; other models get a corpus of their own."""
    folder = write_files(tmp_path / "c", {"train": 200, "dev": 10})
    cfg = data_cfg(source="files", dir=str(folder))
    first = prepare(cfg, tok_cfg(), seed=1)
    resumed = prepare(cfg, tok_cfg(), seed=1, tokenizer=first.tokenizer)
    assert resumed.folder == first.folder
    other = prepare(data_cfg(source="files", dir=str(folder)), tok_cfg(src_vocab_size=50), seed=1).tokenizer
    with_other = prepare(cfg, tok_cfg(), seed=1, tokenizer=other)
    assert with_other.folder != first.folder and with_other.tokenizer.src_model == other.src_model
