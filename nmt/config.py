"""Typed configuration schema, mirrored by the YAML tree under ``configs/``: Hydra's ConfigStore rejects
a misspelled key or a value of the wrong type; ``nmt.config_check.validate`` checks what a type cannot express."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf


class ConfigError(ValueError):
    """A configuration value that cannot work; the message names the key."""


@dataclass
class DataConfig:
    source: str = "tatoeba"  # tatoeba (packaged, data/tatoeba) | hsk | files | hub
    src_lang: str = "zh"
    tgt_lang: str = "en"
    dir: Optional[str] = None  # files: folder with {train,dev,test}.{src_lang,tgt_lang}; tatoeba: None = data/tatoeba
    name: Optional[str] = None  # hub: dataset name, or a local path saved with save_to_disk
    config: Optional[str] = None  # hub: dataset config, e.g. "zh-en"
    revision: Optional[str] = None  # hub: a branch or commit, e.g. "refs/convert/parquet"
    data_dir: Optional[str] = None  # hub: a folder inside the dataset repository
    # hub: our split name -> the dataset's split name
    splits: dict[str, str] = field(default_factory=lambda: {"train": "train", "dev": "validation", "test": "test"})
    dev_size: int = 250  # hsk, hub with holdout: held-out pairs per split (seeded by data.seed)
    test_size: int = 250
    seed: int = 1234
    max_chars: int = 400  # cleaning: drop pairs with a side longer than this (characters)
    max_tokens: int = 50  # training: drop train pairs with a side longer than this (pieces)
    opencc: Optional[str] = None  # e.g. "t2s": traditional -> simplified for the Chinese side
    max_ratio: float = 9.0  # drop pairs whose length ratio (CJK characters / other words) exceeds this; 0 = off
    dedup: bool = True  # drop exact duplicate pairs from the train split
    drop_control: bool = True  # drop pairs with control characters
    script_check: bool = False  # drop a Chinese side without CJK, or another side that is mostly CJK
    format: str = "text"  # files: text ({split}.{lang} pairs) | tsv ({split}.tsv, one pair per row)
    tsv_columns: Optional[list[str]] = None  # files, tsv: the language of each column; None = [src_lang, tgt_lang]
    holdout: bool = False  # hub: carve dev/test (dev_size/test_size pairs, seeded) from train if the dataset lacks them
    num_proc: int = 0  # processes for cleaning and encoding; 0 = one per core for corpora over 50k pairs
    cache: bool = True  # reuse the cleaned and encoded corpus from $NMT_CACHE/data when corpus and settings match
    # more dev sets, each a file prefix P (P.{src_lang} and P.{tgt_lang}, aligned lines): scored at every validation;
    # early stopping and best.pt follow the dev split (nmt/validation.py)
    extra_dev: list[str] = field(default_factory=list)
    # more training corpora mixed with this one by weight (nmt/data/mix.py): each a dict of the data settings that
    # differ and its weight, e.g. [{source: files, dir: my_corpus, weight: 2}]; dev and test come from this corpus
    mix: list[dict[str, Any]] = field(default_factory=list)
    weight: float = 1.0  # this corpus's weight in the mix
    mix_stop: str = "all_exhausted"  # all_exhausted (each corpus drawn whole at least once) | first_exhausted


@dataclass
class TokenizerConfig:
    model_type: str = "unigram"  # unigram | bpe | char | word
    joint: bool = False  # one vocabulary for both sides (size: src_vocab_size)
    src_vocab_size: int = 4000  # a soft limit: a small corpus may give fewer pieces
    tgt_vocab_size: int = 4000
    character_coverage: float = 0.9995
    byte_fallback: bool = False  # characters outside the vocabulary become UTF-8 byte pieces, not <unk>
    input_sentence_size: int = 1_000_000  # train on a seeded random sample of at most this many sentences per side
    cache_dir: Optional[str] = None  # trained models are cached here; None = $NMT_CACHE or ~/.cache/nmt
    # your own sentencepiece models (.model files), used instead of training one; pad/unk/bos/eos must be 0/1/2/3.
    # With tokenizer.joint=true, src_model serves both sides
    src_model: Optional[str] = None
    tgt_model: Optional[str] = None
    # subword regularization: > 0 samples each training pair's segmentation at batch time (nmt/sampling.py; unigram:
    # the smoothing alpha, e.g. 0.5 (0.1 fragments English 1.7x: docs/training.md); bpe: the dropout probability);
    # 0 = off. Not part of the prepared corpus's key
    sample_alpha: float = 0.0
    sample_nbest: int = -1  # unigram: sample among this many best segmentations; -1 = all


@dataclass
class AttentionConfig:
    score: str = "general"  # dot | general | concat | location | scaled_dot
    mode: str = "global"  # global | local_m | local_p
    window: int = 10  # D: half-width of the local window, in source positions
    heads: int = 1  # > 1: multi-head attention (needs score scaled_dot)
    max_len: int = 256  # location score: the fixed maximum source length


@dataclass
class ModelConfig:
    rnn_type: str = "lstm"  # lstm | gru
    emb_size: int = 256
    hidden_size: int = 256  # decoder size; also the encoder output size
    encoder_layers: int = 2
    decoder_layers: int = 2
    bidirectional: bool = True  # encoder: hidden_size // 2 units per direction
    dropout: float = 0.2
    input_feeding: bool = True  # false: the fast path (one RNN call, attention as one batched matmul)
    init_range: float = 0.1  # parameters start uniform in [-init_range, init_range] (the paper's 0.1)
    # none | decoder (W_s is the target embedding matrix, nmt/tied.py) | all (and the source embeddings too:
    # tokenizer.joint=true, one vocabulary)
    tie_embeddings: str = "none"
    attention: AttentionConfig = field(default_factory=AttentionConfig)


@dataclass
class TrainerConfig:
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    precision: str = "auto"  # auto (fp32 on a CPU, timed on a GPU) | fp32 | bf16 | fp16 | bf16_output; nmt/precision.py
    engine: str = "fast"  # fast (nmt/engine/) | plain (the paper's modules as written); same weights, same losses
    seed: int = 42
    threads: int = 0  # CPU threads; 0 = the cores, shared among torchrun's local processes
    compile: Optional[bool] = None  # torch.compile the fast engine's step; None = off (slower on an H100: nmt/engine/compiled.py)
    batch_tokens: int = 1200  # token budget per batch (max of source and target pieces)
    batch_sentences: int = 0  # at most this many sentences per batch; 0 = only the token budget
    accum_steps: int = 1  # batches per update (gradient accumulation)
    optimizer: str = "adam"  # adam | adamw | sgd (the paper's: sgd, lr 1.0)
    lr: float = 1e-3
    weight_decay: float = 0.0
    schedule: str = "constant"  # constant | halving (the paper's) | plateau | inverse_sqrt | linear | cosine (nmt/optim.py)
    warmup_steps: int = 0  # linear warm-up (any schedule); inverse_sqrt decays after it
    halve_after_epoch: int = 5  # halving: halve after every epoch past this one
    decay_factor: float = 0.5  # halving and plateau
    plateau_patience: int = 2  # plateau: validations without a better dev BLEU before decaying
    clip_norm: float = 5.0  # gradient norm clipping; 0 = off
    label_smoothing: float = 0.0
    src_word_dropout: float = 0.0  # training: this share of source pieces read as <unk> (word dropout, for small corpora)
    tgt_word_dropout: float = 0.0  # training: the same for the decoder's inputs (teacher forcing), never for its targets
    early_stopping_patience: int = 0  # stop after this many validations without improvement; 0 = off
    early_stopping_metric: str = "bleu"  # bleu | loss
    max_nonfinite: int = 10  # consecutive non-finite updates (skipped) before the run stops
    max_steps: int = 0  # 0 = no step limit
    max_epochs: int = 0  # 0 = no epoch limit
    max_minutes: float = 0.0  # training-time budget (nmt/budget.py: the loop's wall time, resumes included); 0 = none
    log_every: int = 50
    valid_every: int = 500  # steps between validations (and at the end)
    valid_beam: int = 1  # greedy validation decoding is cheap and tracks beam BLEU
    valid_max_sentences: int = 0  # 0 = whole dev split
    attention_images: int = 3  # TensorBoard heatmaps of the first N dev sentences at each validation
    test_beam: int = 5  # beam for the test split evaluated after training; 0 = skip
    keep_last: int = 0  # also keep the last K validations' weights as checkpoints/step*.pt (for averaging)
    keep_best: int = 1  # K > 1: the K last new bests also as checkpoints/best_step*.pt (best.pt is the best)
    save_every: int = 0  # also write last.pt every N steps; 0 = at validations only
    resume: Optional[str] = None  # a checkpoint or run directory to continue from, or "auto" (this run dir's last.pt)
    # a new run from a trained model's weights and sentencepiece models (fine-tuning): fresh optimizer, schedule,
    # budget, any corpus (nmt/init_from.py)
    init_from: Optional[str] = None
    reset_optimizer: bool = False  # on resume: fresh optimizer state
    reset_scheduler: bool = False  # on resume: fresh learning-rate schedule state
    reset_counters: bool = False  # on resume: step, epoch, best score, patience and data position from 0


@dataclass
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)


SCORES = ("dot", "general", "concat", "location", "scaled_dot")
MODES = ("global", "local_m", "local_p")


def register() -> None:
    """Store the schema so ``configs/train.yaml`` can extend it; ``${short:...}`` names a sweep's run folders."""
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)
    if not OmegaConf.has_resolver("short"):
        OmegaConf.register_new_resolver("short", short_name)


