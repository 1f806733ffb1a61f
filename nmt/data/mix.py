"""Several training corpora as one, sampled by weight (``data.mix``), through ``datasets.interleave_datasets``.

The corpus that ``data`` names gives dev and test and weighs ``data.weight``; each ``data.mix`` entry is a dict of
the data settings that differ for one more training corpus (``source``, ``dir``, ``name``, ``opencc``, ...) and its
``weight``. Each corpus is read and cleaned with its own settings; an entry's pairs that share a sentence with the
run's dev or test split are dropped; then the cleaned train splits are interleaved with probabilities proportional
to the weights (seeded by ``data.seed``) until every corpus has been drawn whole once
(``data.mix_stop=all_exhausted``: the corpora that weigh more than their size are repeated) or until the first runs out
(``first_exhausted``: for a large corpus with a small weight). The mixed split is prepared and cached once, like a
single corpus.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Optional

import datasets
import numpy as np
from omegaconf import OmegaConf

from nmt.config import ConfigError, DataConfig, check_choices

log = logging.getLogger(__name__)

STOPS = ("all_exhausted", "first_exhausted")
# per-corpus settings a mix entry may not change: the pair's languages, and what belongs to the whole run
FIXED = ("src_lang", "tgt_lang", "mix", "mix_stop", "weight", "extra_dev", "num_proc", "cache", "max_tokens")


def entry_config(data: DataConfig, i: int) -> tuple[DataConfig, float]:
    """``data.mix[i]`` as a whole DataConfig (this corpus's settings with the entry's on top) and its weight."""
    entry = dict(data.mix[i])
    weight = float(entry.pop("weight", 1.0))
    base = OmegaConf.to_container(data) if OmegaConf.is_config(data) else dict(vars(data))
    base = {k: v for k, v in base.items() if k not in ("mix", "extra_dev")}
    per_source = dict.fromkeys(("dir", "name", "config", "revision", "data_dir"))  # not inherited from this corpus
    cfg = OmegaConf.merge(OmegaConf.structured(DataConfig), base, per_source, entry)
    return cfg, weight  # type: ignore[return-value]


def drop_held_out(train: datasets.Dataset, held: list[datasets.Dataset], name: str,
                  report: Optional[dict] = None) -> datasets.Dataset:
    """A mixed-in corpus's cleaned train split without the pairs that share a source or a target sentence with this
    run's dev or test split: another corpus must not carry held-out sentences into training (HSK's train split
    has 3 such pairs against the packaged Tatoeba corpus). The count goes to ``report[name]["held_out"]``."""
    src, tgt = ({x for d in held for x in d[side]} for side in ("src", "tgt"))
    seen = np.fromiter((s in src or t in tgt for b in train.iter(batch_size=10_000) for s, t in zip(b["src"], b["tgt"])),
                       dtype=bool, count=len(train))  # (pairs,)
    dropped = int(seen.sum())
    if dropped:
        train = train.select(np.flatnonzero(~seen))
    log.info("%s: %d pairs share a sentence with dev or test, dropped", name, dropped)
    if report is not None and name in report:
        report[name].update(held_out=dropped, kept=len(train))
    return train


def mix_train(trains: list[datasets.Dataset], weights: list[float], data: DataConfig) -> datasets.Dataset:
    """The cleaned train splits (this corpus's, then each mix entry's), interleaved by their weights."""
    parts = [d.select_columns(["src", "tgt"]) for d in trains]
    total = sum(weights)
    return datasets.interleave_datasets(parts, probabilities=[w / total for w in weights], seed=data.seed,
                                        stopping_strategy=data.mix_stop)


def check_mix(data: DataConfig, check_one: Callable[[DataConfig], None]) -> None:
    """Refuse a mix that cannot work, naming the entry and key; ``check_one`` checks a whole data config."""
    check_choices("data", data, mix_stop=STOPS)
    for i in range(len(data.mix)):
        if why := check_entry(data, i, set(DataConfig.__dataclass_fields__)):
            raise ConfigError(why)
        try:
            check_one(entry_config(data, i)[0])
        except ConfigError as e:
            raise ConfigError(f"data.mix[{i}]: {e}") from None


def check_entry(data: DataConfig, i: int, fields: set[str]) -> Optional[str]:
    """Why ``data.mix[i]`` cannot work, naming the key, or None."""
    entry = data.mix[i]
    if not hasattr(entry, "keys"):
        return f"data.mix[{i}]={entry!r}: each entry is a dict such as {{source: files, dir: my_corpus, weight: 2}}"
    for key in entry.keys():
        if key != "weight" and (key not in fields or key in FIXED):
            why = "a setting of the whole run" if key in FIXED else "no such data setting"
            return f"data.mix[{i}].{key}: {why} (an entry sets source, dir, name, config, opencc, ... and weight)"
    try:
        weight = float(entry.get("weight", 1.0))
    except (TypeError, ValueError):
        return f"data.mix[{i}].weight={entry.get('weight')!r} must be a number > 0"
    if weight <= 0:
        return f"data.mix[{i}].weight={weight} must be > 0"
    return None
