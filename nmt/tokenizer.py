"""Sentencepiece models trained on the train split, cached by content hash; the model bytes travel in
every checkpoint. Special ids are fixed for both sides: pad 0, unk 1, bos 2, eos 3."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import logging
import os
import random
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

from nmt.cache import cache_root
from nmt.config import ConfigError, TokenizerConfig
from nmt.vocab import BOS, EOS, PAD, UNK

log = logging.getLogger(__name__)

SPM_OPTIONS = ("model_type", "character_coverage", "byte_fallback")  # settings the trainer gets, so in the cache key


class Tokenizer:
    """Source and target sentencepiece processors (the same one for a joint vocabulary)."""

    def __init__(self, src_model: bytes, tgt_model: bytes):
        self.src_model, self.tgt_model = src_model, tgt_model
        self.src = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt = self.src if tgt_model == src_model else spm.SentencePieceProcessor(model_proto=tgt_model)
        self.src_vocab_size, self.tgt_vocab_size = self.src.get_piece_size(), self.tgt.get_piece_size()

    def encode_src(self, texts: Sequence[str]) -> list[list[int]]:
        return self.src.encode(list(texts))

    def encode_tgt(self, texts: Sequence[str]) -> list[list[int]]:
        return self.tgt.encode(list(texts))

    def tgt_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.tgt.id_to_piece(i) for i in ids]

    def decode_tgt(self, ids: Sequence[int]) -> str:
        """Detokenized text; stops at the first EOS and drops special ids."""
        return self.tgt.decode([int(i) for i in itertools.takewhile(lambda i: i != EOS, ids) if i > EOS])

    def to_state(self) -> dict:
        return {"src_model": self.src_model, "tgt_model": self.tgt_model}

    @classmethod
    def from_state(cls, state: dict) -> Tokenizer:
        return cls(state["src_model"], state["tgt_model"])

    def save(self, folder: Path) -> None:
        """Write the model files into a run directory (for inspection and reuse)."""
        folder.mkdir(parents=True, exist_ok=True)
        sides = {"joint": self.src_model} if self.src_model == self.tgt_model else {"src": self.src_model, "tgt": self.tgt_model}
        for side, model in sides.items():
            (folder / f"spm.{side}.model").write_bytes(model)


def _train_spm(texts: Sequence[str], vocab_size: int, cfg: TokenizerConfig, seed: int) -> bytes:
    if len(texts) > cfg.input_sentence_size:
        texts = random.Random(seed).sample(list(texts), cfg.input_sentence_size)
    buf = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=buf, vocab_size=vocab_size, hard_vocab_limit=False,
            pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS, num_threads=os.cpu_count() or 1, minloglevel=2,
            **{k: getattr(cfg, k) for k in SPM_OPTIONS},
        )
    except RuntimeError as e:
        detail = str(e).strip().splitlines()[0].split("] ")[-1]
        raise ConfigError(f"sentencepiece cannot train with vocab_size={vocab_size}: {detail}") from None
    return buf.getvalue()


def _cached(texts: Sequence[str], vocab_size: int, cfg: TokenizerConfig, cache: Path, seed: int) -> bytes:
    """Train once per (texts, settings); later runs read the cached model."""
    settings = {k: getattr(cfg, k) for k in (*SPM_OPTIONS, "input_sentence_size")}
    settings.update(vocab_size=vocab_size, seed=seed, version=spm.__version__)
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for t in texts:
        h.update(f"{t}\n".encode())
    path = cache / f"{h.hexdigest()[:24]}.model"
    if path.exists():
        log.info("sentencepiece: reusing cached %s", path)
        return path.read_bytes()
    log.info("sentencepiece: training on %d sentences (vocab %d, %s)", len(texts), vocab_size, cfg.model_type)
    model = _train_spm(texts, vocab_size, cfg, seed)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(model)
    os.replace(tmp, path)
    return model


def brought_model(cfg: TokenizerConfig, key: str) -> bytes:
    """The sentencepiece model file of ``tokenizer.<key>`` (src_model, tgt_model), given the special ids the model
    needs (``with_our_ids``: sentencepiece's own defaults, unk 0 bos 1 eos 2 and no pad, are the common case)."""
    path = Path(getattr(cfg, key)).expanduser()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"tokenizer.{key}={path}: cannot read it ({e.strerror})") from None
    try:
        sp = spm.SentencePieceProcessor(model_proto=data)
    except RuntimeError:
        raise ConfigError(f"tokenizer.{key}={path}: not a sentencepiece model") from None
    found = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
    if found == (PAD, UNK, BOS, EOS):
        return data
    ours = with_our_ids(data, f"tokenizer.{key}={path}")
    log.info("tokenizer.%s=%s: special ids pad %d unk %d bos %d eos %d moved to nmt's 0 1 2 3 (the segmentation is "
             "the file's)", key, path, *found)
    return ours


def with_our_ids(data: bytes, where: str = "the model") -> bytes:
    """A sentencepiece model with nmt's special ids (pad 0, unk 1, bos 2, eos 3): its special pieces moved first, a
    missing pad, bos or eos added as a control piece, every other piece after them in its order with its score, so
    each text segments into the same pieces (control pieces take no part in segmentation)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    m.ParseFromString(data)
    t, Piece = m.trainer_spec, pb.ModelProto.SentencePiece
    wanted = [(t.pad_id, t.pad_piece or "<pad>", Piece.CONTROL), (t.unk_id, t.unk_piece or "<unk>", Piece.UNKNOWN),
              (t.bos_id, t.bos_piece or "<s>", Piece.CONTROL), (t.eos_id, t.eos_piece or "</s>", Piece.CONTROL)]
    taken = {i for i, _, _ in wanted if i >= 0}
    rest = [p for i, p in enumerate(m.pieces) if i not in taken]
    names = {p.piece for p in rest}
    specials = []
    for i, name, kind in wanted:
        if i < 0 and name in names:
            raise ConfigError(f"{where}: cannot add the special piece {name!r}: an ordinary piece has that name")
        specials.append(m.pieces[i] if i >= 0 else Piece(piece=name, score=0.0, type=kind))
    del m.pieces[:]
    m.pieces.extend([*specials, *rest])
    t.pad_id, t.unk_id, t.bos_id, t.eos_id = PAD, UNK, BOS, EOS
    t.pad_piece, t.unk_piece, t.bos_piece, t.eos_piece = (p.piece for p in specials)
    return m.SerializeToString()


def load_or_train(cfg: TokenizerConfig, src_texts: Sequence[str], tgt_texts: Sequence[str], seed: int = 0) -> Tokenizer:
    """Separate or joint sentencepiece models for a training split: the user's own (tokenizer.src_model,
    tokenizer.tgt_model) where given, trained (and cached) otherwise."""
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else cache_root() / "spm"
    if cfg.joint:
        model = brought_model(cfg, "src_model") if cfg.src_model else \
            _cached(list(src_texts) + list(tgt_texts), cfg.src_vocab_size, cfg, cache, seed)
        return Tokenizer(model, model)
    src = brought_model(cfg, "src_model") if cfg.src_model else _cached(src_texts, cfg.src_vocab_size, cfg, cache, seed)
    tgt = brought_model(cfg, "tgt_model") if cfg.tgt_model else _cached(tgt_texts, cfg.tgt_vocab_size, cfg, cache, seed)
    return Tokenizer(src, tgt)
