"""The training corpus, cleaned, tokenized and encoded once, then reused from a disk cache.

The result goes to ``$NMT_CACHE/data/<key>``, the key hashing the corpus identity (the datasets'
fingerprints) and every setting that changes the output; a later run opens it memory-mapped."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import datasets
import numpy as np
import sentencepiece as spm
from omegaconf import OmegaConf

from nmt.batching import Pairs
from nmt.cache import cache_root
from nmt.config import DataConfig, TokenizerConfig
from nmt.data.cache import fingerprint, map_cached, num_workers
from nmt.data.clean import clean
from nmt.data.corpus import clean_splits, load_raw
from nmt.data.mix import drop_held_out, entry_config, mix_train
from nmt.data.text import DataError
from nmt.tokenizer import Tokenizer, load_or_train
from nmt.version import __version__

log = logging.getLogger(__name__)

PIPELINE = 4  # bump when the prepared output changes for the same settings (3: the train text kept beside its ids;
#   4: a data.mix corpus's pairs that share a sentence with dev or test dropped)
FEATURES = datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string"),
                              "src_ids": datasets.Sequence(datasets.Value("int32")),
                              "tgt_ids": datasets.Sequence(datasets.Value("int32")),
                              "src_len": datasets.Value("int32"), "tgt_len": datasets.Value("int32")})


@dataclass
class Prepared:
    tokenizer: Tokenizer
    train: Pairs  # piece ids, memory-mapped
    dev: datasets.Dataset  # cleaned text: src, tgt
    test: Optional[datasets.Dataset]  # cleaned text, when the corpus has a test split
    report: dict  # per split: pairs read, kept, and dropped per reason
    folder: Path  # where the prepared corpus lives


def _settings(data: DataConfig, tok: TokenizerConfig, seed: int, tokenizer: Optional[Tokenizer]) -> dict:
    """Everything that changes the prepared output (not where it is cached or how many processes); ``tokenizer``:
    resuming with the checkpoint's sentencepiece models, not new ones."""
    d = {k: v for k, v in _plain(data).items() if k not in ("num_proc", "cache", "extra_dev")}  # extra_dev: validation only
    t = {k: v for k, v in _plain(tok).items() if k not in ("cache_dir", "sample_alpha", "sample_nbest")}  # batch time
    for key in ("src_model", "tgt_model"):  # a model the user brings: its content, not its path
        if t.get(key):
            t[key] = hashlib.sha256(Path(t[key]).expanduser().read_bytes()).hexdigest()
    fixed = hashlib.sha256(tokenizer.src_model + tokenizer.tgt_model).hexdigest() if tokenizer is not None else None
    return {"data": d, "tokenizer": t, "seed": seed, "fixed_tokenizer": fixed, "pipeline": PIPELINE,
            "sentencepiece": spm.__version__, "datasets": datasets.__version__}


