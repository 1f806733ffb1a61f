"""Renderers for the records measured beside the peers: decoding speed (docs/results/peer_decode*.json), the BLEU
gap's ablation (gap_ablation*.json) and each side's weights under each side's search (swap_search*.json), used by
scripts/records/render_records.py (kept apart: that module is at the house's 300-line limit)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

RECORDS = Path(__file__).resolve().parents[2] / "docs" / "results"


def machine(cpu: dict) -> str:
    """A record's CPU as the tables name it: model, cores, the AMX/AVX-512 flags."""
    return f"{cpu['model']}, {cpu['cores']} cores, flags {' '.join(cpu['flags']) or 'none of amx/avx512'}"


PEERS = {"eole": "Eole", "onmt": "OpenNMT-py"}


def decode_side_by_side() -> str:
    """scripts/peers/decode_side_by_side.py records: ours and the peers' sentences/s on the same test set, medians, ratios."""
    out = []
    for path in sorted(RECORDS.glob("peer_decode*.json")):
        r = json.loads(path.read_text())
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; {r['threads']} threads; "
                f"medians of {r['rounds']} alternating rounds):", "",
                "| peer | batch | search | ours | ours sents/s | peer sents/s (fp32) | ratio | BLEU ours / peer |",
                "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"]
        for x in r["rows"]:  # records before OpenNMT-py joined hold Eole alone, under eole_* keys
            peer, theirs = x.get("peer", "eole"), x.get("peer_sents_per_s", x.get("eole_sents_per_s"))
            out.append(f"| {PEERS[peer]} | {x['batch']} | {x['search']} | {x['precision']} | {x['ours_sents_per_s']:,.0f} | "
                       f"{theirs:,.0f} | {x['ratio']:.2f}× | {x['ours_bleu']:.2f} / "
                       f"{x.get('peer_bleu', x.get('eole_bleu')):.2f} |")
        out += ["", *against_fastest(r), ""]
    return "\n".join(out)


def against_fastest(r: dict) -> list[str]:
    """The issue's ratio, round by round: ours at each batch setting over the peers' fastest setting (the peer and
    batch of the highest median) in the same round, the median and range of those ratios; a round's passes are
    minutes apart, so drift between rounds cancels (a per-round maximum over settings would favour the peer)."""
    samples = r["samples"]
    settings = [(b, p) for b, sides in samples.items() for p in PEERS if p in sides]

    lines = ["Round by round against the peers' fastest setting:", "",
             "| ours | search | batch | fastest peer setting | per-round ratio, median | range |",
             "| --- | --- | --- | --- | ---: | --- |"]
    for batch, sides in samples.items():
        for key, xs in sides["ours"].items():
            name, prec = key.rsplit("_", 1)
            peer_name = name.removesuffix("_first")  # the peers' beam ends at the first finished
            b, p = max(settings, key=lambda s: statistics.median([x["sents_per_s"] for x in samples[s[0]][s[1]][peer_name]]))
            ratios = [x["sents_per_s"] / y["sents_per_s"] for x, y in zip(xs, samples[b][p][peer_name])]
            lines.append(f"| {prec} | {name} | {batch} | {PEERS[p]} {b} | {statistics.median(ratios):.2f}× | "
                         f"{min(ratios):.2f}–{max(ratios):.2f}× |")
    return lines


