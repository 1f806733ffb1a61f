"""Sentencepiece tokenizers: fixed special ids, decoding, the content-hash cache, joint vocabularies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import nmt.tokenizer as tokenizer_mod
from nmt.config import TokenizerConfig
from nmt.tokenizer import BOS, EOS, PAD, UNK, Tokenizer, load_or_train


def tok_cfg(**kw):
    return OmegaConf.structured(TokenizerConfig(**kw))


@pytest.fixture(scope="module")
def english(hsk_corpus) -> list[str]:
    return list(hsk_corpus["train"]["tgt"])[:1500]


def forbid_training(monkeypatch):
    """Make any sentencepiece training fail: a call that still succeeds must have used the cache."""

    def boom(*a, **k):
        raise AssertionError("sentencepiece was retrained although a cached model exists")

    monkeypatch.setattr(tokenizer_mod, "_train_spm", boom)


def test_special_ids_are_fixed(hsk_tokenizer):
    """pad 0, unk 1, bos 2, eos 3 on both sides."""
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    for sp in (hsk_tokenizer.src, hsk_tokenizer.tgt):
        assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (PAD, UNK, BOS, EOS)


def test_vocab_sizes_and_encoding(hsk_tokenizer, hsk_corpus):
    """Vocabularies respect the (soft) sizes; encoding gives ordinary ids, not specials."""
    assert 500 < hsk_tokenizer.src_vocab_size <= 2000
    assert 100 < hsk_tokenizer.tgt_vocab_size <= 500
    src = list(hsk_corpus["train"]["src"][:50])
    for ids in hsk_tokenizer.encode_src(src):
        assert ids and all(EOS < i < hsk_tokenizer.src_vocab_size for i in ids)
    assert "".join(hsk_tokenizer.src.encode(src[0], out_type=str)).replace("▁", "") == src[0].replace(" ", "")


def test_target_round_trip(hsk_tokenizer, hsk_corpus):
    """Training sentences of the target side decode back to the same text."""
    tgt = list(hsk_corpus["train"]["tgt"][:50])
    assert [hsk_tokenizer.decode_tgt(ids) for ids in hsk_tokenizer.encode_tgt(tgt)] == tgt


def test_decode_stops_at_eos_and_drops_specials(hsk_tokenizer):
    a, b = hsk_tokenizer.encode_tgt(["Hello, teacher!", "Thank you."])
    assert hsk_tokenizer.decode_tgt([BOS, *a, EOS, *b, EOS, PAD]) == "Hello, teacher!"
    assert hsk_tokenizer.decode_tgt([*a, PAD, UNK]) == "Hello, teacher!"
    assert hsk_tokenizer.decode_tgt([EOS, *a]) == ""
    assert hsk_tokenizer.tgt_pieces([BOS, EOS]) == ["<s>", "</s>"]


def test_state_round_trip(hsk_tokenizer):
    """A tokenizer rebuilt from its checkpoint state encodes identically."""
    back = Tokenizer.from_state(hsk_tokenizer.to_state())
    texts = ["我爱学习中文。", "图书馆在学校里边。"]
    assert back.encode_src(texts) == hsk_tokenizer.encode_src(texts)
    assert back.encode_tgt(["I like tea."]) == hsk_tokenizer.encode_tgt(["I like tea."])


def test_session_cache_is_under_nmt_cache_and_reused(hsk_cfg, hsk_corpus, hsk_tokenizer, nmt_cache, monkeypatch):
    """Without tokenizer.cache_dir the models live in $NMT_CACHE/spm; asking again reuses them."""
    spm_dir = nmt_cache / "spm"
    before = {p.name: p.stat().st_mtime_ns for p in spm_dir.glob("*.model")}
    assert len(before) >= 2
    forbid_training(monkeypatch)
    train = hsk_corpus["train"]
    again = load_or_train(hsk_cfg.tokenizer, list(train["src"]), list(train["tgt"]), seed=42)
    assert again.to_state() == hsk_tokenizer.to_state()
    assert {p.name: p.stat().st_mtime_ns for p in spm_dir.glob("*.model")} == before


def test_cache_dir_trains_once_then_reuses(tmp_path, english, monkeypatch):
    """The first call trains and caches one model per side; the second reads the cache (no
    training, no new files, same bytes); other settings or texts train a new model."""
    cfg = tok_cfg(src_vocab_size=150, tgt_vocab_size=120, cache_dir=str(tmp_path / "c"))
    first = load_or_train(cfg, english, english[::-1], seed=1)
    files = sorted((tmp_path / "c").iterdir())
    assert len(files) == 2 and all(f.suffix == ".model" for f in files)
    mtimes = [f.stat().st_mtime_ns for f in files]

    with monkeypatch.context() as m:
        forbid_training(m)
        second = load_or_train(cfg, english, english[::-1], seed=1)
    assert second.to_state() == first.to_state()
    assert sorted((tmp_path / "c").iterdir()) == files
    assert [f.stat().st_mtime_ns for f in files] == mtimes

    load_or_train(tok_cfg(src_vocab_size=160, tgt_vocab_size=120, cache_dir=str(tmp_path / "c")),
                  english, english[::-1], seed=1)
    assert len(list((tmp_path / "c").iterdir())) == 3  # the target model was reused
    load_or_train(cfg, english[:-1], english[::-1], seed=1)
    assert len(list((tmp_path / "c").iterdir())) == 4  # other source texts: a new source model
    assert not [f for f in (tmp_path / "c").iterdir() if ".tmp" in f.name]


def test_joint_vocabulary(tmp_path, english):
    """joint=true: one shared model (src_vocab_size), written once as spm.joint.model."""
    cfg = tok_cfg(joint=True, src_vocab_size=200, tgt_vocab_size=999, cache_dir=str(tmp_path / "c"))
    tok = load_or_train(cfg, english[:700], english[700:], seed=0)
    assert tok.src is tok.tgt and tok.src_model == tok.tgt_model
    assert tok.src_vocab_size == tok.tgt_vocab_size <= 200
    assert len(list((tmp_path / "c").iterdir())) == 1
    assert tok.encode_src(["Where is the school?"]) == tok.encode_tgt(["Where is the school?"])
    tok.save(tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["spm.joint.model"]


def test_save_separate_models(tmp_path, hsk_tokenizer):
    """Separate vocabularies are written as spm.src.model / spm.tgt.model with the same bytes."""
    hsk_tokenizer.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spm.src.model", "spm.tgt.model"]
    assert (tmp_path / "spm.src.model").read_bytes() == hsk_tokenizer.src_model
    assert (tmp_path / "spm.tgt.model").read_bytes() == hsk_tokenizer.tgt_model
    assert Path(os.environ["NMT_CACHE"]).is_dir()


def test_byte_fallback_keeps_characters_outside_the_vocabulary(tmp_path):
    """With tokenizer.byte_fallback a character never seen in training becomes UTF-8 byte pieces
    and decodes back; without it, it is <unk>."""
    texts = ["我爱你。", "今天天气很好。", "你叫什么名字？", "我想喝一杯咖啡。", "他明天要去北京。"] * 40
    rare = "我爱𪚥。"  # U+2A6A5, in no training sentence
    for fallback in (False, True):
        cfg = OmegaConf.structured(TokenizerConfig(src_vocab_size=300, tgt_vocab_size=300, byte_fallback=fallback,
                                                   cache_dir=str(tmp_path / str(fallback)), character_coverage=1.0))
        tok = load_or_train(cfg, texts, texts, seed=0)
        ids = tok.encode_tgt([rare])[0]
        assert (UNK in ids) is not fallback
        if fallback:
            assert tok.decode_tgt(ids) == rare
            assert Tokenizer.from_state(tok.to_state()).decode_tgt(ids) == rare


def write_spm(path: Path, texts: list[str], **ids) -> Path:
    """A sentencepiece model trained here (sentencepiece's own default special ids unless ``ids`` are given)."""
    import io

    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=buf, vocab_size=2000, hard_vocab_limit=False,
                                   character_coverage=0.98, minloglevel=2, **ids)
    path.write_bytes(buf.getvalue())
    return path


