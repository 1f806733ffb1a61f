"""Renderers of the records measured beside the peers: side-by-side rounds (docs/results/side_by_side*.json),
decoding sittings from trained models (peer_decode*.json) and the README's table at matched settings (the finished
study of the BLEU gap to Eole renders from the record of its end, gap_study_summary.json)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

RECORDS = Path(__file__).resolve().parents[2] / "docs" / "results"
PEERS = {"eole": "Eole", "onmt": "OpenNMT-py", "joey": "Joey NMT"}
MATCHED = "tokens:8000"  # every side at 8,000 source tokens a decoding batch


def machine(cpu: dict) -> str:
    """A record's CPU as the tables name it: model, cores, the AMX/AVX-512 flags."""
    return f"{cpu['model']}, {cpu['cores']} cores, flags {' '.join(cpu['flags']) or 'none of amx/avx512'}"


def short(cpu: dict) -> str:
    """A record's CPU in a few words: its make and its widest matrix instructions."""
    name = next((w for w in ("Xeon", "EPYC") if w in cpu["model"]), cpu["model"])
    kind = "AMX" if any(f.startswith("amx") for f in cpu["flags"]) else "AVX-512" if "avx512f" in cpu["flags"] else "AVX2"
    return f"{name}, {kind}"


def load(pattern: str) -> list[tuple[str, dict]]:
    """(file name, record) of every record in docs/results/ matching ``pattern``, by name."""
    return [(p.name, json.loads(p.read_text())) for p in sorted(RECORDS.glob(pattern))]


def when(name: str, r: dict) -> str:
    """A record's name, date and commit, as a table's first cell."""
    return f"`{name}` ({r['date'][:10]}, {r['commit'][:7]})"


def pair(ours: float, theirs: float, fmt: str = "{:,.0f}") -> str:
    """Ours / theirs (ours over theirs)."""
    return f"{fmt.format(ours)} / {fmt.format(theirs)} ({ours / theirs:.2f}×)"


