"""Renderers of the figures measured before records were kept, transcribed from the docs into
docs/results/history_*.json (each with date, commit, command or null, machine and source): they give back the
docs' own tables and sentences (serving.md's: scripts/records/render_serving.py), for scripts/records/render_records.py."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "results"


def load_history(name: str) -> dict:
    """docs/results/history_NAME.json."""
    return json.loads((RECORDS / f"history_{name}.json").read_text(encoding="utf-8"))


def wrap(text: str, bullet: bool = False) -> str:
    """A paragraph (or a list item) wrapped as the docs wrap theirs."""
    return textwrap.fill(text, 100, initial_indent="- " if bullet else "", subsequent_indent="  " if bullet else "",
                         break_long_words=False, break_on_hyphens=False)


def row(*cells: object) -> str:
    """A table row of ``cells`` (an empty string: an empty cell)."""
    return "|" + "".join(f" {c} |" if c != "" else " |" for c in cells)


def span(v: object, f: str = "") -> str:
    """``[a, b]`` as a–b; a single value as itself; None as an empty cell."""
    if v is None:
        return ""
    return "–".join(format(x, f) for x in v) if isinstance(v, list) else format(v, f)


def listed(v: list, f: str = "", unit: str = "") -> str:
    """``[a, b, c]`` as "a, b and c", each formatted by ``f`` and followed by ``unit``."""
    s = [format(x, f) + unit for x in v]
    return ", ".join(s[:-1]) + " and " + s[-1] if len(s) > 1 else s[0]


def commas(v: list) -> str:
    """``[a, b]`` as "a, b"."""
    return ", ".join(str(x) for x in v)


def history_precision() -> str:
    """training.md, why `auto` wants a 50 % gain: bf16 against fp32 on the AMX CPU."""
    r = load_history("precision")
    bb, bf = r["bench_small_15min"]["bf16"], r["bench_small_15min"]["fp32"]
    gb, gf = r["zh_en_global_7min"]["bf16"], r["zh_en_global_7min"]["fp32"]
    a = r["alternating_steps"]
    items = [
        f"The timing itself put bf16 at {span(r['auto_timing_bf16_over_fp32'], '.2f')}× of fp32 from one start to the "
        f"next. One batch timed over and over gave {span(r['one_batch_repeated_bf16_over_fp32'], '.1f')}×. Whole runs "
        "gained little or nothing.",
        f"bench-small for 15 minutes: bf16 {bb['tgt_tok_per_s']:,} vs fp32 {bf['tgt_tok_per_s']:,} target tok/s "
        f"({bb['updates']:,} vs {bf['updates']:,} updates), dev BLEU {bb['dev_bleu']:.2f} vs {bf['dev_bleu']:.2f}, test "
        f"{bb['test_bleu_beam5']:.2f} vs {bf['test_bleu_beam5']:.2f} (beam 5, one seed each), peak memory "
        f"{bb['peak_mb']:,} vs {bf['peak_mb']:,} MB. After 1,000 updates dev perplexity was "
        f"{bb['dev_ppl_after_1000_updates']:.2f} vs {bf['dev_ppl_after_1000_updates']:.2f}.",
        f"`zh_en_global` for its 7 minutes: bf16 {gb['tgt_tok_per_s']:,} vs fp32 {gf['tgt_tok_per_s']:,} tok/s "
        f"({gb['updates']:,} vs {gf['updates']:,} updates), best dev BLEU {gb['best_dev_bleu']:.2f} vs "
        f"{gf['best_dev_bleu']:.2f}.",
        f"In one process, alternating {a['steps_per_turn']} real steps at a time ({a['steps_each']} each): bf16 "
        f"{a['bf16_ms']:.1f} ms a step against fp32 {a['fp32_ms']:.1f}.",
    ]
    head = f"Why not bf16 by default on a CPU. Measured on {r['machine']} ({r['date']}):\n\n"
    return head + "\n".join(wrap(i, True) for i in items) + "\n"


def history_compile() -> str:
    """training.md, trainer.compile=true against the eager step."""
    r = load_history("compile")
    c, e = r["compiled_tgt_tok_per_s"], r["eager_tgt_tok_per_s"]
    return wrap(f"On the same {r['batches']} Tatoeba batches it trained at {c:,} target tokens/s against {e:,} eager "
                 f"(+{round(100 * (c / e - 1))} %), after {r['compile_s']} s of compiling instead of "
                 f"{r['eager_warmup_s']} s of warm-up.") + "\n"


def history_recipes() -> str:
    """training.md, the results of the recipes, and the fresh clones' wall time."""
    r = load_history("recipes")
    rows = ["| run | command | updates | train tgt tok/s | peak RSS | dev BLEU greedy | dev BLEU beam 5 (chrF) | "
            "test BLEU beam 5 (chrF) |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for x in r["rows"]:
        dev5 = f"**{x['dev_bleu_beam5']:.2f}** ({x['dev_chrf_beam5']:.2f})" if x["dev_bleu_beam5"] is not None else "—"
        rows.append(row(x["run"], f"`{x['command']}`", f"{x['updates']:,}", f"{x['tgt_tok_per_s']:,}",
                         f"{x['peak_rss_mb']:,} MB", f"{x['dev_bleu_greedy']:.2f}", dev5,
                         f"{x['test_bleu_beam5']:.2f} ({x['test_chrf_beam5']:.2f})"))
    walls = [f"{x['wall_s_with_install'] // 60} min {x['wall_s_with_install'] % 60} s on the fresh clone of {x['commit'][:7]}"
             for x in r["rows"] if "wall_s_with_install" in x]
    return "\n".join(rows) + "\n\n" + wrap("In all, the install included (warm pip cache), `make demo` took "
                                            + listed(walls) + ".") + "\n"


def history_recipe_sweep() -> str:
    """training.md, the sweep that chose the recipe."""
    xs = load_history("recipe_sweep")["rows"]
    best = {k: max(x[k] for x in xs) for k in ("dev_bleu_greedy", "test_bleu_beam5")}

    def bold(x: dict, k: str) -> str:
        return f"**{x[k]:.2f}**" if x[k] == best[k] else f"{x[k]:.2f}"

    rows = ["| overrides on the old `zh_en_local_p` (7 min) | steps | train tgt tok/s | dev BLEU greedy | dev chrF | dev ppl | "
            "test BLEU beam 5 | test chrF |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [row(x["overrides"], f"{x['steps']:,}", f"{x['tgt_tok_per_s']:,}", bold(x, "dev_bleu_greedy"),
                  f"{x['dev_chrf']:.2f}", f"{x['dev_ppl']:.2f}", bold(x, "test_bleu_beam5"), f"{x['test_chrf']:.2f}")
             for x in xs]
    return "\n".join(rows) + "\n"


