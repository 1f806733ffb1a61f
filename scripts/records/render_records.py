"""Render the docs' tables from the measurement records in docs/results/ (figures are data, not prose).

    python scripts/records/render_records.py            # rewrite every <!-- render: NAME --> ... <!-- /render --> block
    python scripts/records/render_records.py --check    # exit 1 if a block differs from what its records give

A block's NAME picks a renderer below; each reads the records (JSON written by a script in the tree, with
date, commit, command and machine) and returns Markdown.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from render_history import HISTORY
from render_peers import PEERS_RENDERERS, machine
from render_quality import QUALITY_RENDERERS

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # scripts.peers.side_by_side
RECORDS, DOCS = REPO / "docs" / "results", REPO / "docs"
BLOCK = re.compile(r"(<!-- render: (\w+) -->\n)(.*?)(<!-- /render -->)", re.S)


def soak() -> str:
    """The soak checks: kills survived per scenario and what was compared."""
    rows = ["| record | scenario | kills | launches | result | figures |", "| --- | --- | ---: | ---: | --- | --- |"]
    machines = set()
    for path in sorted(RECORDS.glob("soak_resume*.json")):
        r = json.loads(path.read_text())
        for name, s in r["scenarios"].items():
            if name == "time":
                figures = (f"clock {s['train_seconds']:.2f} s for {s['budget_s']:.0f} s ({s['steps']:,} updates of "
                           f"{1000 * s['update_s']:.1f} ms); wall {s['wall_s']:.1f} s; largest lr change after warm-up "
                           f"{s['lr_largest_rise']:+.2g}")
            else:
                figures = f"{s['final_step']} of {s['steps']} steps; tensors differing: {len(s['tensors_differing'])}"
            rows.append(f"| `{path.name}` ({r['date'][:10]}, {r['git_commit'][:7]}) | {name} | {len(s['kills'])} | "
                        f"{s['launches']} | {'pass' if s['pass'] else 'FAIL'} | {figures} |")
        machines.add(machine(r["cpu"]))
    return "\n".join(rows) + "\n\nOn " + "; ".join(sorted(machines)) + ".\n"


def encoder_split() -> str:
    """The encoder's separate layers against one multi-layer module."""
    rows = ["| record | device | batch × max length | stacked ms | multi-layer ms | ratio |",
            "| --- | --- | --- | ---: | ---: | ---: |"]
    for path in sorted(RECORDS.glob("encoder_split*.json")):
        r = json.loads(path.read_text())
        dev = r["device"] if isinstance(r["device"], str) else machine(r["device"])
        rows.append(f"| `{path.name}` ({r['date'][:10]}, {r['commit'][:7]}) | {dev} | {r['batch']} × {r['max_len']} | "
                    f"{r['stacked_ms']:.1f} | {r['multi_layer_ms']:.1f} | {r['stacked_over_multi_layer']:.3f} |")
    return "\n".join(rows) + "\n"