def gap_ablation() -> str:
    """scripts/ablate_gap.py records: our bench-small moved toward Eole one factor at a time, and Eole toward us."""
    out = []

    def ppl(row: dict) -> str:  # the last validation's dev perplexity, and the lowest where it was lower
        curve = row.get("dev_ppl") or []
        if not curve:
            return "–"
        low, last = min(curve, key=lambda c: c[1]), f"{curve[-1][1]:.1f}"
        return last + (f" ({low[1]:.1f} at {low[0]:,})" if f"{low[1]:.1f}" != last else "")

    def one(row: dict) -> str:  # a peer's greedy BLEU decoding one sentence a batch (no padding read)
        return f" ({row['bleu_greedy_sents1']:.2f} one a batch)" if "bleu_greedy_sents1" in row else ""

    def gain(row: dict) -> str:  # beam 5 against our baseline of the same record, where it has one
        return f"{row['bleu_beam5'] - base['bleu_beam5']:+.2f}" if base else "–"

    for path in sorted(RECORDS.glob("gap_ablation*.json")):
        r = json.loads(path.read_text())
        base = r["rows"].get("baseline")  # a record of the peer's variants alone has none
        rows = [(name, row) for name, row in r["rows"].items()] + list(r.get("peer_rows", {}).items())
        eole_round = json.loads((RECORDS / "side_by_side_eole.json").read_text())["rows"]["eole@default"]["theirs"][0]
        rows.append(("Eole 0.6.4 (`side_by_side_eole.json`)", {"moves": "the peer itself, in its own round", **eole_round}))
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}):", "",
                "| variant | what moves | updates | dev ppl last (lowest) | BLEU greedy | BLEU beam 5 | beam 5 − baseline |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        out += [f"| {name} | {row['moves']} | {row.get('steps', row.get('budget_steps')):,} | {ppl(row)} | "
                f"{row['bleu_greedy']:.2f}{one(row)} | {row['bleu_beam5']:.2f} | {gain(row)} |"
                for name, row in rows]
        out.append("")
        if "skipped" in r:
            out += skipped_table(r["skipped"], r["steps"])
    return "\n".join(out)


SEED_GROUPS = {  # the runs on the peers' pieces with Eole's batches, nothing skipped, 8,400 updates
    "Eole 0.6.4 on its own stream": ["eole_keep_duplicates_steps", "eole_keep_duplicates_steps_eos_divisor",
                                     "eole_keep_duplicates_steps_s43", "eole_keep_duplicates_steps_s44"],
    "ours on Eole's own stream": ["eole_stream_harness_spm", "eole_stream_harness_spm_s43", "eole_stream_harness_spm_s44"],
    "ours on our imitation of it": ["eole_batches_harness_spm", "eole_batches_harness_spm_eole_divisor",
                                    "eole_batches_harness_spm_s43", "eole_batches_harness_spm_s44"],
}


def gap_seeds() -> str:
    """Every run of SEED_GROUPS found in the gap_ablation records: each one's beam 5 and dev ppl, and each group's mean."""
    found: dict[str, dict] = {}
    for path in sorted(RECORDS.glob("gap_ablation*.json")):
        r = json.loads(path.read_text())
        for name, row in [*r["rows"].items(), *r.get("peer_rows", {}).items()]:
            found[name] = {**row, "record": path.name}
    out = ["| runs | variant (record) | dev ppl last | BLEU greedy | BLEU beam 5 |", "| --- | --- | ---: | ---: | ---: |"]
    for group, names in SEED_GROUPS.items():
        rows = [(n, found[n]) for n in names if n in found]
        for n, row in rows:
            last = f"{row['dev_ppl'][-1][1]:.1f}" if row.get("dev_ppl") else "–"
            out.append(f"| {group} | `{n}` (`{row['record']}`) | {last} | {row['bleu_greedy']:.2f} | {row['bleu_beam5']:.2f} |")
        if len(rows) > 1:
            beam = [row["bleu_beam5"] for _, row in rows]
            mean = sum(beam) / len(beam)
            sd = (sum((b - mean) ** 2 for b in beam) / (len(beam) - 1)) ** 0.5
            out.append(f"| **{group}** | **mean of {len(rows)}** (sd {sd:.2f}, range {min(beam):.2f}–{max(beam):.2f}) | | "
                       f"**{sum(row['bleu_greedy'] for _, row in rows) / len(rows):.2f}** | **{mean:.2f}** |")
    return "\n".join(out) + "\n"


