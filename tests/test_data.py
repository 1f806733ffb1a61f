"""Corpus loading from the three sources, cleaning, normalization and the DataError messages."""

from __future__ import annotations

import unicodedata
from collections import Counter
from pathlib import Path

import datasets
import pytest
from omegaconf import OmegaConf

from nmt.config import DataConfig
from nmt.data.clean import clean
from nmt.data.corpus import load_corpus
from nmt.data.normalize import normalizer
from nmt.data.text import DataError, read_lines

TRAD, SIMP = "這是一個測試", "这是一个测试"


def data_cfg(**kw):
    return OmegaConf.structured(DataConfig(**kw))


def write_split(folder: Path, split: str, src: list[str], tgt: list[str], src_lang="zh", tgt_lang="en"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.{src_lang}").write_text("".join(s + "\n" for s in src), encoding="utf-8")
    (folder / f"{split}.{tgt_lang}").write_text("".join(t + "\n" for t in tgt), encoding="utf-8")


# --------------------------------------------------------------------------- hsk
def test_hsk_drops_placeholders_and_partitions_the_rest(hsk_corpus):
    """The embedded corpus: 4,354 records minus 82 placeholders, split into dev/test of the asked
    sizes and train with the rest; every kept pair is in exactly one split."""
    from hsk_sentences_audio import load_sentences

    records = load_sentences()
    assert len(records) == 4354
    real = [(r["chinese"], r["translation"]["en"]) for r in records
            if not (en := r["translation"]["en"].strip().lower()).startswith("placeholder") and en != "ph"]
    assert len(real) == 4354 - 82
    assert (len(hsk_corpus["dev"]), len(hsk_corpus["test"])) == (100, 100)
    nfkc = lambda t: " ".join(unicodedata.normalize("NFKC", t).split())  # noqa: E731
    expected = Counter((nfkc(zh), nfkc(en)) for zh, en in real)
    got = Counter(p for s in ("train", "dev", "test") for p in zip(hsk_corpus[s]["src"], hsk_corpus[s]["tgt"]))
    # the train split keeps one copy of a repeated pair (data.dedup); nothing else is lost
    assert len(hsk_corpus["train"]) == len(real) - 200 - sum((expected - got).values())
    assert set(got) == set(expected) and all(got[p] >= 1 for p in expected)
    assert sum((expected - got).values()) <= 5


def test_hsk_split_is_seeded():
    """Same seed, same split; another seed, another split."""
    a = load_corpus(data_cfg(source="hsk", dev_size=50, test_size=50, seed=1), need=("dev",))
    b = load_corpus(data_cfg(source="hsk", dev_size=50, test_size=50, seed=1), need=("dev",))
    c = load_corpus(data_cfg(source="hsk", dev_size=50, test_size=50, seed=2), need=("dev",))
    assert list(a["dev"]["src"]) == list(b["dev"]["src"])
    assert list(a["dev"]["src"]) != list(c["dev"]["src"])


def test_hsk_reverse_direction_swaps_sides():
    """src_lang=en, tgt_lang=zh gives the same pairs the other way round."""
    zh_en = load_corpus(data_cfg(source="hsk", dev_size=20, test_size=20), need=("dev",))
    en_zh = load_corpus(data_cfg(source="hsk", dev_size=20, test_size=20, src_lang="en", tgt_lang="zh"), need=("dev",))
    assert list(en_zh["dev"]["src"]) == list(zh_en["dev"]["tgt"])
    assert list(en_zh["dev"]["tgt"]) == list(zh_en["dev"]["src"])


def test_hsk_rejects_other_languages_and_oversized_held_out():
    with pytest.raises(DataError, match="zh-en"):
        load_corpus(data_cfg(source="hsk", src_lang="de"))
    with pytest.raises(DataError, match="no training pairs"):
        load_corpus(data_cfg(source="hsk", dev_size=3000, test_size=3000))


# --------------------------------------------------------------------------- files
def test_files_load_and_optional_test_split(tmp_path):
    """A folder of aligned files gives train/dev (test absent is fine when not needed); CRLF
    line ends are stripped."""
    write_split(tmp_path, "train", ["你好", "谢谢"], ["hello", "thanks"])
    (tmp_path / "dev.zh").write_bytes("再见\r\n".encode())
    (tmp_path / "dev.en").write_bytes(b"bye\r\n")
    corpus = load_corpus(data_cfg(source="files", dir=str(tmp_path)))
    assert set(corpus) == {"train", "dev"}
    assert list(corpus["train"]["src"]) == ["你好", "谢谢"] and list(corpus["train"]["tgt"]) == ["hello", "thanks"]
    assert list(corpus["dev"]["src"]) == ["再见"] and list(corpus["dev"]["tgt"]) == ["bye"]
    with pytest.raises(DataError, match="'test' split"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path)), need=("test",))


