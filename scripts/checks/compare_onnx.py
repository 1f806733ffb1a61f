"""ONNX export against eager PyTorch on the same sentences: equal outputs and speed.

    python scripts/checks/compare_onnx.py RUN EXPORTED/ --input ../shared/data/tatoeba-cmn-eng/dev.zh --beams 1 5

For each beam: sentences whose best translation is identical, sentences/s of each (one process,
the ONNX graphs and torch on the same threads), and for beam search how many of the differing
sentences are ties (the two best scores within 1e-4, so either order is right). ``--record FILE`` writes them as
a record (date, commit, command, CPU) for docs/results/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402


def compare(run: str, exported: str, sentences: list[str], beams: list[int]) -> list[dict]:
    """One row per beam: identical, ties, sentences/s eager and ONNX."""
    import torch

    from nmt.data.normalize import src_normalizer
    from nmt.decode import load_models, translate_nbest
    from nmt.device import set_threads
    from nmt.onnx_runtime import OnnxTranslator

    set_threads(0)
    models, tok, cfg = load_models([run], torch.device("cpu"))
    onnx = OnnxTranslator(exported, threads=torch.get_num_threads())
    norm = src_normalizer(cfg.data)
    rows = []
    for beam in beams:
        n_best = min(2, beam)
        t0 = time.monotonic()
        eager = translate_nbest(models, tok, norm, sentences, beam=beam, n_best=n_best)
        t1 = time.monotonic()
        ours = onnx.translate_nbest(sentences, beam=beam, n_best=n_best)
        t2 = time.monotonic()
        differ = [i for i, (a, b) in enumerate(zip(eager, ours)) if a[0][0] != b[0][0]]
        ties = [i for i in differ if len(eager[i]) > 1 and abs(eager[i][0][1] - eager[i][1][1]) < 1e-4]
        rows.append({"beam": beam, "sentences": len(sentences), "identical": len(sentences) - len(differ),
                     "differ_by_ties": len(ties), "eager_sent_per_s": round(len(sentences) / (t1 - t0), 1),
                     "onnx_sent_per_s": round(len(sentences) / (t2 - t1), 1)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="run directory or checkpoint")
    p.add_argument("exported", help="its nmt.export --format onnx folder")
    p.add_argument("--input", required=True, help="sentences, one per line")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    p.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--record", type=Path, help="write the rows as a record here")
    args = p.parse_args(argv)
    sentences = Path(args.input).read_text(encoding="utf-8").splitlines()
    sentences = sentences[: args.limit] if args.limit else sentences
    rows = compare(args.run, args.exported, sentences, args.beams)
    save(args.record, record({"run": args.run, "exported": args.exported, "input": args.input, "rows": rows}, argv))
    if args.json:
        print(json.dumps(rows))
    else:
        print("| beam | sentences | identical | differ by ties | eager sent/s | ONNX sent/s |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            print(f"| {r['beam']} | {r['sentences']} | {r['identical']} | {r['differ_by_ties']} | "
                  f"{r['eager_sent_per_s']} | {r['onnx_sent_per_s']} |")
    return 0 if all(r["identical"] + r["differ_by_ties"] == r["sentences"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