def skipped_table(k: dict, steps: int) -> list[str]:
    """ablate_gap.skipped: how often Eole's first ``steps`` batches train a pair, by source length, with its skipping of
    a source the batch already holds and without."""
    e, n = k["eole"], k["no_skip"]
    out = [f"Eole's batches over {steps:,} updates, simulated on the harness's pieces: {e['batches_per_bucket']:,} batches "
           f"a bucket with its skipping, {n['batches_per_bucket']:,} without; {e['never_trained']:,} pairs never trained; "
           f"pairs of 15 or more source pieces hold {k['corpus_long_target_token_share']:.1%} of the corpus's target "
           f"tokens and {e['long_target_token_share']:.1%} of those trained.", "",
           "| source pieces | pairs | times trained, Eole (skipping) | never trained | times trained, nothing skipped |",
           "| --- | ---: | ---: | ---: | ---: |"]
    out += [f"| {a['source_pieces']} | {a['pairs']:,} | {a['times_trained']:.1f} | {a['never']:,} | {b['times_trained']:.1f} |"
            for a, b in zip(e["by_source_length"], n["by_source_length"])]
    return out + [""]


def swap_search() -> str:
    """scripts/swap_search.py records: each side's weights under each side's search, BLEU on the peers' test set."""
    out = []
    for path in sorted(RECORDS.glob("swap_search*.json")):
        r = json.loads(path.read_text())
        cols = [("ours", "greedy", "default"), ("ours", "beam5", "default"), ("ours", "beam5_first", "default"),
                ("eole", "greedy", "default"), ("eole", "beam5", "default"), ("eole", "greedy", "sents:1"),
                ("eole", "beam5", "sents:1")]
        cell = {(x["weights"], x["search"], x["decode"], x["batch"]): x for x in r["rows"]}
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; {r['test_sentences']:,} "
                "sentences, BLEU; Eole's search at its default 30 sentences a batch and at one a batch):", "",
                "| weights | our greedy | our beam 5 | our beam 5, `stop=first` | Eole greedy (30) | Eole beam 5 (30) | "
                "Eole greedy (1) | Eole beam 5 (1) | greedy the same, line for line |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for weights, name in (("ours", "ours (`--ours`)"), ("eole", "Eole 0.6.4 (`--eole`)")):
            same = cell[(weights, "eole", "greedy", "sents:1")].get("same_as_our_greedy")
            out.append(f"| {name} | " + " | ".join(f"{cell[(weights, *c)]['bleu']:.2f}" for c in cols)
                       + f" | {same:.1%} |")
        out.append("")
    return "\n".join(out)


def stream_compare() -> str:
    """scripts/compare_streams.py's record: Eole's own batch stream beside our imitation of it."""
    r = json.loads((RECORDS / "stream_compare.json").read_text())
    rows = [("batches", "batches", "{:,}"), ("target pieces a batch", "target_pieces_per_batch", "{:.1f}"),
            ("distinct source texts a batch of 64", "distinct_sources_per_batch", "{:.2f}"),
            ("distinct batch contents", "distinct_batches", "{:,}")]
    out = [f"`stream_compare.json` ({r['date'][:10]}, {r['commit'][:7]}; {r['corpus_texts']:,} distinct pairs in the "
           f"corpus; batch contents found in both streams: **{r['batches_in_both']:,}**; Spearman of the pairs' "
           f"training counts: {r['pair_count_spearman']:.2f}):", "",
           "| | Eole's stream | our imitation |", "| --- | ---: | ---: |"]
    for label, key, fmt in rows:
        out.append(f"| {label} | {fmt.format(r['eole'][key])} | {fmt.format(r['imitation'][key])} |")
    for label, key in (("a pair trained: mean, std, 10th–90th percentile, most", "pair_counts"),):
        e, i = r["eole"][key], r["imitation"][key]
        out.append(f"| {label} | {e['mean']:.2f}, {e['std']:.2f}, {e['p10']:.0f}–{e['p90']:.0f}, {e['max']} | "
                   f"{i['mean']:.2f}, {i['std']:.2f}, {i['p10']:.0f}–{i['p90']:.0f}, {i['max']} |")
    met = list(r["eole"]["pairs_met_by"])
    out.append(f"| pairs met by batch {', '.join(met)} | {', '.join(f'{v:,}' for v in r['eole']['pairs_met_by'].values())} | "
               f"{', '.join(f'{v:,}' for v in r['imitation']['pairs_met_by'].values())} |")
    out.append(f"| mean source length, windows of 700 batches | {min(r['eole']['source_length_by_window'])}–"
               f"{max(r['eole']['source_length_by_window'])} | {min(r['imitation']['source_length_by_window'])}–"
               f"{max(r['imitation']['source_length_by_window'])} |")
    out.append(f"| batch to next batch, source length correlation | {r['eole']['source_length_lag1_correlation']:.3f} | "
               f"{r['imitation']['source_length_lag1_correlation']:.3f} |")
    out.append(f"| batches between a content's repeats (median) | {r['eole']['repeat_gap_median']:,.0f} | "
               f"{r['imitation']['repeat_gap_median']:,.0f} |")
    return "\n".join(out) + "\n"