def bench() -> str:
    """scripts/bench/benchmark.py records: training and decoding speed of a config on this tree (an untrained model's
    decoding: its outputs run longer than a trained one's)."""
    rows = ["| record | machine | precision | train tgt tok/s | peak RSS MB | % of fp32 matmul peak | decoding sent/s |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    for path in sorted(RECORDS.glob("bench_*.json")):
        r = json.loads(path.read_text())
        t, precision = r["train"], next((o.split("=")[1] for o in r["overrides"] if o.startswith("trainer.precision=")),
                                        "auto")
        decode = ", ".join(f"{k} {v['sents_per_s']:,.0f}" for k, v in r.get("decode", {}).items())
        rows.append(f"| `{path.name}` ({r['date'][:10]}, {r['commit'][:7]}, {r['config']}) | {machine(r['hardware'])} | "
                    f"{precision} | {t['tgt_tok_per_s']:,.0f} | {t['peak_rss_mb']:,.0f} | {t['matmul_peak_fraction']:.0%} | "
                    f"{decode or '–'} |")
    return "\n".join(rows) + "\n"


def house() -> str:
    """scripts/checks/house.py records: lines and the longest function per module, at each recorded commit side by side."""
    records = [json.loads(p.read_text()) for p in sorted(RECORDS.glob("house_*.json"))]
    records.sort(key=lambda r: r["date"])
    head = " | ".join(f"{r['commit'][:7]} lines | longest function" for r in records)
    rows = [f"| module | {head} |", "| --- |" + " ---: | --- |" * len(records)]
    for rel in sorted({m for r in records for m in r["modules"]}):
        cells = []
        for r in records:
            m = r["modules"].get(rel)
            cells.append(f"{m['lines']} | {m['longest_function']} ({m['longest_lines']})" if m else "– | –")
        rows.append(f"| `{rel}` | {' | '.join(cells)} |")
    private = [f"{r['commit'][:7]}: {sum(len(m['private']) for m in r['modules'].values())}" for r in records]
    return "\n".join(rows) + "\n\nPrivate names reached across objects: " + ", ".join(private) + ".\n"


def speed_label(key: str) -> str:
    """A check_unchanged speed key as the table names it: beam5_sents_per_s_int8 -> "beam 5 int8"."""
    key = key.replace("train_tgt_tok_per_s", "train").replace("beam1_sents_per_s", "greedy")
    return key.replace("beam5_sents_per_s", "beam 5").replace("_", " ")


def unchanged() -> str:
    """scripts/checks/check_unchanged.py records: fixed-seed training and dev translations at a base commit and after."""
    rows = ["| record | base | after | weights, dev history, greedy and beam-5 md5 | speed, after / base |",
            "| --- | --- | --- | --- | --- |"]
    for path in sorted(RECORDS.glob("unchanged_*.json"), key=lambda p: json.loads(p.read_text())["date"]):
        r = json.loads(path.read_text())
        base = next(a for a in r["command"][1:] if not a.startswith("-"))
        speed = "not timed"
        if med := r.get("speed_medians"):
            speed = ", ".join(f"{speed_label(k)} {med['working_tree'][k] / med['base'][k]:.3f}" for k in med["base"])
        same = "identical"
        if not r["unchanged"]:
            same = "differ: " + ", ".join(k for k in r["base"] if r["base"][k] != r["working_tree"].get(k))
        bleu = [f"{k[:5]} {r['base'][k]:.2f} → {r['working_tree'][k]:.2f}" for k in r["base"] if k.endswith("_bleu")]
        same += f" (dev BLEU {', '.join(bleu)})" if bleu else ""
        rows.append(f"| `{path.name}` ({r['date'][:10]}) | {base} | {r['head'][:7]}{' + changes' if r['dirty'] else ''} | "
                    f"{same} | {speed} |")
    return "\n".join(rows) + "\n"


def decode_precision() -> str:
    """scripts/bench/benchmark_decoding.py records: BLEU and sentences/s per decoding precision, against the first."""
    out = []
    for path in sorted(RECORDS.glob("decode_*.json")):
        r = json.loads(path.read_text())
        out.append(f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}, {r['threads']} threads; "
                   f"medians of {r['rounds']} alternating rounds; model `{r['model']}`):\n")
        out += ["| precision | split | beam | batch (sentences) | BLEU | BLEU change | sentences/s | speed ratio |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for x in r["rows"]:
            out.append(f"| {x['precision']} | {x['split']} | {x['beam']} | {x['batch_sentences']:,} | {x['bleu']:.2f} | "
                       f"{x['bleu_vs_first']:+.2f} | {x['sents_per_s']:,.1f} | {x['speed_vs_first']:.2f}× |")
        out.append("")
    return "\n".join(out)


def evaluate_precision() -> str:
    """scripts/bench/benchmark_evaluate.py records: ``nmt.evaluate``'s own sentences/s and BLEU per precision, per set."""
    out = []
    for path in sorted(RECORDS.glob("evaluate_*.json")):
        r = json.loads(path.read_text())
        out.append(f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; beam {r['beam']}; "
                   f"`nmt.evaluate` in a process of its own per pass, {r['rounds']} alternating rounds; model `{r['model']}`):\n")
        out += ["| precision | set | BLEU | BLEU change | sentences/s, each pass | median | speed ratio |",
                "| --- | --- | ---: | ---: | --- | ---: | ---: |"]
        for x in r["rows"]:
            passes = ", ".join(f"{v:,.1f}" for v in x["sents_per_s"])
            out.append(f"| {x['precision']} | {x['set']} | {x['bleu']:.2f} | {x['bleu_vs_first']:+.2f} | {passes} | "
                       f"{x['median']:,.1f} | {x['speed_vs_first']:.2f}× |")
        out.append("")
    return "\n".join(out)


def int8_matmul() -> str:
    """scripts/bench/benchmark_int8_matmul.py records: each kind of matmul against fp32 at decoding shapes."""
    out = []
    for path in sorted(RECORDS.glob("int8_matmul*.json")):
        r = json.loads(path.read_text())
        kinds = list(r["rows"][0]["ms"])
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items() if v)
        out.append(f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}, {r['threads']} threads; "
                   f"{versions}; ms a call, medians of {r['rounds']} alternating rounds, and speed against fp32):\n")
        out += ["| rows × in → out | " + " | ".join(kinds) + " |", "| --- |" + " ---: |" * len(kinds)]
        for x in r["rows"]:
            cells = [f"{x['ms'][k]:.3f} ({x['vs_fp32'][k]:.2f}×)" for k in kinds]
            out.append(f"| {x['rows']:,} × {x['in']} → {x['out']:,} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def serve_load() -> str:
    """scripts/bench/load_serve.py --record records: the server under load, per decoding precision, runs in their order."""
    rows = ["| record | run | server precision | clients, beam | sentences/s | p50 / p95 ms | errors |",
            "| --- | --- | --- | --- | ---: | --- | ---: |"]
    for path in sorted(RECORDS.glob("serve_load*.json")):
        for i, run in enumerate(json.loads(path.read_text()), 1):
            rep, models = run["report"], run["models"] or [{}]
            when = f"{run['date'][:16].replace('T', ' ')}, {run['commit'][:7]}; {run['cpu']['model']}"
            rows.append(f"| `{path.name}` ({when}) | {i} | "
                        f"{models[0].get('precision', '?')} | {rep['clients']}, {rep['beam']} | {rep['sentences_per_s']:,.1f} | "
                        f"{rep['p50_ms']:,.0f} / {rep['p95_ms']:,.0f} | {rep['errors']} |")
    return "\n".join(rows) + "\n"


def side_by_side() -> str:
    """scripts/peers/side_by_side.py --json records: ours beside each peer at each decoding batch setting (medians)."""
    from scripts.peers.side_by_side import PEERS, table

    out = []
    for path in sorted(RECORDS.glob("side_by_side*.json")):
        r = json.loads(path.read_text())
        peers = ", ".join(sorted({PEERS[k.split("@")[0]] for k in r["keys"]}))
        out.append(f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; against {peers}; budget "
                   f"{r['budget_minutes']:g} min{' (smoke)' if r['smoke'] else ''}; our training in {r['train_precision']}, "
                   f"our decoding in {r['decode_precision']} (suffix `_int8`: ours in int8 beside the peer's fp32); "
                   f"{len(r['rows'][r['keys'][0]]['ours'])} round(s), medians):\n")
        out += [table(r["median"], {k: v["ratio"] for k, v in r["median"].items()}, r["keys"]), ""]
    return "\n".join(out)


def profiles() -> str:
    """scripts/bench/profile_decoding.py and profile_training.py records: the top ops of a warm decoding pass or of training
    updates, one table per record."""
    records = [(p.name, json.loads(p.read_text())) for p in sorted(RECORDS.glob("profile_*.json"))]
    out = []
    for name, r in records:
        what = (f"{r['config']}, {r['steps']} training updates of {r['mean_batch_sents']:.0f} sentences, "
                f"{r['tgt_tok_per_s']:,.0f} target tokens/s unprofiled; matmuls {r['matmul_share']:.1%}, so every other "
                f"op free would give {1 / r['matmul_share']:.2f}×" if "config" in r else  # scripts/bench/profile_training.py
                f"beam {r['beam']}" + (f" (stop {r['stop']})" if "stop" in r else "")
                + (f", batches {r['decode_batch']}" if r.get("decode_batch")
                   else f", batches of {r['batch_sentences']:,} sentences")
                + f", {r['sentences']:,} sentences"
                + (f", {r['wall_ms']:,.0f} ms of wall time unprofiled" if "wall_ms" in r else "")
                + (f" ({r['sents_per_s']:,.0f} sentences/s); matmuls {r['matmul_share']:.1%}, so every other op free "
                   f"would give {r['bound_sents_per_s']:,.0f} sentences/s" if "matmul_share" in r else "")
                + (f"; fp32 matmuls at {r['matmul_gflops']:,.0f} GFLOP/s against a {r['peak_gflops']:,.0f} GFLOP/s "
                   f"sgemm peak" if r.get("matmul_gflops") else ""))
        out.append(f"`{name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}, {r['threads']} threads; "
                   f"{r['precision']}, {what}; {r['total_ms']:,.0f} ms of op time):\n")
        out += ["| op | self ms | share | calls |", "| --- | ---: | ---: | ---: |"]
        out += [f"| `{o['op']}` | {o['self_ms']:,.1f} | {o['share']:.1%} | {o['calls']:,} |" for o in r["ops"][:10]]
        out.append("")
    return "\n".join(out)


def gpu_check() -> str:
    """scripts/checks/gpu_check.py records: CUDA tests, training and decoding speed, and the training step's profile."""
    rows = ["| record | CUDA tests | compiled step | bench-small fp32 / bf16 tgt tok/s | auto chose | "
            "paper 4×1000 bf16 (fp32) tgt tok/s, peak MB, % of bf16 peak | bench-small fp32 step profiled | "
            "greedy / beam 5 sent/s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for path in sorted(RECORDS.glob("gpu_check*.json")):
        r = json.loads(path.read_text())
        fp32, bf16, paper = r["bench_small_fp32"], r["bench_small_bf16"], r["paper_bf16"]
        tests = (f"{r['tests']['passed']} passed, {r['tests']['skipped']} skipped" if r.get("tests") else "not run")
        auto = r["bench_small_auto"]["train"]["precision"] if "bench_small_auto" in r else "–"
        paper_fp32 = f" ({r['paper_fp32']['tgt_tok_per_s']:,.0f})" if "paper_fp32" in r else ""
        prof = fp32.get("profile")
        prof = (f"{prof['wall_ms_per_step']:.0f} ms, GPU busy {prof['device_busy']:.0%}, "
                f"{prof['kernel_launches_per_step']:,.0f} launches" if prof else "–")
        dec = bf16.get("decode", {})
        compiled = {True: "yes", False: "no"}.get(fp32["train"].get("compile"), "no (plain ops)")
        rows.append(f"| `{path.name}` ({r['date'][:10]}, {r['commit'][:7]}) | {tests} | "
                    f"{compiled} | {fp32['train']['tgt_tok_per_s']:,.0f} / "
                    f"{bf16['train']['tgt_tok_per_s']:,.0f} | {auto} | {paper['tgt_tok_per_s']:,.0f}{paper_fp32}, "
                    f"{paper['peak_gpu_mb']:,.0f}, {paper['bf16_peak_fraction']:.1%} | {prof} | "
                    f"{dec['greedy']['sents_per_s']:,.0f} / {dec['beam5']['sents_per_s']:,.0f} |")
    devices = sorted({json.loads(p.read_text())["gpu"] for p in RECORDS.glob("gpu_check*.json")})
    return "\n".join(rows) + "\n\nOn " + "; ".join(devices) + ".\n"


def finetune() -> str:
    """scripts/quality/finetune_example.py records: a trained model on a new corpus before, fine-tuned, and from scratch."""
    out = []
    for path in sorted(RECORDS.glob("finetune_*.json")):
        r = json.loads(path.read_text())
        b = r["base_metrics"]
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; base: the {r['recipe']} "
                f"model after {b['steps']:,} updates, Tatoeba test BLEU {b['test_bleu']:.2f}):", "",
                "| model | HSK test BLEU (beam 5) | chrF | updates on HSK |", "| --- | ---: | ---: | ---: |",
                f"| base, as it is | {r['before']['test_bleu']:.2f} | {r['before']['test_chrf']:.2f} | 0 |"]
        for name, label in (("finetuned", f"fine-tuned {r['minutes']:g} min"), ("scratch", f"from scratch {r['minutes']:g} min")):
            x = r[name]
            out.append(f"| {label} | {x['test_bleu']:.2f} | {x['test_chrf']:.2f} | {x['steps']:,} |")
        out.append("")
    return "\n".join(out)


def _minus(value: float, base: Optional[float]) -> str:
    return "" if base is None else f"{value - base:+.2f}"


def quality_levers() -> str:
    """scripts/quality/quality_levers.py records: a recipe with one lever pulled at a time, per seed."""
    out = []
    for path in sorted(RECORDS.glob("quality_levers*.json")):
        r = json.loads(path.read_text())
        base = {x["seed"]: x["test_bleu"] for x in r["rows"] if x["variant"] == "baseline"}
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; {r['recipe']}, "
                f"{r['minutes']:g} minutes a run):", "",
                "| variant | seed | updates | best dev BLEU | test BLEU (beam 5) | chrF | test − baseline |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        out += [f"| {x['variant']} | {x['seed']} | failed: see its log | | | | |" if "failed" in x else
                f"| {x['variant']} | {x['seed']} | {x['steps']:,} | {x['best_valid_bleu']:.2f} | {x['test_bleu']:.2f} | "
                f"{x['test_chrf']:.2f} | {_minus(x['test_bleu'], base.get(x['seed']))} |" for x in r["rows"]]
        out.append("")
    return "\n".join(out)


