"""What a configuration's types cannot express, checked at start-up before any data is loaded: a value that
cannot work is a ``ConfigError`` naming its key (the schema itself: nmt/config.py)."""

from __future__ import annotations

from dataclasses import is_dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from nmt.config import ConfigError, DataConfig, TrainConfig, TrainerConfig, check_choices, check_positive, validate_model
from nmt.data.mix import check_mix


def unknown_keys(cfg: DictConfig, schema: DictConfig, prefix: str = "") -> list[str]:
    """Dotted keys of ``cfg`` that the typed ``schema`` lacks (Hydra's ``+key=value`` adds them past its struct flag)."""
    unknown = []
    for key in cfg.keys():
        if key not in schema:
            unknown.append(f"{prefix}{key}")
        elif is_dataclass(OmegaConf.get_type(schema, key)):
            unknown += unknown_keys(cfg[key], schema[key], f"{prefix}{key}.")
    return unknown


def validate(cfg: DictConfig | TrainConfig) -> None:
    """Reject values that would fail later: run before any data is loaded."""
    if isinstance(cfg, DictConfig) and (unknown := unknown_keys(cfg, OmegaConf.structured(TrainConfig))):
        raise ConfigError(f"{', '.join(unknown)}: no such setting (check the spelling; see nmt/config.py)")
    _validate_data(cfg.data)
    check_choices("tokenizer", cfg.tokenizer, model_type=("unigram", "bpe", "char", "word"))
    check_positive("tokenizer", cfg.tokenizer, ("src_vocab_size", "tgt_vocab_size"), ("sample_alpha",))
    if cfg.tokenizer.sample_alpha and cfg.tokenizer.model_type not in ("unigram", "bpe"):
        raise ConfigError(f"tokenizer.sample_alpha={cfg.tokenizer.sample_alpha}: sentencepiece samples unigram and bpe "
                          f"segmentations only, not tokenizer.model_type={cfg.tokenizer.model_type}")
    if cfg.tokenizer.model_type == "bpe" and cfg.tokenizer.sample_alpha >= 1:
        raise ConfigError(f"tokenizer.sample_alpha={cfg.tokenizer.sample_alpha}: with bpe it is a dropout probability, "
                          "in [0, 1)")
    for key in ("src_model", "tgt_model"):
        if (path := getattr(cfg.tokenizer, key)) and not Path(path).expanduser().is_file():
            raise ConfigError(f"tokenizer.{key}={path}: no such file")
    if cfg.tokenizer.tgt_model and cfg.tokenizer.joint:
        raise ConfigError("tokenizer.tgt_model with tokenizer.joint=true: a joint vocabulary is one model, "
                          "tokenizer.src_model")
    validate_model(cfg.model)
    if cfg.model.tie_embeddings == "all" and not cfg.tokenizer.joint:
        raise ConfigError("model.tie_embeddings=all shares the source and target embeddings: it needs one vocabulary, "
                          "tokenizer.joint=true (or model.tie_embeddings=decoder)")
    _validate_trainer(cfg.trainer)


def _validate_data(d: DataConfig) -> None:
    check_choices("data", d, source=("tatoeba", "hsk", "files", "hub"), format=("text", "tsv"))
    for i, prefix in enumerate(d.extra_dev):
        for lang in (d.src_lang, d.tgt_lang):
            if not Path(f"{prefix}.{lang}").expanduser().is_file():
                raise ConfigError(f"data.extra_dev[{i}]={prefix}: {prefix}.{lang} not found (a dev set is PREFIX.{d.src_lang} "
                                  f"and PREFIX.{d.tgt_lang})")
    if d.source == "files" and not d.dir:
        raise ConfigError("data.source=files needs data.dir=/path/to/folder")
    if d.source == "hub" and not d.name:
        raise ConfigError("data.source=hub needs data.name (a hub dataset or a local path)")
    if d.opencc is not None:
        check_choices("data", d, opencc=("t2s", "tw2s", "hk2s", "s2t"))
    if d.tsv_columns is not None and sorted(d.tsv_columns) != sorted([d.src_lang, d.tgt_lang]):
        raise ConfigError(f"data.tsv_columns={list(d.tsv_columns)} must name {d.src_lang} and {d.tgt_lang} once each")
    check_positive("data", d, ("max_chars", "max_tokens", "weight"), ("max_ratio", "num_proc", "dev_size", "test_size"))
    if d.mix:  # each entry is a whole data config, checked as this one is
        check_mix(d, _validate_data)


def _validate_trainer(tr: TrainerConfig) -> None:
    dev = str(tr.device)
    if dev not in ("auto", "cpu", "cuda", "mps") and not dev.startswith("cuda:"):
        raise ConfigError(f"trainer.device={dev!r} is not valid; choose auto, cpu, cuda, cuda:N or mps")
    check_choices("trainer", tr, precision=("auto", "fp32", "bf16", "fp16", "bf16_output"), optimizer=("adam", "adamw", "sgd"),
                  engine=("fast", "plain"),
                  schedule=("constant", "halving", "plateau", "inverse_sqrt", "linear", "cosine"),
                  early_stopping_metric=("bleu", "loss"))
    if not 0 < tr.decay_factor <= 1:
        raise ConfigError(f"trainer.decay_factor={tr.decay_factor} must be in (0, 1]")
    check_positive("trainer", tr, ("batch_tokens", "lr", "log_every", "valid_every", "valid_beam", "accum_steps",
                                   "keep_best", "plateau_patience", "max_nonfinite"),
                   ("max_steps", "max_epochs", "max_minutes", "clip_norm", "test_beam", "threads", "keep_last", "save_every",
                    "warmup_steps", "batch_sentences", "attention_images", "weight_decay", "early_stopping_patience",
                    "halve_after_epoch"))
    if not (tr.max_steps or tr.max_epochs or tr.max_minutes):  # a run must be able to stop
        raise ConfigError("set at least one of trainer.max_steps, trainer.max_epochs, trainer.max_minutes (all are 0), "
                          "or train a recipe: +experiment=zh_en_local_p")
    for key in ("label_smoothing", "src_word_dropout", "tgt_word_dropout"):
        if not 0 <= tr[key] < 1:
            raise ConfigError(f"trainer.{key}={tr[key]} must be in [0, 1)")