def side_by_side() -> str:
    """scripts/peers/side_by_side.py records: ours / the peer's (ratio), medians of the round, a row per batch setting."""
    rows = ["| record | machine | against, decoding batches | training tgt tok/s | peak MB | updates in the budget | "
            "BLEU beam 5 | greedy sent/s | beam 5 `first` sent/s | the same, ours in int8 |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in load("side_by_side*.json"):
        for key in r["keys"]:
            o, t = r["median"][key]["ours"], r["median"][key]["theirs"]
            peer, batch = key.split("@")
            rows.append(f"| {when(name, r)} | {short(r['cpu'])} | {PEERS[peer]}, {batch} | "
                        f"{pair(o['train_tgt_tok_per_s'], t['train_tgt_tok_per_s'])} | "
                        f"{pair(o['peak_rss_mb'], t['peak_rss_mb'])} | "
                        f"{o['budget_steps']:,} / {t['budget_steps']:,} ({r['budget_minutes']:g} min) | "
                        f"{o['bleu_beam5']:.2f} / {t['bleu_beam5']:.2f} | "
                        f"{pair(o['decode_greedy_sents_per_s'], t['decode_greedy_sents_per_s'])} | "
                        f"{pair(o['decode_beam5_first_sents_per_s'], t['decode_beam5_first_sents_per_s'])} | "
                        f"{pair(o['decode_beam5_first_sents_per_s_int8'], t['decode_beam5_first_sents_per_s_int8'])} |")
    return "\n".join(rows) + "\n"


def _speeds(xs: list[dict]) -> list[float]:
    return [x["sents_per_s"] for x in xs]


def against_fastest(r: dict) -> list[dict]:
    """The ratio round by round: ours at each batch setting over the peers' fastest setting (the peer and batch of the
    highest median) in the same round, its median and range; a round's passes are minutes apart, so drift between
    rounds cancels (a per-round maximum over settings would favour the peer)."""
    samples = r["samples"]
    settings = [(b, p) for b, sides in samples.items() for p in PEERS if p in sides]
    out = []
    for batch, sides in samples.items():
        for key, xs in sides["ours"].items():
            name, prec = key.rsplit("_", 1)
            peer_name = name.removesuffix("_first")  # the peers' beam ends at the first finished
            b, p = max(settings, key=lambda s: statistics.median(_speeds(samples[s[0]][s[1]][peer_name])))
            theirs = samples[b][p][peer_name]
            ratios = [x / y for x, y in zip(_speeds(xs), _speeds(theirs))]
            out.append({"precision": prec, "search": name, "batch": batch, "peer": p, "peer_batch": b,
                        "ours": statistics.median(_speeds(xs)), "theirs": statistics.median(_speeds(theirs)),
                        "ratio": statistics.median(ratios), "range": (min(ratios), max(ratios)),
                        "bleu": (xs[0]["bleu"], theirs[0]["bleu"])})
    return out


def decode_side_by_side() -> str:
    """scripts/peers/decode_side_by_side.py records: ours at our faster batch setting over the peers' fastest setting,
    greedy and beam 5 ending at the first finished (the peers' rule), per precision of ours."""
    rows = ["| record | machine | search | ours | ours sent/s (batches) | fastest peer sent/s (setting) | "
            "ratio round by round: median (range) | BLEU ours / peer |", "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"]
    for name, r in load("peer_decode*.json"):
        best: dict[tuple[str, str], dict] = {}
        for x in against_fastest(r):
            k = (x["search"], x["precision"])
            if x["search"] != "beam5" and (k not in best or x["ours"] > best[k]["ours"]):
                best[k] = x
        for (search, prec), x in best.items():
            rows.append(f"| {when(name, r)} | {short(r['cpu'])} | {search} | {prec} | {x['ours']:,.0f} ({x['batch']}) | "
                        f"{x['theirs']:,.0f} ({PEERS[x['peer']]} {x['peer_batch']}) | {x['ratio']:.2f}× "
                        f"({x['range'][0]:.2f}–{x['range'][1]:.2f}) | {x['bleu'][0]:.2f} / {x['bleu'][1]:.2f} |")
    return "\n".join(rows) + "\n"


def readme_peers() -> str:
    """README.md: every side-by-side round at matched decoding batches, ours over the peer's, BLEU at each side's own
    decoding batches where the round has them; the seed caveat."""
    rows = ["| date | machine | against | training tgt tok/s | peak memory | beam 5 sent/s | ours in int8 | "
            "BLEU beam 5, ours / theirs, one run each (its minutes) |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for _, r in sorted(load("side_by_side*.json"), key=lambda x: x[1]["date"]):
        for key in (k for k in r["keys"] if k.endswith(MATCHED)):
            o, t = r["median"][key]["ours"], r["median"][key]["theirs"]
            own = r["median"].get(key.replace(MATCHED, "default"), {}).get("theirs")  # the peer at its own batches
            rows.append(f"| {r['date'][:10]} | {short(r['cpu'])} | {PEERS[key.split('@')[0]]} | "
                        f"{o['train_tgt_tok_per_s'] / t['train_tgt_tok_per_s']:.2f}× | "
                        f"{o['peak_rss_mb'] / t['peak_rss_mb']:.2f}× | "
                        f"{o['decode_beam5_first_sents_per_s'] / t['decode_beam5_first_sents_per_s']:.2f}× | "
                        f"{o['decode_beam5_first_sents_per_s_int8'] / t['decode_beam5_first_sents_per_s_int8']:.2f}× | "
                        f"{o['bleu_beam5']:.2f} / {(own or t)['bleu_beam5']:.2f}{'' if own else ' †'} "
                        f"({r['budget_minutes']:g} min) |")
    gap = json.loads((RECORDS / "gap_ablation.json").read_text())["rows"]
    seed = abs(gap["baseline"]["bleu_beam5"] - gap["seed43"]["bleu_beam5"])
    eole = {x["batch"]: x["peer_bleu"] for x in json.loads((RECORDS / "peer_decode.json").read_text())["rows"]
            if x["peer"] == "eole" and x["search"] == "beam5"}
    return ("\n".join(rows) + f"\n\n† at 8,000-token batches; Eole's batched decoding reads their padding (one checkpoint: "
            f"{eole['default']:.2f} at its default batches, {eole[MATCHED]:.2f} at 8,000 tokens, `peer_decode.json`).\n\n"
            f"Every run used seed 42; a second seed of ours moved beam-5 BLEU by {seed:.2f} (`gap_ablation.json`), so "
            "no BLEU gap here is a lead the seeds support.\n")


PEERS_RENDERERS: dict[str, Callable[[], str]] = {"side_by_side": side_by_side, "decode_side_by_side": decode_side_by_side,
                                                 "readme_peers": readme_peers}