def train_step() -> str:
    """scripts/compare_train_step.py records: Eole's updates and ours from the same weights on the same batches."""
    out = []
    for path in sorted(RECORDS.glob("train_step_*.json")):
        r = json.loads(path.read_text())
        ratio = r["eole"]["divisor_over_terms"]
        names = {"ours": "as nmt trains (mean over every term, EOS included)",
                 "ours_eole_divisor": "with Eole's divisor (summed loss / tokens without EOS)"}
        if r.get("dropout"):  # masks differ: the training loss over windows of updates, not the weights
            out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; {r['steps']} updates "
                    f"from Eole's initial weights on the batches Eole's iterator yielded, dropout {r['dropout']} on both "
                    "sides; training cross-entropy per token over each 100 updates):", "",
                    "| updates | Eole | " + " | ".join(f"ours {names[k]}" for k in r["runs"]) + " |",
                    "| --- | ---: |" + " ---: |" * len(r["runs"])]
            for i, e in enumerate(r["eole"]["windows"]):
                out.append(f"| {i * 100 + 1:,}–{(i + 1) * 100:,} | {e:.3f} | "
                           + " | ".join(f"{x['windows'][i]:.3f}" for x in r["runs"].values()) + " |")
            out.append("")
            continue
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; {r['steps']} updates from "
                f"Eole's initial weights on the batches Eole's iterator yielded, dropout 0; Eole's divisor over its loss's "
                f"terms: {min(ratio):.3f}-{max(ratio):.3f}):", "",
                "| our run | loss per token, largest gap to Eole's | at the last update | weights after: median gap "
                "/ Eole's move | largest (tensor) |",
                "| --- | ---: | ---: | ---: | --- |"]
        for label, x in r["runs"].items():
            d = x["distance"]
            out.append(f"| {names.get(label, label)} | {x['ce_gap_max']:.1e} | {x['ce_gap_last']:.1e} | "
                       f"{d['median']:.1e} | {d['max']:.1e} (`{d['worst']}`) |")
        out.append("")
        if "dropout_census" in r:
            c = r["dropout_census"]
            src, tgt = c["batch"][1], c["batch"][2]
            cells = [f"`{x['module']}` {x['calls']}× {x['elements']:,}" for x in c["eole"]["dropout"]]
            cells += [f"`{x['module']}` (inside `nn.LSTM`, {x['num_layers']} layers) p {x['dropout']}" for x in c["eole"]["lstm"]]
            ours = [f"`{x['module']}` {x['calls']}× {x['elements']:,}" for x in c["ours"]]
            out += [f"Dropout in one update at the config's rate, a batch of {c['batch'][0]} sentences of {src} source and "
                    f"{tgt} target positions (module, calls, elements drawn over): Eole {', '.join(cells)}; "
                    f"ours {', '.join(ours)}.", ""]
    return "\n".join(out)


PEERS_RENDERERS: dict[str, Callable[[], str]] = {"decode_side_by_side": decode_side_by_side, "gap_ablation": gap_ablation,
                                                 "swap_search": swap_search, "train_step": train_step,
                                                 "stream_compare": stream_compare, "gap_seeds": gap_seeds}