def _plain(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(vars(cfg))


def prepare(data: DataConfig, tok_cfg: TokenizerConfig, seed: int = 0, tokenizer: Optional[Tokenizer] = None) -> Prepared:
    """The train split as piece ids and the dev split as text, from the cache when it matches."""
    t0 = time.perf_counter()
    raw = load_raw(data)  # a missing split fails in clean_splits: it can have no cached corpus
    identity = {s: fingerprint(raw[s]) for s in ("train", "dev", "test") if s in raw}
    entries = [entry_config(data, i) for i in range(len(data.mix))]  # (DataConfig, weight) of each data.mix entry
    mixed = _load_mix(data, entries)
    if mixed:
        identity["mix"] = [fingerprint(d) for d in mixed]

    def folder_for(fixed: Optional[Tokenizer]) -> Path:
        blob = json.dumps([identity, _settings(data, tok_cfg, seed, fixed)], sort_keys=True, default=str)
        return cache_root() / "data" / hashlib.sha256(blob.encode()).hexdigest()[:24]

    # a resumed run first looks for the corpus its first run prepared (same settings, same models)
    for candidate in [folder_for(None)] + ([folder_for(tokenizer)] if tokenizer is not None else []):
        if data.cache and (candidate / "done").exists():
            out = _open(candidate)
            if tokenizer is None or out.tokenizer.to_state() == tokenizer.to_state():
                log.info("prepared corpus: reusing %s (%d train pairs, %.1fs)", candidate, len(out.train),
                         time.perf_counter() - t0)
                return out
    settings = _settings(data, tok_cfg, seed, tokenizer)
    folder = folder_for(tokenizer)
    report: dict = {}
    cleaned = clean_splits(raw, data, ("train", "dev"), report)
    train, dev, test = cleaned["train"], cleaned["dev"], cleaned.get("test")
    if mixed:
        held = [d for d in (dev, test) if d is not None]
        extra = [drop_held_out(clean(d, entries[i][0], f"mix{i}", report), held, f"mix{i}", report)
                 for i, d in enumerate(mixed)]
        if empty := [i for i, d in enumerate(extra) if len(d) == 0]:
            c = entries[empty[0]][0]
            raise DataError(f"data.mix[{empty[0]}] ({c.source} {c.dir or c.name or ''}): no training pair is left after "
                            f"cleaning (see its counts in the log)")
        train = mix_train([train, *extra], [data.weight] + [w for _, w in entries], data)
        report["train"]["mixed"] = len(train)
        log.info("train: %d pairs drawn from %d corpora by weight (%s)", len(train), len(extra) + 1, data.mix_stop)
    if tokenizer is None:
        tokenizer = _train_tokenizer(train, tok_cfg, seed)
    log.info("vocabulary: %d source / %d target pieces", tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    encoded = map_cached(train, _encode_batch, "train: encoding", num_workers(data, len(train)), batch_size=5000,
                         key=json.dumps(settings, sort_keys=True), features=FEATURES,
                         remove_columns=[c for c in train.column_names if c not in ("src", "tgt")],
                         fn_kwargs={"src_model": tokenizer.src_model, "tgt_model": tokenizer.tgt_model})
    keep = np.flatnonzero(np.maximum(*(encoded.data.column(c).to_numpy() for c in ("src_len", "tgt_len"))) <= data.max_tokens)
    report["train"].update(too_many_pieces=int(len(encoded) - len(keep)), kept=int(len(keep)))
    log.info("train: %d pairs, %d over %d pieces dropped", len(keep), len(encoded) - len(keep), data.max_tokens)
    if len(keep) == 0:
        raise DataError(f"no training pairs left: all {len(encoded)} have a side over data.max_tokens={data.max_tokens} pieces")
    if len(keep) < len(encoded):
        encoded = encoded.select(keep)
    _write(folder, encoded, dev, test, tokenizer, report, settings, identity)
    out = _open(folder)
    log.info("prepared corpus: %s (%.1fs)", folder, time.perf_counter() - t0)
    return out


def _load_mix(data: DataConfig, entries: list[tuple[DataConfig, float]]) -> list[datasets.Dataset]:
    """The raw train split of each ``data.mix`` entry (nmt/data/mix.py)."""
    out = []
    for i, (cfg, _) in enumerate(entries):
        split = load_raw(cfg)
        if "train" not in split:
            raise DataError(f"data.mix[{i}]={dict(data.mix[i])}: that corpus has no train split")
        out.append(split["train"])
    return out


def _train_tokenizer(train: datasets.Dataset, cfg: TokenizerConfig, seed: int) -> Tokenizer:
    """Sentencepiece on at most ``input_sentence_size`` pairs drawn at random (seeded), so memory is bounded."""
    if (n := len(train)) > cfg.input_sentence_size:
        train = train.select(np.sort(np.random.default_rng(seed).choice(n, cfg.input_sentence_size, replace=False)))
        log.info("sentencepiece: training on a random sample of %d of %d pairs", len(train), n)
    return load_or_train(cfg, train["src"], train["tgt"], seed=seed)


@lru_cache(maxsize=2)
def _processor(model: bytes) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_proto=model)


def _encode_batch(batch: dict, src_model: bytes, tgt_model: bytes) -> dict:
    src, tgt = _processor(src_model).encode(batch["src"]), _processor(tgt_model).encode(batch["tgt"])
    return {"src_ids": src, "tgt_ids": tgt, "src_len": [len(s) for s in src], "tgt_len": [len(t) for t in tgt]}


def _write(folder: Path, train: datasets.Dataset, dev: datasets.Dataset, test: Optional[datasets.Dataset],
           tok: Tokenizer, report: dict, settings: dict, identity: dict) -> None:
    """Write into a temporary folder, then rename: a killed run leaves no half-written cache."""
    tmp = folder.with_name(f".{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    train.save_to_disk(str(tmp / "train"))
    dev.flatten_indices().save_to_disk(str(tmp / "dev"))
    if test is not None:
        test.flatten_indices().save_to_disk(str(tmp / "test"))
    (tmp / "src.model").write_bytes(tok.src_model)
    (tmp / "tgt.model").write_bytes(tok.tgt_model)
    (tmp / "report.json").write_text(json.dumps(report, indent=1))
    (tmp / "settings.json").write_text(json.dumps({"identity": identity, **settings, "nmt": __version__}, indent=1, default=str))
    (tmp / "done").write_text("")
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, folder)


def _open(folder: Path) -> Prepared:
    try:
        train, dev = (datasets.load_from_disk(str(folder / split)) for split in ("train", "dev"))
        test = datasets.load_from_disk(str(folder / "test")) if (folder / "test").exists() else None
        tok = Tokenizer((folder / "src.model").read_bytes(), (folder / "tgt.model").read_bytes())
        report = json.loads((folder / "report.json").read_text())
    except (OSError, ValueError, RuntimeError) as e:
        raise DataError(f"the prepared corpus {folder} is damaged ({e}); delete the folder to rebuild it") from None
    return Prepared(tok, Pairs.from_dataset(train), dev, test, report, folder)
