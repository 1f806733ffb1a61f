"""What the decoding commands (``nmt.translate``, ``nmt.evaluate``) share: their common options, their start
(UTF-8 stdout, logs on stderr, threads, device, the Translator) and a progress bar."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Optional

from nmt.device import PRECISION_HELP, PRECISIONS, set_threads, warn_slow_bf16
from nmt.search import STOPS
from nmt.translator import Translator


@contextlib.contextmanager
def progress_bar(total: int, desc: str) -> Iterator[Optional[Callable[[int], None]]]:
    """``update(n)`` of a progress bar on stderr for more than one line, when stderr is a terminal; else None."""
    if total <= 1 or not sys.stderr.isatty():
        yield None
        return
    from datasets.utils.tqdm import tqdm

    with tqdm(total=total, unit=" lines", desc=desc, file=sys.stderr, leave=False) as bar:
        yield bar.update


BETA_MAX = 1.0  # the GNMT coverage penalty's β: 0 (off) to 1 (Wu et al. 2016 tuned it in [0, 1]); the server's bound too


def coverage_beta(text: str) -> float:
    """``--beta``'s value: a number in [0, BETA_MAX] (a negative β would reward leaving source words unread, and
    ``--stop exact`` relies on the penalty being ≤ 0)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and {BETA_MAX:g}, got {text!r}") from None
    if not 0.0 <= value <= BETA_MAX:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and {BETA_MAX:g}, got {text!r}")
    return value


def decoding_parser(prog: str, doc: str, stop_help: str) -> argparse.ArgumentParser:
    """The parser of nmt.translate or nmt.evaluate with the options they share."""
    p = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    p.add_argument("model", help="run directory (uses checkpoints/best.pt) or checkpoint file")
    p.add_argument("--ensemble", nargs="+", default=[], metavar="CKPT", help="more checkpoints to ensemble with")
    p.add_argument("--beam", type=int, default=5, help="beam size; 1 = greedy (default 5)")
    p.add_argument("--alpha", type=float, default=1.0, help="GNMT length penalty α (default 1.0)")
    p.add_argument("--beta", type=coverage_beta, default=0.0,
                   help=f"GNMT coverage penalty β, 0 to {BETA_MAX:g} (default 0: off)")
    p.add_argument("--stop", choices=STOPS, default="full", help=stop_help)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help=PRECISION_HELP)
    return p


def start_decoding(args: argparse.Namespace) -> Translator:
    """A decoding command's start (UTF-8 stdout, logs on stderr, threads, device) and its Translator (the model and
    ``--ensemble`` checkpoints, ``--device``, ``--precision``)."""
    sys.stdout.reconfigure(encoding="utf-8", errors="replace")  # type: ignore[union-attr]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    set_threads(0)
    translator = Translator.load([args.model, *args.ensemble], args.device, args.precision)
    warn_slow_bf16(translator.device, args.precision)
    return translator