def test_files_line_count_mismatch_names_both_counts(tmp_path):
    write_split(tmp_path, "train", ["一", "二", "三"], ["one", "two"])
    with pytest.raises(DataError) as e:
        load_corpus(data_cfg(source="files", dir=str(tmp_path)), need=("train",))
    msg = str(e.value)
    assert "train.zh has 3 lines" in msg and "train.en has 2" in msg


def test_files_invalid_utf8_names_file_and_line(tmp_path):
    write_split(tmp_path, "train", ["一", "二", "三"], ["one", "two", "three"])
    (tmp_path / "train.zh").write_bytes("一\n二\n".encode() + b"\xff\xfe bad\n")
    with pytest.raises(DataError) as e:
        load_corpus(data_cfg(source="files", dir=str(tmp_path)), need=("train",))
    assert f"{tmp_path / 'train.zh'}:3" in str(e.value)
    assert "UTF-8" in str(e.value)


def test_files_empty_file_and_missing_side(tmp_path):
    write_split(tmp_path / "a", "train", [], [])
    with pytest.raises(DataError, match="is empty"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path / "a")), need=("train",))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "train.zh").write_text("你好\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_corpus(data_cfg(source="files", dir=str(tmp_path / "b")), need=("train",))
    assert "train.en is missing" in str(e.value)


def test_files_folder_problems(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="not a folder$"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path / "nope")))
    monkeypatch.chdir(tmp_path)  # a relative folder (as a checkpoint trained elsewhere holds) names the folder it is read from
    with pytest.raises(DataError, match=f"not a folder \\(relative to the current folder, {tmp_path}\\)"):
        load_corpus(data_cfg(source="files", dir="../elsewhere/data"))
    with pytest.raises(DataError, match="has no"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path)))


def test_files_utf8_bom_is_not_part_of_the_first_sentence(tmp_path):
    """Files saved "UTF-8 with BOM" (Windows editors) must not put U+FEFF into the first sentence:
    NFKC keeps it and it is not whitespace, so it would reach sentencepiece and BLEU references."""
    write_split(tmp_path, "train", ["你好", "谢谢"], ["hello", "thanks"])
    for name in ("train.zh", "train.en"):
        p = tmp_path / name
        p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    corpus = load_corpus(data_cfg(source="files", dir=str(tmp_path)), need=("train",))
    assert list(corpus["train"]["src"]) == ["你好", "谢谢"]
    assert list(corpus["train"]["tgt"]) == ["hello", "thanks"]


