"""Eole 0.6.4's own training loop for a few updates, its batches and weights written out (run by compare_train_step.py).

    EOLE_PYTHON scripts/eole_train_steps.py CFG_YAML OUT_DIR --steps 100 [--init INIT.safetensors] [--dropout P]
    EOLE_PYTHON scripts/eole_train_steps.py CFG_YAML OUT_DIR --census
    EOLE_PYTHON scripts/eole_train_steps.py CFG_YAML OUT_DIR --steps 8400 --batches-only [--keep-duplicates]

Runs in Eole's venv, from the harness folder (the config's paths are relative to it). The config is the harness's
budget config (work/eole/cfg_budget.yaml) with dropout 0 (no random masks: both sides must be deterministic; --dropout
gives another rate), ``train_steps`` STEPS and nothing saved. The model is built, initialized and trained by Eole's own code
(``for_training``, ``Optimizer.from_config``, ``build_trainer``, ``build_dynamic_dataset_iter``, ``Trainer.train``);
INIT, when given, replaces the initial weights. Writes to OUT_DIR: init.safetensors (the weights before the first
update), final.safetensors (after the last), batches.pt (each update's src, srclen and tgt as Eole's iterator
yielded them) and losses.json (each update's summed cross-entropy and Eole's loss divisor).

``--census``: one update with the config's own dropout, and census.json: each dropout module that acted (name, rate,
calls, elements) and each ``nn.LSTM`` with its inter-layer dropout (applied inside torch, so counted by shape).

``--batches-only``: no model; the first STEPS batches of Eole's training iterator (batches.pt, int32) and its
vocabularies (vocab.json: the tokens in id order), for ablate_gap.py's ``eole_stream``. ``--keep-duplicates``: its
batch_iter keeps a pair whose source the batch already holds (as ablate_gap.py's eole_keep_duplicates runs).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import yaml


def census(model: torch.nn.Module) -> tuple[dict[str, dict], list[dict]]:
    """Forward hooks that count what each dropout module with a rate above 0 drops from (filled as the model runs);
    the LSTMs' own dropout. Plain torch: compare_train_step.py counts our model's with it too."""
    acted: dict[str, dict] = {}

    def hook(name):
        def count(module, inputs, output):
            if module.training and module.p > 0:
                row = acted.setdefault(name, {"module": name, "p": module.p, "calls": 0, "elements": 0})
                row["calls"] += 1
                row["elements"] += inputs[0].numel()
        return count

    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Dropout):
            m.register_forward_hook(hook(name))
    lstms = [{"module": name, "dropout": m.dropout, "num_layers": m.num_layers, "bidirectional": m.bidirectional}
             for name, m in model.named_modules() if isinstance(m, torch.nn.LSTM)]
    return acted, lstms


def stream(cfg_yaml: str, out: str, steps: int, keep_duplicates: bool) -> None:
    """The first ``steps`` batches Eole's training iterator yields, and its vocabularies (see --batches-only)."""
    import eole.inputters.dynamic_iterator as di
    from eole.config.run import TrainConfig
    from eole.constants import CorpusTask
    from eole.inputters.dynamic_iterator import build_dynamic_dataset_iter
    from eole.inputters.inputter import vocabs_to_dict
    from eole.train_single import TrainingInitializer, configure_process

    if keep_duplicates:
        di.DynamicDatasetIter._should_deduplicate = lambda self, src_text, seen: True
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = TrainConfig(**yaml.safe_load(Path(cfg_yaml).read_text()))
    configure_process(config, -1)
    context = TrainingInitializer(config).initialize()
    it = build_dynamic_dataset_iter(context.config, context.transforms, context.vocabs, task=CorpusTask.TRAIN,
                                    stride=1, offset=0, device_id=-1)
    batches = []
    for batch, _ in it:
        batches.append({k: batch[k].to(torch.int32) for k in ("src", "srclen", "tgt")})
        if len(batches) == steps:
            break
    torch.save(batches, out_dir / "batches.pt")
    vocab = vocabs_to_dict(context.vocabs)
    (out_dir / "vocab.json").write_text(json.dumps({"src": vocab["src"], "tgt": vocab["tgt"]}, ensure_ascii=False))