def history_input_feeding() -> str:
    """training.md, bench-small with and without input feeding."""
    r = load_history("input_feeding")
    w, f = r["without"], r["with"]
    return wrap(
        "Without input feeding (`model.input_feeding=false`: the decoder is one oneDNN LSTM call over the target, "
        f"attention one batched matmul) bench-small trains at {w['tgt_tok_per_s']:,} target tokens/s against "
        f"{f['tgt_tok_per_s']:,} with it (same sitting, `scripts/bench/benchmark.py … model.input_feeding=false`, "
        f"{w['tgt_tok_per_s'] / f['tgt_tok_per_s']:.2f}×; the oneDNN LSTM backward is most of its step). In the "
        f"15-minute budget it made {w['updates_15min']:,} updates against {f['updates_15min']:,} and reached dev BLEU "
        f"{w['dev_bleu_greedy']:.2f} greedy against {f['dev_bleu_greedy']:.2f}. At this scale input feeding costs more "
        "in speed than it gives in quality. At equal steps the two are within a point: "
        f"{w['dev_bleu_at_step_5000']:.2f} against {f['dev_bleu_at_step_5000']:.2f} at step 5,000. Peak memory "
        f"{w['peak_mb']:,} MB.") + "\n"


def history_attention() -> str:
    """attention.md, Table 4 on Tatoeba: scripts/quality/compare_attention.py's own rows, in its own table."""
    from scripts.quality.compare_attention import table

    r = load_history("attention")
    rows = [json.loads(line) for line in (REPO / r["runs"]).read_text(encoding="utf-8").splitlines() if line.strip()]
    return (wrap(f"Measured on {r['date']} ({r['machine']}), {r['wall_minutes']} minutes for the {len(rows)} runs:")
            + "\n\n" + "\n".join(table(rows, r["paper_table4"])) + "\n")


