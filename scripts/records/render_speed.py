"""Renderers of our own speed and of the checks (docs/results/bench_*, profile_*, output_chunks*, decode_*,
evaluate_*, int8_matmul*, serve_load*, gpu_check*, encoder_split*, unchanged_*, house_*, soak_resume*), used by
scripts/records/render_records.py."""

from __future__ import annotations

from collections.abc import Callable

from scripts.records.render_peers import load, machine, short, when


def cpu_of(r: dict) -> dict:
    """A record's CPU: ``cpu`` (scripts/records/record.py), or ``hardware`` in scripts/bench/benchmark.py's older ones."""
    return r.get("cpu") or r["hardware"]


def profiled(r: dict) -> tuple[str, str, str]:
    """What a profile record profiled, its unprofiled speed, and the matmuls' share with the bound it sets."""
    share = r.get("matmul_share")
    if "config" in r:  # scripts/bench/profile_training.py
        return (f"{r['config']}, {r['steps']} training updates", f"{r['tgt_tok_per_s']:,.0f} tgt tok/s",
                f"{share:.1%} → {1 / share:.2f}×")
    batches = r.get("decode_batch") or f"of {r['batch_sentences']:,}"
    what = f"beam {r['beam']}" + (f" `{r['stop']}`" if "stop" in r else "") + f", batches {batches}"
    speed = f"{1000 * r['sentences'] / r['wall_ms']:,.0f} sent/s" if "wall_ms" in r else "–"
    return what, speed, f"{share:.1%} → {r['bound_sents_per_s']:,.0f} sent/s" if share else "–"


def profiles() -> str:
    """scripts/bench/profile_decoding.py and profile_training.py records: a row each, the heaviest ops' shares."""
    rows = ["| record | machine | profiled | precision | unprofiled | matmuls' share → all else free | heaviest ops "
            "(share of op time) |", "| --- | --- | --- | --- | ---: | --- | --- |"]
    for name, r in load("profile_*.json"):
        what, speed, bound = profiled(r)
        ops = ", ".join(f"{o['op'].split('::')[-1]} {o['share']:.1%}" for o in r["ops"][:4])
        rows.append(f"| {when(name, r)} | {short(r['cpu'])} | {what} | {r['precision']} | {speed} | {bound} | {ops} |")
    return "\n".join(rows) + "\n"


def ab_training() -> str:
    """scripts/bench/ab_training.py records: training variants in alternating rounds, a row per variant."""
    rows = ["| record | machine | config, timed steps × rounds | variant | overrides | tgt tok/s (median) | ratio to the "
            "first, by round | peak MB |", "| --- | --- | --- | --- | --- | ---: | --- | ---: |"]
    for name, r in load("ab_train_*.json"):
        for v, x in r["variants"].items():
            ratios = ", ".join(f"{q:.2f}" for q in x["ratios_to_first"])
            rows.append(f"| {when(name, r)} | {short(r['cpu'])} | {r['config']}, {r['steps']} × {r['rounds']} | {v} | "
                        f"{' '.join(f'`{o}`' for o in x['overrides']) or '–'} | {x['median_tgt_tok_per_s']:,.0f} | "
                        f"{x['median_ratio']:.2f}× ({ratios}) | {x['max_peak_rss_mb']:,.0f} |")
    return "\n".join(rows) + "\n"


def soak() -> str:
    """The soak checks: kills survived per scenario and what was compared."""
    rows = ["| record | scenario | kills | launches | result | figures |", "| --- | --- | ---: | ---: | --- | --- |"]
    machines = set()
    for path_name, r in load("soak_resume*.json"):
        for name, s in r["scenarios"].items():
            if name == "time":
                figures = (f"clock {s['train_seconds']:.2f} s for {s['budget_s']:.0f} s ({s['steps']:,} updates of "
                           f"{1000 * s['update_s']:.1f} ms); wall {s['wall_s']:.1f} s; largest lr change after warm-up "
                           f"{s['lr_largest_rise']:+.2g}")
            else:
                figures = f"{s['final_step']} of {s['steps']} steps; tensors differing: {len(s['tensors_differing'])}"
            rows.append(f"| `{path_name}` ({r['date'][:10]}, {r.get('commit', r.get('git_commit'))[:7]}) | {name} | "
                        f"{len(s['kills'])} | "
                        f"{s['launches']} | {'pass' if s['pass'] else 'FAIL'} | {figures} |")
        machines.add(machine(r["cpu"]))
    return "\n".join(rows) + "\n\nOn " + "; ".join(sorted(machines)) + ".\n"


