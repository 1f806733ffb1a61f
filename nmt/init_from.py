"""``trainer.init_from``: a new run that starts from a trained model (fine-tuning, domain adaptation).

The weights and the sentencepiece models come from the checkpoint, and with them the model and tokenizer
settings (the weights were trained for them); the optimizer, the schedule, the counters and the budget start
fresh, on whatever corpus the new config names. New characters go through the kept vocabulary (byte fallback
where the model has it, else <unk>). ``trainer.resume`` of the new run continues the new run, not the old one.
"""

from __future__ import annotations

import logging
from typing import Optional

from omegaconf import DictConfig

from nmt import checkpoint
from nmt.run_folder import merge_resumed_config

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
    return merge_resumed_config(cfg, state, who="init_from", others=False)