def output_chunks() -> str:
    """scripts/bench/benchmark_output_chunks.py records: the search's output layer in blocks against one block."""
    out = []
    for path in sorted(RECORDS.glob("output_chunks*.json")):
        r = json.loads(path.read_text())
        out.append(f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}, {r['threads']} threads; "
                   f"batches {r['decode_batch']}, stop {r['stop']}, blocks of {r['chunk_elements']:,} logits; medians of "
                   f"{r['rounds']} alternating rounds in one process, peak RSS of a fresh process each):\n")
        out += ["| precision | beam | one block sent/s | blocks sent/s | paired ratio (range) | peak MB one → blocks | "
                "same translations |", "| --- | ---: | ---: | ---: | --- | --- | --- |"]
        out += [f"| {x['precision']} | {x['beam']} | {x['sents_per_s']['one']:,.0f} | {x['sents_per_s']['blocks']:,.0f} | "
                f"{x['paired_ratio']:.2f}× ({x['ratio_range'][0]:.2f}–{x['ratio_range'][1]:.2f}) | "
                f"{x['peak_mb']['one']:,.0f} → {x['peak_mb']['blocks']:,.0f} | {'yes' if x['same_translations'] else 'no'} |"
                for x in r["rows"]]
        out.append("")
    return "\n".join(out)