def encoder_split() -> str:
    """The encoder's separate layers against one multi-layer module."""
    rows = ["| record | device | batch × max length | stacked ms | multi-layer ms | ratio |",
            "| --- | --- | --- | ---: | ---: | ---: |"]
    for name, r in load("encoder_split*.json"):
        dev = r.get("gpu") or machine(r["cpu"]) if "cpu" in r else r["device"] if isinstance(r["device"], str) \
            else machine(r["device"])
        rows.append(f"| {when(name, r)} | {dev} | {r['batch']} × {r['max_len']} | "
                    f"{r['stacked_ms']:.1f} | {r['multi_layer_ms']:.1f} | {r['stacked_over_multi_layer']:.3f} |")
    return "\n".join(rows) + "\n"


def bench() -> str:
    """scripts/bench/benchmark.py records: training and decoding speed of a config on this tree (an untrained model's
    decoding: its outputs run longer than a trained one's)."""
    rows = ["| record | machine | precision | train tgt tok/s | peak RSS MB | % of fp32 matmul peak | decoding sent/s |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    for name, r in load("bench_*.json"):
        t, precision = r["train"], next((o.split("=")[1] for o in r["overrides"] if o.startswith("trainer.precision=")),
                                        "auto")
        decode = ", ".join(f"{k} {v['sents_per_s']:,.0f}" for k, v in r.get("decode", {}).items())
        rows.append(f"| `{name}` ({r['date'][:10]}, {r['commit'][:7]}, {r['config']}) | {machine(cpu_of(r))} | "
                    f"{precision} | {t['tgt_tok_per_s']:,.0f} | {t['peak_rss_mb']:,.0f} | {t['matmul_peak_fraction']:.0%} | "
                    f"{decode or '–'} |")
    return "\n".join(rows) + "\n"


def house() -> str:
    """scripts/checks/house.py records: lines and the longest function per module, at each recorded commit side by side."""
    records = sorted((r for _, r in load("house_*.json")), key=lambda r: r["date"])
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
    for name, r in sorted(load("unchanged_*.json"), key=lambda x: x[1]["date"]):
        base = next(a for a in r["command"][1:] if not a.startswith("-"))
        speed = "not timed"
        if med := r.get("speed_medians"):
            speed = ", ".join(f"{speed_label(k)} {med['working_tree'][k] / med['base'][k]:.3f}" for k in med["base"])
        same = "identical"
        if not r["unchanged"]:
            same = "differ: " + ", ".join(k for k in r["base"] if r["base"][k] != r["working_tree"].get(k))
        bleu = [f"{k[:5]} {r['base'][k]:.2f} → {r['working_tree'][k]:.2f}" for k in r["base"] if k.endswith("_bleu")]
        same += f" (dev BLEU {', '.join(bleu)})" if bleu else ""
        rows.append(f"| `{name}` ({r['date'][:10]}) | {base} | {r['head'][:7]}{' + changes' if r['dirty'] else ''} | "
                    f"{same} | {speed} |")
    return "\n".join(rows) + "\n"


def captioned(pattern: str, caption: Callable[[str, dict], str], header: list[str] | Callable[[dict], list[str]],
              row: Callable[[dict, dict], str]) -> str:
    """A captioned table per record matching ``pattern``: ``caption(name, record)``, the head and alignment lines
    (``header``, or ``header(record)``), then ``row(record, x)`` for each of its ``rows``."""
    out = []
    for name, r in load(pattern):
        out += [caption(name, r) + "\n", *(header(r) if callable(header) else header), *(row(r, x) for x in r["rows"]), ""]
    return "\n".join(out)


def head(name: str, r: dict) -> str:
    """A caption's start: the record, its date, commit and CPU."""
    return f"`{name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}"


def decode_precision() -> str:
    """scripts/bench/benchmark_decoding.py records: BLEU and sentences/s per decoding precision, against the first."""
    return captioned("decode_*.json", lambda name, r: head(name, r) + f", {r['threads']} threads; medians of {r['rounds']} "
                     f"alternating rounds; model `{r['model']}`):",
                     ["| precision | split | beam | batch (sentences) | BLEU | BLEU change | sentences/s | speed ratio |",
                      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"],
                     lambda r, x: f"| {x['precision']} | {x['split']} | {x['beam']} | {x['batch_sentences']:,} | "
                     f"{x['bleu']:.2f} | {x['bleu_vs_first']:+.2f} | {x['sents_per_s']:,.1f} | {x['speed_vs_first']:.2f}× |")


def evaluate_precision() -> str:
    """scripts/bench/benchmark_evaluate.py records (the script retired, its records kept): ``nmt.evaluate``'s own
    sentences/s and BLEU per precision, per set."""
    def row(r: dict, x: dict) -> str:
        passes = ", ".join(f"{v:,.1f}" for v in x["sents_per_s"])
        return (f"| {x['precision']} | {x['set']} | {x['bleu']:.2f} | {x['bleu_vs_first']:+.2f} | {passes} | "
                f"{x['median']:,.1f} | {x['speed_vs_first']:.2f}× |")

    return captioned("evaluate_*.json", lambda name, r: head(name, r) + f"; beam {r['beam']}; `nmt.evaluate` in a process "
                     f"of its own per pass, {r['rounds']} alternating rounds; model `{r['model']}`):",
                     ["| precision | set | BLEU | BLEU change | sentences/s, each pass | median | speed ratio |",
                      "| --- | --- | ---: | ---: | --- | ---: | ---: |"], row)


def int8_matmul() -> str:
    """scripts/bench/benchmark_int8_matmul.py records (the script retired, its records kept): each kind of matmul
    against fp32 at decoding shapes."""
    def kinds(r: dict) -> list[str]:
        return list(r["rows"][0]["ms"])

    def caption(name: str, r: dict) -> str:
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items() if v)
        return (head(name, r) + f", {r['threads']} threads; {versions}; ms a call, medians of {r['rounds']} alternating "
                "rounds, and speed against fp32):")

    return captioned("int8_matmul*.json", caption,
                     lambda r: ["| rows × in → out | " + " | ".join(kinds(r)) + " |", "| --- |" + " ---: |" * len(kinds(r))],
                     lambda r, x: f"| {x['rows']:,} × {x['in']} → {x['out']:,} | "
                     + " | ".join(f"{x['ms'][k]:.3f} ({x['vs_fp32'][k]:.2f}×)" for k in kinds(r)) + " |")


def serve_load() -> str:
    """scripts/bench/load_serve.py --record records: the server under load, per decoding precision, runs in their order."""
    rows = ["| record | run | server precision | clients, beam | sentences/s | p50 / p95 ms | errors |",
            "| --- | --- | --- | --- | ---: | --- | ---: |"]
    for name, runs in load("serve_load*.json"):
        for i, run in enumerate(runs, 1):
            rep, models = run["report"], run["models"] or [{}]
            at = f"{run['date'][:16].replace('T', ' ')}, {run['commit'][:7]}; {run['cpu']['model']}"
            rows.append(f"| `{name}` ({at}) | {i} | "
                        f"{models[0].get('precision', '?')} | {rep['clients']}, {rep['beam']} | {rep['sentences_per_s']:,.1f} | "
                        f"{rep['p50_ms']:,.0f} / {rep['p95_ms']:,.0f} | {rep['errors']} |")
    return "\n".join(rows) + "\n"


def gpu_check() -> str:
    """scripts/checks/gpu_check.py records: CUDA tests, training and decoding speed, and the training step's profile."""
    rows = ["| record | CUDA tests | compiled step | bench-small fp32 / bf16 tgt tok/s | auto chose | "
            "paper 4×1000 bf16 (fp32) tgt tok/s, peak MB, % of bf16 peak | bench-small fp32 step profiled | "
            "greedy / beam 5 sent/s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    records = load("gpu_check*.json")
    for name, r in records:
        fp32, bf16, paper = r["bench_small_fp32"], r["bench_small_bf16"], r["paper_bf16"]
        tests = (f"{r['tests']['passed']} passed, {r['tests']['skipped']} skipped" if r.get("tests") else "not run")
        auto = r["bench_small_auto"]["train"]["precision"] if "bench_small_auto" in r else "–"
        paper_fp32 = f" ({r['paper_fp32']['tgt_tok_per_s']:,.0f})" if "paper_fp32" in r else ""
        prof = fp32.get("profile")
        prof = (f"{prof['wall_ms_per_step']:.0f} ms, GPU busy {prof['device_busy']:.0%}, "
                f"{prof['kernel_launches_per_step']:,.0f} launches" if prof else "–")
        dec = bf16.get("decode", {})
        compiled = {True: "yes", False: "no"}.get(fp32["train"].get("compile"), "no (plain ops)")
        rows.append(f"| {when(name, r)} | {tests} | "
                    f"{compiled} | {fp32['train']['tgt_tok_per_s']:,.0f} / "
                    f"{bf16['train']['tgt_tok_per_s']:,.0f} | {auto} | {paper['tgt_tok_per_s']:,.0f}{paper_fp32}, "
                    f"{paper['peak_gpu_mb']:,.0f}, {paper['bf16_peak_fraction']:.1%} | {prof} | "
                    f"{dec['greedy']['sents_per_s']:,.0f} / {dec['beam5']['sents_per_s']:,.0f} |")
    devices = sorted({r["gpu"] for _, r in records})
    return "\n".join(rows) + "\n\nOn " + "; ".join(devices) + ".\n"


def output_chunks() -> str:
    """scripts/bench/benchmark_output_chunks.py records (the script retired, its records kept): the search's output
    layer in blocks against one block."""
    def row(r: dict, x: dict) -> str:
        fps, mb, (lo, hi) = x["sents_per_s"], x["peak_mb"], x["ratio_range"]
        return (f"| {x['precision']} | {x['beam']} | {fps['one']:,.0f} | {fps['blocks']:,.0f} | {x['paired_ratio']:.2f}× "
                f"({lo:.2f}–{hi:.2f}) | {mb['one']:,.0f} → {mb['blocks']:,.0f} | {'yes' if x['same_translations'] else 'no'} |")

    return captioned("output_chunks*.json", lambda name, r: head(name, r) + f", {r['threads']} threads; batches "
                     f"{r['decode_batch']}, stop {r['stop']}, blocks of {r['chunk_elements']:,} logits; medians of "
                     f"{r['rounds']} alternating rounds in one process, peak RSS of a fresh process each):",
                     ["| precision | beam | one block sent/s | blocks sent/s | paired ratio (range) | peak MB one → blocks | "
                      "same translations |", "| --- | ---: | ---: | ---: | --- | --- | --- |"], row)


SPEED_RENDERERS: dict[str, Callable[[], str]] = {
    "soak": soak, "encoder_split": encoder_split, "bench": bench, "house": house, "unchanged": unchanged,
    "decode_precision": decode_precision, "evaluate_precision": evaluate_precision, "int8_matmul": int8_matmul,
    "serve_load": serve_load, "gpu_check": gpu_check, "output_chunks": output_chunks, "profiles": profiles,
    "ab_training": ab_training}
