"""Translate raw text with a trained model: ``python -m nmt.translate RUN_DIR_OR_CKPT [CKPT ...]``.

Lines come from arguments, ``--input FILE`` or stdin (line by line at a terminal); translations go to
stdout (or ``--output``), one line out per line in, in order; logs go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

from nmt.cli import decoding_parser, progress_bar, start_decoding
from nmt.data.text import read_lines
from nmt.decode import hard_alignment
from nmt.plot import PlotError, attention_figure, find_cjk_font, save_png
from nmt.translator import Translation


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
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        yield text.removesuffix("\n").split("\n") if text else []


def _write(out: TextIO, args: argparse.Namespace, line_no: int, t: Translation) -> None:
    """One input line's output: the translation, or the n-best list, or the translation and its alignment."""
    source = f"{t.source}\t" if args.with_source else ""
    if args.n_best > 1:
        out.writelines(f"{line_no} ||| {source}{h.text} ||| {h.score:.4f}\n" for h in t.nbest)
    else:
        alignment = f" ||| {hard_alignment(t.attention.weights)}" if args.print_attention and t.attention else ""
        out.write(f"{source}{t.text}{alignment}\n")


def _parser() -> argparse.ArgumentParser:
    p = decoding_parser("nmt.translate", __doc__, "when a sentence's beam search ends: exact (no live hypothesis can win), "
                        "full (beam hypotheses finished, default) or first (the best candidate finished, as OpenNMT-py)")
    p.add_argument("text", nargs="*", help="sentences to translate (default: --input or stdin)")
    p.add_argument("--input", "-i", help="file with one source sentence per line")
    p.add_argument("--output", "-o", help="write translations here instead of stdout")
    p.add_argument("--n-best", type=int, default=1, help="print the K best as 'line ||| translation ||| score'")
    p.add_argument("--batch-size", type=int, default=1000, help="at most this many sentences per batch")
    p.add_argument("--batch-tokens", type=int, default=8000, help="at most this many source tokens × beam per batch")
    p.add_argument("--print-attention", action="store_true",
                   help="append ' ||| i-j ...' (target piece j attends most to source piece i) to each line")
    p.add_argument("--with-source", action="store_true", help="print each translation after its source and a tab")
    p.add_argument("--plot-attention", metavar="DIR", help="write an attention heatmap per sentence into DIR")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_intermixed_args(argv)  # sentences may follow the options
    if args.beam < 1:
        p.error(f"--beam must be >= 1, got {args.beam}")
    if not 1 <= args.n_best <= args.beam:
        p.error(f"--n-best must be between 1 and --beam ({args.beam}), got {args.n_best}")
    try:
        translator = start_decoding(args)
        window = translator.config.model.attention.window
        if args.plot_attention:
            find_cjk_font()  # fail before translating anything
            Path(args.plot_attention).mkdir(parents=True, exist_ok=True)
        line_no = 0
        with open(args.output, "w", encoding="utf-8") if args.output else sys.stdout as out:
            for chunk in _lines(args):
                with progress_bar(len(chunk), "translating") as update:  # an empty translation has its </s> row
                    results = translator.translate(chunk, beam=args.beam, n_best=args.n_best, alpha=args.alpha,
                                                   beta=args.beta, stop=args.stop, batch_tokens=args.batch_tokens,
                                                   batch_sentences=args.batch_size, progress=update,
                                                   attention=bool(args.print_attention or args.plot_attention))
                for t in results:
                    _write(out, args, line_no, t)
                    if args.plot_attention:
                        a = t.attention
                        fig = attention_figure(a.weights, a.src_pieces, a.tgt_pieces, a.centres, window,
                                               title=f"{line_no}: {t.source[:60]}")
                        save_png(fig, Path(args.plot_attention) / f"{line_no:06d}.png")
                    line_no += 1
                out.flush()
    except (PlotError, OSError, ValueError) as e:  # ValueError: also CheckpointError, ConfigError, DataError
        print(f"nmt.translate: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