def test_read_lines_keeps_blank_lines_and_drops_final_newline(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("a\n\nb\n", encoding="utf-8")
    assert read_lines(p) == ["a", "", "b"]
    p.write_text("a\nb", encoding="utf-8")
    assert read_lines(p) == ["a", "b"]


# --------------------------------------------------------------------------- hub (local save_to_disk)
def save_hub(path: Path, pairs_by_split: dict, langs=("zh", "en")) -> Path:
    dd = datasets.DatasetDict({
        split: datasets.Dataset.from_dict({"translation": [{langs[0]: a, langs[1]: b} for a, b in pairs]})
        for split, pairs in pairs_by_split.items()
    })
    dd.save_to_disk(str(path))
    return path


def test_hub_local_copy_maps_splits(tmp_path):
    """A local save_to_disk copy with a translation column loads; data.splits maps the names."""
    path = save_hub(tmp_path / "ds", {"train": [("你好", "hello"), ("谢谢", "thanks")],
                                      "validation": [("再见", "bye")]})
    corpus = load_corpus(data_cfg(source="hub", name=str(path)))
    assert list(corpus["train"]["src"]) == ["你好", "谢谢"] and list(corpus["dev"]["tgt"]) == ["bye"]
    renamed = load_corpus(data_cfg(source="hub", name=str(path), splits={"train": "validation", "dev": "train"}))
    assert list(renamed["train"]["tgt"]) == ["bye"] and list(renamed["dev"]["tgt"]) == ["hello", "thanks"]


def test_hub_without_the_language_pair_lists_what_it_has(tmp_path):
    path = save_hub(tmp_path / "ds", {"train": [("Hallo", "hello")], "validation": [("Tschüss", "bye")]},
                    langs=("de", "en"))
    with pytest.raises(DataError) as e:
        load_corpus(data_cfg(source="hub", name=str(path)))
    assert "['de', 'en']" in str(e.value) and "zh-en" in str(e.value)


def test_hub_missing_needed_split(tmp_path):
    path = save_hub(tmp_path / "ds", {"train": [("你好", "hello")]})
    with pytest.raises(DataError, match="'dev' split"):
        load_corpus(data_cfg(source="hub", name=str(path)))


# --------------------------------------------------------------------------- cleaning
def test_clean_normalizes_and_drops_empty_and_long_pairs():
    """NFKC (full-width -> ASCII), whitespace collapsed; empty sides and over-long pairs dropped."""
    ds = datasets.Dataset.from_dict({
        "src": ["ＡＢＣ　１２３", "  你\t 好  ", "   ", "好", "长" * 13, "ok"],
        "tgt": ["abc", "hello   world", "empty source", "", "long", "x" * 12],
    })
    out = clean(ds, data_cfg(max_chars=12), "train")
    assert list(out["src"]) == ["ABC 123", "你 好", "ok"]
    assert list(out["tgt"]) == ["abc", "hello world", "x" * 12]


def test_load_corpus_fails_when_cleaning_empties_a_split(tmp_path):
    write_split(tmp_path, "train", ["你好"], ["hello"])
    write_split(tmp_path, "dev", ["  "], ["bye"])
    with pytest.raises(DataError, match="'dev' is empty after cleaning"):
        load_corpus(data_cfg(source="files", dir=str(tmp_path)))


def test_opencc_traditional_to_simplified():
    assert normalizer("t2s")(TRAD) == SIMP
    assert normalizer(None)(TRAD) == TRAD


def test_opencc_applies_to_the_chinese_side_only(tmp_path):
    """With data.opencc=t2s the Chinese source is simplified; the English target is untouched."""
    write_split(tmp_path, "train", [TRAD], ["This is a test (測試)"])
    write_split(tmp_path, "dev", [TRAD], ["ok"])
    corpus = load_corpus(data_cfg(source="files", dir=str(tmp_path), opencc="t2s"))
    assert list(corpus["train"]["src"]) == [SIMP]
    assert list(corpus["train"]["tgt"]) == ["This is a test (測試)"]


def test_filters_are_counted_per_reason():
    """Control characters, length ratio, wrong script and (train only) duplicates are dropped,
    each counted in the report next to empty and over-long pairs."""
    ds = datasets.Dataset.from_dict({
        "src": ["你好", "你好", "坏\x07了", "一", "hello there", "好的", "我们走吧", ""],
        "tgt": ["hello", "hello", "broken", "one two three four five six seven eight nine ten", "你好吗", "你好你好",
                "let's go", "x"],
    })
    report: dict = {}
    out = clean(ds, data_cfg(script_check=True), "train", report)
    assert list(out["src"]) == ["你好", "我们走吧"]
    assert report["train"] == {"read": 8, "kept": 2, "empty": 1, "too_long": 0, "control_chars": 1,
                               "length_ratio": 1, "wrong_script": 2, "duplicate": 1}
    dev = clean(ds, data_cfg(script_check=False, dedup=True), "dev", report)
    assert len(dev) == 5 and report["dev"]["duplicate"] == 0  # held-out splits keep duplicates


def test_training_writes_the_data_report(trained_run):
    import json

    report = json.loads((trained_run / "data_report.json").read_text())
    assert {"train", "dev", "test"} <= report.keys()
    assert report["train"]["read"] >= report["train"]["kept"] > 0
