"""Translate raw text with a trained model: ``python -m nmt.translate RUN_DIR_OR_CKPT``.

Lines come from arguments, ``--input FILE`` or stdin; translations go to stdout (or
``--output``), one line out per line in, in order; logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Callable, Iterable, Sequence

import torch

from nmt.batching import inference_batches
from nmt.checkpoint import CheckpointError, load_model
from nmt.data import DataError, read_lines, src_normalizer
from nmt.device import pick_device, set_threads
from nmt.model import Seq2Seq
from nmt.search import beam_search
from nmt.tokenizer import Tokenizer

log = logging.getLogger("nmt.translate")

MAX_SRC_PIECES = 250  # longer inputs are cut: bounds time and memory per line


def translate_texts(
    model: Seq2Seq,
    tok: Tokenizer,
    normalize: Callable[[str], str],
    texts: Sequence[str],
    beam: int = 5,
    alpha: float = 1.0,
    batch_tokens: int = 4000,
    device: torch.device = torch.device("cpu"),
) -> list[str]:
    """Translate raw source lines; empty (after normalization) lines give empty output."""
    norm = [normalize(t) for t in texts]
    ids = [s[:MAX_SRC_PIECES] for s in tok.encode_src(norm)]
    out = [""] * len(texts)
    todo = [i for i, s in enumerate(ids) if s]
    if not todo:
        return out
    was_training = model.training
    model.eval()
    for batch in inference_batches([ids[i] for i in todo], max(batch_tokens // beam, MAX_SRC_PIECES)):
        hyps = beam_search(model, batch.to(device), beam=beam, alpha=alpha)
        for row, toks in zip(batch.index.tolist(), hyps.tokens):
            out[todo[row]] = tok.decode_tgt(toks)
    model.train(was_training)
    return out


def _lines(args: argparse.Namespace) -> Iterable[list[str]]:
    """Chunks of input lines: all at once from files/arguments, line by line at a terminal."""
    if args.text:
        yield list(args.text)
    elif args.input:
        yield read_lines(Path(args.input))
    elif sys.stdin.isatty():
        print("Type a sentence and press Enter (Ctrl-D to quit).", file=sys.stderr)
        for line in sys.stdin:
            yield [line.rstrip("\n")]
    else:
        data = sys.stdin.buffer.read()
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        yield lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt.translate", description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory (uses checkpoints/best.pt) or checkpoint file")
    p.add_argument("text", nargs="*", help="sentences to translate (default: --input or stdin)")
    p.add_argument("--input", "-i", help="file with one source sentence per line")
    p.add_argument("--output", "-o", help="write translations here instead of stdout")
    p.add_argument("--beam", type=int, default=5, help="beam size; 1 = greedy (default 5)")
    p.add_argument("--alpha", type=float, default=1.0, help="GNMT length penalty α (default 1.0)")
    p.add_argument("--batch-tokens", type=int, default=4000, help="source tokens × beam per batch")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if args.beam < 1:
        p.error(f"--beam must be >= 1, got {args.beam}")
    try:
        set_threads(0)
        device = pick_device(args.device)
        model, tok, cfg, _ = load_model(args.model, device)
        normalize = src_normalizer(cfg.data)
        out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
        with out:
            for chunk in _lines(args):
                for line in translate_texts(model, tok, normalize, chunk, args.beam, args.alpha, args.batch_tokens, device):
                    out.write(line + "\n")
                out.flush()
    except (CheckpointError, DataError, OSError, ValueError) as e:
        print(f"nmt.translate: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
