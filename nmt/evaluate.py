"""BLEU and chrF of a model on held-out text: ``python -m nmt.evaluate RUN_DIR_OR_CKPT``.

Either ``--src FILE --ref FILE [--ref FILE ...]`` or ``--split NAME`` (a split of the corpus
the model was trained on, e.g. ``test``). Training calls ``evaluate`` for its dev scores, so
validation and test decoding cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Callable, Sequence

import torch

from nmt.checkpoint import CheckpointError, load_model
from nmt.data import DataError, load_corpus, read_lines, src_normalizer
from nmt.device import pick_device, set_threads
from nmt.metrics import Scores, score
from nmt.model import Seq2Seq
from nmt.tokenizer import Tokenizer
from nmt.translate import translate_texts

log = logging.getLogger("nmt.evaluate")


def evaluate(
    model: Seq2Seq,
    tok: Tokenizer,
    normalize: Callable[[str], str],
    src: Sequence[str],
    refs: Sequence[Sequence[str]],
    tgt_lang: str = "en",
    beam: int = 1,
    alpha: float = 1.0,
    device: torch.device = torch.device("cpu"),
) -> tuple[Scores, list[str]]:
    """Translate ``src`` and score it against one or more reference streams."""
    hyps = translate_texts(model, tok, normalize, src, beam=beam, alpha=alpha, device=device)
    return score(hyps, refs, tgt_lang), hyps


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory (uses checkpoints/best.pt) or checkpoint file")
    p.add_argument("--src", help="source file, one sentence per line")
    p.add_argument("--ref", action="append", default=[], help="reference file (repeat for several)")
    p.add_argument("--split", help="a split of the training corpus instead of files, e.g. test")
    p.add_argument("--beam", type=int, default=5, help="beam size; 1 = greedy (default 5)")
    p.add_argument("--alpha", type=float, default=1.0, help="GNMT length penalty α (default 1.0)")
    p.add_argument("--output", "-o", help="also write the hypotheses to this file")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if args.beam < 1:
        p.error(f"--beam must be >= 1, got {args.beam}")
    if bool(args.src) == bool(args.split):
        p.error("give either --src FILE --ref FILE or --split NAME")
    if args.src and not args.ref:
        p.error("--src needs at least one --ref FILE")
    try:
        set_threads(0)
        device = pick_device(args.device)
        model, tok, cfg, _ = load_model(args.model, device)
        if args.split:
            corpus = load_corpus(cfg.data, need=(args.split,))
            src, refs, name = list(corpus[args.split]["src"]), [list(corpus[args.split]["tgt"])], args.split
        else:
            src = read_lines(Path(args.src))
            refs = [read_lines(Path(r)) for r in args.ref]
            for r, lines in zip(args.ref, refs):
                if len(lines) != len(src):
                    raise DataError(f"{r} has {len(lines)} lines but {args.src} has {len(src)}")
            name = args.src
        scores, hyps = evaluate(
            model, tok, src_normalizer(cfg.data), src, refs, cfg.data.tgt_lang, args.beam, args.alpha, device
        )
    except (CheckpointError, DataError, OSError, ValueError) as e:
        print(f"nmt.evaluate: error: {e}", file=sys.stderr)
        return 1
    if args.output:
        Path(args.output).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    result = {"set": name, "sentences": len(src), "beam": args.beam, **scores.as_dict()}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{name}: BLEU {scores.bleu:.2f}  chrF {scores.chrf:.2f}  ({len(src)} sentences, beam {args.beam})")
        print(f"  {scores.bleu_signature}")
        print(f"  {scores.chrf_signature}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
