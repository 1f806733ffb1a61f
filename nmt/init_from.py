"""``trainer.init_from``: a new run that starts from a trained model (fine-tuning, domain adaptation).

The weights and the sentencepiece models come from the checkpoint, and with them the model and tokenizer
settings (the weights were trained for them); the optimizer, the schedule, the counters and the budget start
fresh, on whatever corpus the new config names. New characters go through the kept vocabulary (byte fallback
where the model has it, else <unk>). ``trainer.resume`` of the new run continues the new run, not the old one.
"""

from __future__ import annotations

import logging
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from nmt import checkpoint
from nmt.config import to_dict
from nmt.run_folder import flatten

log = logging.getLogger(__name__)


def start_state(tr: DictConfig) -> Optional[dict]:
    """The checkpoint ``trainer.init_from`` names (a run folder: its best.pt), or None."""
    if not tr.init_from:
        return None
    path = checkpoint.resolve(tr.init_from)
    state = checkpoint.load(path)
    log.info("init_from: the weights and sentencepiece models of %s (step %s); a fresh optimizer, schedule and budget",
             path, state.get("step", "?"))
    return state


def adopt(cfg: DictConfig, state: dict) -> DictConfig:
    """``cfg`` with the checkpoint's model and tokenizer settings; each one the new config set otherwise is warned."""
    old, new = flatten(state["config"]), flatten(to_dict(cfg))
    for key in sorted(k for k in set(old) | set(new) if k.split(".")[0] in ("model", "tokenizer")):
        if old.get(key) != new.get(key):
            log.warning("init_from: %s=%r is ignored: the checkpoint's %r is kept (its weights were trained with it)",
                        key, new.get(key), old.get(key))
    return OmegaConf.merge(cfg, {k: state["config"][k] for k in ("model", "tokenizer")})  # type: ignore[return-value]