def history_attention_local() -> str:
    """attention.md, scripts/bench/benchmark_local.py (retired): step time of global and local attention by source length."""
    rows = ["| source length | global s/step | local-m | local-p | local-p gathered | local-p / global |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [row(x["length"], f"{x['global_s']:.3f}", f"{x['local_m_s']:.3f}", f"{x['local_p_s']:.3f}",
                  f"{x['local_p_gathered_s']:.3f}", f"{x['local_p_over_global']:.2f}")
             for x in load_history("attention_local")["rows"]]
    return "\n".join(rows) + "\n"


def history_data_prepare() -> str:
    """data.md, scripts/bench/benchmark_data.py: preparing 1M and 2M pairs, and what the difference says."""
    r = load_history("data_prepare")
    rows = ["| pairs | prepare | pairs/s | peak memory | of it anon | cached restart | its memory (anon) | "
            "one epoch's batch order |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [row(f"{x['pairs']:,}", f"{x['prepare_s']} s", f"{x['pairs_per_s']:,}", f"{x['peak_mb']:,} MB",
                  f"{x['peak_anon_mb']:,} MB", f"{x['cached_restart_s']:.2f} s",
                  f"{x['restart_mb']:,} MB ({x['restart_anon_mb']})", f"{x['epoch_order_s']:.1f} s") for x in r["rows"]]
    a, b = r["rows"]
    millions = (b["pairs"] - a["pairs"]) / 1e6
    peak, train, per_million = (b["peak_anon_mb"] - a["peak_anon_mb"], b["restart_anon_mb"] - a["restart_anon_mb"],
                                round((b["prepare_s"] - a["prepare_s"]) / millions))
    items = [
        f"Twice the corpus costs {peak} MB more at the peak of preparation (about {round(peak / millions)} bytes a pair: "
        f"length, hash-bucket and index arrays; the text itself is never held) and {train} MB more in training (the "
        "length arrays and an epoch's order).",
        f"Sentencepiece on the sample takes about {r['sentencepiece_s_about']} s of each preparation whatever the corpus "
        "size, which is why pairs/s grows with it.",
        "The per-pair work (checking, Arrow copy, cleaning, encoding, writing) adds about "
        f"{per_million} s per million pairs, i.e. {1e6 / per_million:,.0f} pairs/s on the two cores.",
    ]
    return "\n".join(rows) + "\n\n" + "\n".join(wrap(i, True) for i in items) + "\n"



def history_like_for_like() -> str:
    """benchmarks.md, the first like-for-like sittings (issue 39's figures): every side at 8,000-token batches."""
    r = load_history("like_for_like")
    o, e = r["onmt"], r["eole"]
    lines = [row("figure", "nmt", o["peer"], f"nmt / {o['peer'].split()[0]}"), "| --- | ---: | ---: | ---: |"]
    lines += [row(x["figure"], f"{x['nmt']:,}", f"{x['peer']:,}", f"{x['ratio_as_written']:.2f}×") for x in o["rows"]]
    t, g, b = e["rows"]
    lines += ["", wrap(f"In a second sitting against {e['peer']} (same machine): training {t['nmt']:,} against "
                        f"{t['peer']:,} target tokens/s ({t['ratio_as_written']:.2f}×), greedy {g['nmt']:,} against "
                        f"{g['peer']:,} sentences/s, beam 5 {b['nmt']:,} against {b['peer']:,}.")]
    return "\n".join(lines) + "\n"


HISTORY: dict[str, Callable[[], str]] = {
    "history_precision": history_precision, "history_compile": history_compile, "history_recipes": history_recipes,
    "history_recipe_sweep": history_recipe_sweep, "history_input_feeding": history_input_feeding,
    "history_attention": history_attention, "history_attention_local": history_attention_local,
    "history_data_prepare": history_data_prepare, "history_like_for_like": history_like_for_like,
}