def short_name(name: str, limit: int = 120) -> str:
    """``name`` if at most ``limit`` characters, else its start and a hash of the whole: a sweep run's folder is
    named by its overrides, and a long override list would pass the file system's 255-byte limit."""
    if len(name.encode("utf-8")) <= limit:
        return name
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]
    return name.encode("utf-8")[: limit - 11].decode("utf-8", errors="ignore") + "~" + digest


def check_choices(section: str, obj: Any, **choices: tuple) -> None:
    """Each keyword is a key of ``obj`` (the config ``section``) and the values it may take."""
    for key, allowed in choices.items():
        if (value := getattr(obj, key)) not in allowed:
            raise ConfigError(f"{section}.{key}={value!r} is not valid; choose one of {', '.join(allowed)}")


def check_positive(section: str, obj: Any, positive: tuple[str, ...], non_negative: tuple[str, ...] = ()) -> None:
    """Each of the ``positive`` keys of ``obj`` (the config ``section``) is > 0, each ``non_negative`` one >= 0."""
    for key in positive + non_negative:
        if (value := getattr(obj, key)) < 0 or (value == 0 and key in positive):
            raise ConfigError(f"{section}.{key}={value!r} must be {'> 0' if key in positive else '>= 0'}")


def validate_model(m: ModelConfig) -> None:
    """The model's settings (also checked by ``build_model``, for models built without a run config)."""
    check_choices("model", m, rnn_type=("lstm", "gru"), tie_embeddings=("none", "decoder", "all"))
    check_positive("model", m, ("emb_size", "hidden_size", "encoder_layers", "decoder_layers", "init_range"))
    if m.bidirectional and m.hidden_size % 2:
        raise ConfigError(f"model.hidden_size={m.hidden_size} must be even with model.bidirectional=true "
                          "(each direction gets half)")
    if not 0 <= m.dropout < 1:
        raise ConfigError(f"model.dropout={m.dropout} must be in [0, 1)")
    a = m.attention
    check_choices("model.attention", a, score=SCORES, mode=MODES)
    check_positive("model.attention", a, ("heads",) + (("window",) if a.mode != "global" else ())
                   + (("max_len",) if a.score == "location" else ()))
    if a.heads > 1 and a.score != "scaled_dot":
        raise ConfigError(f"model.attention.heads={a.heads} needs model.attention.score=scaled_dot "
                          f"(multi-head attention is scaled dot-product per head), not {a.score!r}")
    if a.heads > 1 and m.hidden_size % a.heads:
        raise ConfigError(f"model.hidden_size={m.hidden_size} is not divisible by model.attention.heads={a.heads}")


def to_dict(cfg: DictConfig) -> dict:
    """A plain, resolved dict: what checkpoints store."""
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def from_dict(d: dict) -> DictConfig:
    """Rebuild a typed config from a checkpoint's dict, tolerating keys added later."""
    return OmegaConf.merge(OmegaConf.structured(TrainConfig), d)