def main(cfg_yaml: str, out: str, steps: int, init: str = "", count_dropout: bool = False, dropout: float = 0.0) -> None:
    """Eole's own training of ``steps`` updates (see the module's docstring). Eole is imported here: this module's
    census() also serves our venv, which has no Eole."""
    from eole.config.run import TrainConfig
    from eole.constants import CorpusTask
    from eole.inputters.dynamic_iterator import build_dynamic_dataset_iter
    from eole.models.model import get_model_class
    from eole.train_single import TrainingInitializer, configure_process
    from eole.trainer import build_trainer
    from eole.utils.optimizers import Optimizer
    from safetensors.torch import load_file, save_file

    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    d = yaml.safe_load(Path(cfg_yaml).read_text())
    if not count_dropout:
        d["training"]["dropout"] = [dropout]
    d["training"].update(train_steps=steps, model_path=str(out_dir / "model"), valid_steps=10**9,
                         save_checkpoint_steps=10**9)
    config = TrainConfig(**d)
    configure_process(config, -1)
    context = TrainingInitializer(config).initialize()
    model = get_model_class(context.config.model).for_training(context.config.model, context.vocabs,
                                                               context.config.training, metadata=context.metadata,
                                                               device_id=-1)
    if init:
        model.load_state_dict(load_file(init), strict=True)
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}, str(out_dir / "init.safetensors"))
    optim = Optimizer.from_config(model, context.config, metadata=context.metadata)
    trainer = build_trainer(context.config, -1, model, context.vocabs, optim, model_saver=None)
    acted, lstms = census(model) if count_dropout else ({}, [])
    batches: list[dict] = []
    losses: list[dict] = []
    compute = trainer.batch_processor._compute_loss  # wrapped to record what Eole's own step computes

    def recorded_loss(src, tgt, src_len, batch, normalization, accum_count, kwargs):
        loss, stats = compute(src, tgt, src_len, batch, normalization, accum_count, kwargs)
        losses.append({"loss_sum": float(loss.detach()) * normalization, "divisor": int(normalization),
                       "terms": int(stats.n_tokens), "stats_loss": float(stats.loss)})
        return loss, stats

    trainer.batch_processor._compute_loss = recorded_loss
    it = build_dynamic_dataset_iter(context.config, context.transforms, context.vocabs, task=CorpusTask.TRAIN,
                                    stride=1, offset=0, device_id=-1)

    def recording():
        for batch, bucket in it:
            batches.append({k: batch[k].clone() for k in ("src", "srclen", "tgt")})
            yield batch, bucket

    trainer.train(recording(), steps, save_checkpoint_steps=0, valid_iter=None)
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}, str(out_dir / "final.safetensors"))
    torch.save(batches[: len(losses)], out_dir / "batches.pt")
    (out_dir / "losses.json").write_text(json.dumps(losses))
    if count_dropout:
        (out_dir / "census.json").write_text(json.dumps({"dropout": list(acted.values()), "lstm": lstms}))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cfg_yaml")
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--init", default="", help="initial weights (safetensors, Eole's names) instead of Eole's own")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--census", action="store_true", help="one update at the config's dropout, counting the masks")
    p.add_argument("--batches-only", action="store_true", help="no training: the iterator's first --steps batches")
    p.add_argument("--keep-duplicates", action="store_true", help="with --batches-only: nothing skipped")
    a = p.parse_args()
    if a.batches_only:
        stream(a.cfg_yaml, a.out, a.steps, a.keep_duplicates)
    else:
        main(a.cfg_yaml, a.out, 1 if a.census else a.steps, a.init, a.census, a.dropout)
