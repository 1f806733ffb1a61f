"""BLEU and chrF of a model on held-out sets: ``python -m nmt.evaluate RUN_DIR_OR_CKPT``.

Sets are splits of the training corpus (``--split test``) and/or files (``--src FILE --ref FILE
[--ref FILE ...]``: each ``--src`` starts a set); one table, one row per set, with sacrebleu signatures.
``--by-length`` adds each set's BLEU and chrF per source-length bucket (Luong et al. 2015, Figure 6), ``--plot``
draws them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from nmt.cli import decoding_parser, progress_bar, start_decoding
from nmt.data.corpus import load_corpus
from nmt.data.text import DataError, read_lines
from nmt.metrics import by_length
from nmt.translator import Translator

LENGTH_UNIT = "source sentencepiece pieces"  # what --by-length measures: the pieces the encoder reads
BUCKETS = (5, 10, 15, 20, 30, 40)  # Tatoeba's Chinese lines are short: most have 5-15 pieces


class _AddSet(argparse.Action):
    """--split NAME and --src FILE start a set; --ref FILE adds a reference to the last --src."""

    def __call__(self, parser, namespace, value, option_string=None):
        sets = getattr(namespace, "sets", None) or []
        if option_string == "--ref":
            if not sets or sets[-1]["kind"] != "files":
                parser.error("--ref must follow a --src FILE")
            sets[-1]["refs"].append(value)
        elif option_string == "--split":
            sets.append({"kind": "split", "name": value})
        else:
            sets.append({"kind": "files", "name": value, "refs": []})
        namespace.sets = sets


def _load_set(s: dict, cfg) -> tuple[list[str], list[list[str]]]:
    if s["kind"] == "split":
        split = load_corpus(cfg.data, need=(s["name"],), splits=(s["name"],))[s["name"]]
        return list(split["src"]), [list(split["tgt"])]
    src = read_lines(Path(s["name"]))
    if not src:  # sacrebleu cannot score an empty corpus
        raise DataError(f"--src {s['name']} holds no lines: nothing to score")
    refs = [read_lines(Path(r)) for r in s["refs"]]
    for r, lines in zip(s["refs"], refs):
        if len(lines) != len(src):
            raise DataError(f"{r} has {len(lines)} lines but {s['name']} has {len(src)}")
    return src, refs


def bucket_edges(text: str) -> tuple[int, ...]:
    """``--buckets 10,20,30``: rising positive upper bounds, for buckets 1-10, 11-20, 21-30 and 31+."""
    try:
        edges = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, e.g. 10,20,30, got {text!r}") from None
    if edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise argparse.ArgumentTypeError(f"expected rising positive integers, e.g. 10,20,30, got {text!r}")
    return edges


def _parser() -> argparse.ArgumentParser:
    p = decoding_parser("nmt.evaluate", __doc__,
                        "when a sentence's beam search ends: exact, full (default) or first (see nmt.translate)")
    p.add_argument("--src", action=_AddSet, help="source file of a set, one sentence per line (repeatable)")
    p.add_argument("--ref", action=_AddSet, help="a reference file of the last --src (repeat for several)")
    p.add_argument("--split", action=_AddSet, help="a split of the training corpus, e.g. test (repeatable)")
    p.add_argument("--output", "-o", help="write the hypotheses here (one set), or into this folder (several)")
    p.add_argument("--json", action="store_true", help="print JSON (one object per set) instead of a table")
    p.add_argument("--by-length", action="store_true",
                   help=f"also BLEU and chrF per source-length bucket, the length in {LENGTH_UNIT} (after the "
                        "model's normalization; an empty line is bucket 0)")
    p.add_argument("--buckets", type=bucket_edges, default=BUCKETS, metavar="N,N,...",
                   help="--by-length's upper bounds: 10,20,30 makes 1-10, 11-20, 21-30 and 31+ "
                        f"(default {','.join(map(str, BUCKETS))}); empty buckets are left out")
    p.add_argument("--plot", metavar="FILE", help="draw --by-length's BLEU and chrF, a line per set, as a PNG "
                                                  "(implies --by-length)")
    return p


def _evaluate(translator: Translator, s: dict, args: argparse.Namespace, several: bool) -> dict:
    """Decode and score one set (and write its hypotheses if asked): its JSON row."""
    src, refs = _load_set(s, translator.config)
    t0 = time.perf_counter()
    with progress_bar(len(src), s["name"]) as update:
        scores = translator.evaluate(src, refs, beam=args.beam, alpha=args.alpha, beta=args.beta, stop=args.stop,
                                     progress=update)
    seconds = time.perf_counter() - t0  # decoding and scoring alone: no start-up, loading or reading
    hyps = scores.hypotheses
    figures = {k: v for k, v in dataclasses.asdict(scores).items() if k != "hypotheses"}
    row = {"set": s["name"], "sentences": len(src), "references": len(refs), "beam": args.beam, "alpha": args.alpha,
           "beta": args.beta, "stop": args.stop, "precision": args.precision, **figures,
           "decode_seconds": round(seconds, 3), "sentences_per_s": round(len(src) / seconds, 1)}
    if args.by_length:
        lengths = [len(ids) for ids in translator.tokenizer.encode_src([translator.normalize(t) for t in src])]
        buckets = by_length(hyps, refs, lengths, args.buckets, translator.tgt_lang)
        row["by_length"] = [dataclasses.asdict(b) for b in buckets]
    if args.output:
        out = Path(args.output)
        if several:
            out.mkdir(parents=True, exist_ok=True)
            out = out / (Path(s["name"]).name + ".hyp")
        out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    return row


def _print_table(rows: list[dict]) -> None:
    """One row per set, the signatures, then each set's by-length sub-table if there is one."""
    width = max(len(r["set"]) for r in rows)
    print(f"{'set':<{width}}  {'sents':>6}  {'refs':>4}  {'BLEU':>6}  {'chrF':>6}  {'sent/s':>7}")
    for r in rows:
        print(f"{r['set']:<{width}}  {r['sentences']:>6}  {r['references']:>4}  {r['bleu']:>6.2f}  {r['chrf']:>6.2f}"
              f"  {r['sentences_per_s']:>7.1f}")
    for key, name in (("bleu_signature", "BLEU"), ("chrf_signature", "chrF")):
        for sig in dict.fromkeys(r[key] for r in rows):  # distinct, in order (nrefs may differ)
            which = [r["set"] for r in rows if r[key] == sig]
            print(f"{name}: {sig}" + (f"  ({', '.join(which)})" if len(which) < len(rows) else ""))
    for r in rows:
        if "by_length" in r:
            print(f"\n{r['set']} by length ({LENGTH_UNIT})")
            print(f"{'bucket':<8}  {'sents':>6}  {'BLEU':>6}  {'chrF':>6}")
            for b in r["by_length"]:
                print(f"{b['bucket']:<8}  {b['sentences']:>6}  {b['bleu']:>6.2f}  {b['chrf']:>6.2f}")