RENDERERS: dict[str, Callable[[], str]] = {"gpu_check": gpu_check, "finetune": finetune,
                                           "quality_levers": quality_levers,
                                           "soak": soak, "encoder_split": encoder_split, "bench": bench, "house": house,
                                           "unchanged": unchanged, "decode_precision": decode_precision,
                                           "evaluate_precision": evaluate_precision,
                                           "int8_matmul": int8_matmul, "serve_load": serve_load,
                                           "side_by_side": side_by_side, "profiles": profiles,
                                           "output_chunks": output_chunks}
RENDERERS.update(HISTORY)  # the transcribed figures (docs/results/history_*.json; scripts/records/render_history.py)
RENDERERS.update(PEERS_RENDERERS)  # records measured beside the peers (scripts/records/render_peers.py)
RENDERERS.update(QUALITY_RENDERERS)  # the search's settings on dev (scripts/records/render_quality.py)


def render(text: str, where: Path) -> str:
    def one(m: re.Match) -> str:
        if m.group(2) not in RENDERERS:
            raise SystemExit(f"{where}: no renderer {m.group(2)!r} (known: {', '.join(RENDERERS)})")
        return m.group(1) + RENDERERS[m.group(2)]() + m.group(4)

    return BLOCK.sub(one, text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a doc is out of date")
    args = p.parse_args()
    stale = []
    for doc in sorted(DOCS.glob("*.md")):
        text = doc.read_text(encoding="utf-8")
        new = render(text, doc)
        if new != text:
            stale.append(doc)
            if not args.check:
                doc.write_text(new, encoding="utf-8")
    for doc in stale:
        print(f"{doc.relative_to(REPO)}: {'out of date with docs/results' if args.check else 'rendered'}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