def test_your_own_sentencepiece_models_are_used_as_they_are(tmp_path, english, hsk_corpus, monkeypatch):
    forbid_training(monkeypatch)  # neither side trains
    ids = dict(pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    src = write_spm(tmp_path / "src.model", list(hsk_corpus["train"]["src"])[:1500], **ids)
    tgt = write_spm(tmp_path / "tgt.model", english, **ids)
    tok = load_or_train(tok_cfg(src_model=str(src), tgt_model=str(tgt)), [], [])
    assert tok.src_model == src.read_bytes() and tok.tgt_model == tgt.read_bytes()
    joint = load_or_train(tok_cfg(src_model=str(tgt), joint=True), [], [])
    assert joint.src is joint.tgt and joint.src_model == tgt.read_bytes()


def test_a_model_with_other_special_ids_gets_ours_and_segments_the_same(tmp_path, english, monkeypatch):
    """sentencepiece's defaults (unk 0, bos 1, eos 2, no pad) and a BPE model without bos and with pad at 3: the
    special pieces move to nmt's ids, the missing ones are added, every text keeps its pieces."""
    import sentencepiece as spm

    forbid_training(monkeypatch)
    defaults = write_spm(tmp_path / "default_ids.model", english)
    bpe = write_spm(tmp_path / "bpe.model", english, model_type="bpe", unk_id=0, eos_id=1, bos_id=-1, pad_id=3)
    tok = load_or_train(tok_cfg(src_model=str(defaults), tgt_model=str(bpe)), [], [])
    for side, path in ((tok.src, defaults), (tok.tgt, bpe)):
        theirs = spm.SentencePieceProcessor(model_file=str(path))
        assert (side.pad_id(), side.unk_id(), side.bos_id(), side.eos_id()) == (PAD, UNK, BOS, EOS)
        assert [side.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
        for text in english[:200] + ["an unseen word: zebra ☃"]:
            assert side.encode(text, out_type=str) == theirs.encode(text, out_type=str)
    assert tok.tgt_vocab_size == spm.SentencePieceProcessor(model_file=str(bpe)).get_piece_size() + 1  # bos added
    assert Tokenizer.from_state(tok.to_state()).decode_tgt(tok.encode_tgt(english[:1])[0]) == english[0]


def test_a_model_that_cannot_take_our_ids_or_is_no_model_is_refused_by_name(tmp_path, english):
    from nmt.config import ConfigError

    clash = write_spm(tmp_path / "clash.model", english, bos_id=-1, user_defined_symbols=["<s>"])
    with pytest.raises(ConfigError, match=r"tokenizer.tgt_model=.*clash.model: cannot add the special piece '<s>'"):
        load_or_train(tok_cfg(tgt_model=str(clash)), english, english)
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="junk.model: not a sentencepiece model"):
        load_or_train(tok_cfg(src_model=str(junk)), english, english)


def test_missing_files_are_refused_before_any_data_is_read(tmp_path):
    from nmt.config import ConfigError, TrainConfig
    from nmt.config_check import validate

    cfg = OmegaConf.structured(TrainConfig)
    cfg.tokenizer.src_model = str(tmp_path / "nowhere.model")
    with pytest.raises(ConfigError, match=r"tokenizer.src_model=.*nowhere.model: no such file"):
        validate(cfg)


def test_the_prepared_corpus_follows_the_model_file_not_its_path(tmp_path, english):
    """Replacing the file behind tokenizer.tgt_model gives another prepared-corpus cache key."""
    from nmt.config import DataConfig
    from nmt.data.prepare import _settings

    ids = dict(pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    path = write_spm(tmp_path / "tgt.model", english, **ids)
    cfg = tok_cfg(tgt_model=str(path))
    before = _settings(DataConfig(), cfg, 0, None)
    write_spm(path, english[:300], **ids)
    assert _settings(DataConfig(), cfg, 0, None) != before