def plot_by_length(rows: list[dict], path: Path) -> None:
    """A PNG of BLEU and chrF by source-length bucket, a line per set (as Figure 6 of Luong et al. 2015)."""
    from matplotlib.figure import Figure

    from nmt.plot import save_png

    labels = list(dict.fromkeys(b["bucket"] for r in rows for b in r["by_length"]))  # every set's buckets
    labels.sort(key=lambda b: int(b.split("-")[0].rstrip("+")))
    fig = Figure(figsize=(9, 3.6), dpi=100)
    for i, metric in enumerate(("bleu", "chrf")):
        ax = fig.add_subplot(1, 2, i + 1)
        for r in rows:
            points = [(labels.index(b["bucket"]), b[metric]) for b in r["by_length"]]
            ax.plot(*zip(*points), "o-", label=f"{Path(r['set']).name} ({r['sentences']})")
        ax.set_xticks(range(len(labels)), labels)
        ax.set(xlabel=f"length ({LENGTH_UNIT})", ylabel="BLEU" if metric == "bleu" else "chrF")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_png(fig, path)


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    sets = getattr(args, "sets", None) or []
    args.by_length = args.by_length or bool(args.plot)
    if args.beam < 1:
        p.error(f"--beam must be >= 1, got {args.beam}")
    if not sets:
        p.error("give --src FILE --ref FILE and/or --split NAME")
    for s in sets:
        if s["kind"] == "files" and not s["refs"]:
            p.error(f"--src {s['name']} needs at least one --ref FILE")
    try:
        translator = start_decoding(args)
        rows = [_evaluate(translator, s, args, len(sets) > 1) for s in sets]
        if args.plot:
            plot_by_length(rows, Path(args.plot))
    except (OSError, ValueError) as e:  # ValueError: also CheckpointError, ConfigError, DataError
        print(f"nmt.evaluate: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows[0]) if len(rows) == 1 else json.dumps(rows))
    else:
        _print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
