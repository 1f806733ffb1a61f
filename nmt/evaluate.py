"""BLEU and chrF of a model on held-out sets: ``python -m nmt.evaluate RUN_DIR_OR_CKPT``.

Sets are splits of the training corpus (``--split test``) and/or files (``--src FILE --ref FILE
[--ref FILE ...]``: each ``--src`` starts a set); one table, one row per set, with sacrebleu signatures.
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


def _parser() -> argparse.ArgumentParser:
    p = decoding_parser("nmt.evaluate", __doc__,
                        "when a sentence's beam search ends: exact, full (default) or first (see nmt.translate)")
    p.add_argument("--src", action=_AddSet, help="source file of a set, one sentence per line (repeatable)")
    p.add_argument("--ref", action=_AddSet, help="a reference file of the last --src (repeat for several)")
    p.add_argument("--split", action=_AddSet, help="a split of the training corpus, e.g. test (repeatable)")
    p.add_argument("--output", "-o", help="write the hypotheses here (one set), or into this folder (several)")
    p.add_argument("--json", action="store_true", help="print JSON (one object per set) instead of a table")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    sets = getattr(args, "sets", None) or []
    if args.beam < 1:
        p.error(f"--beam must be >= 1, got {args.beam}")
    if not sets:
        p.error("give --src FILE --ref FILE and/or --split NAME")
    for s in sets:
        if s["kind"] == "files" and not s["refs"]:
            p.error(f"--src {s['name']} needs at least one --ref FILE")
    rows = []
    try:
        translator = start_decoding(args)
        for s in sets:
            src, refs = _load_set(s, translator.config)
            t0 = time.perf_counter()
            with progress_bar(len(src), s["name"]) as update:
                scores = translator.evaluate(src, refs, beam=args.beam, alpha=args.alpha, stop=args.stop, progress=update)
            seconds = time.perf_counter() - t0  # decoding and scoring alone: no start-up, loading or reading
            hyps = scores.hypotheses
            figures = {k: v for k, v in dataclasses.asdict(scores).items() if k != "hypotheses"}
            rows.append({"set": s["name"], "sentences": len(src), "references": len(refs), "beam": args.beam,
                         "stop": args.stop, "precision": args.precision, **figures,
                         "decode_seconds": round(seconds, 3), "sentences_per_s": round(len(src) / seconds, 1)})
            if args.output:
                out = Path(args.output)
                if len(sets) > 1:
                    out.mkdir(parents=True, exist_ok=True)
                    out = out / (Path(s["name"]).name + ".hyp")
                out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    except (OSError, ValueError) as e:  # ValueError: also CheckpointError, ConfigError, DataError
        print(f"nmt.evaluate: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows[0]) if len(rows) == 1 else json.dumps(rows))
        return 0
    width = max(len(r["set"]) for r in rows)
    print(f"{'set':<{width}}  {'sents':>6}  {'refs':>4}  {'BLEU':>6}  {'chrF':>6}  {'sent/s':>7}")
    for r in rows:
        print(f"{r['set']:<{width}}  {r['sentences']:>6}  {r['references']:>4}  {r['bleu']:>6.2f}  {r['chrf']:>6.2f}"
              f"  {r['sentences_per_s']:>7.1f}")
    for key, name in (("bleu_signature", "BLEU"), ("chrf_signature", "chrF")):
        for sig in dict.fromkeys(r[key] for r in rows):  # distinct, in order (nrefs may differ)
            which = [r["set"] for r in rows if r[key] == sig]
            print(f"{name}: {sig}" + (f"  ({', '.join(which)})" if len(which) < len(rows) else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
