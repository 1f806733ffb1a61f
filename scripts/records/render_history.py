"""Renderers of the figures measured before records were kept, transcribed from the docs into
docs/results/history_*.json (each with date, commit, command or null, machine and source): they give back the
docs' own tables and sentences. ``scripts/records/render_records.py`` uses them beside its own."""

from __future__ import annotations

import json
import statistics
import textwrap
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "results"


def _history(name: str) -> dict:
    return json.loads((RECORDS / f"history_{name}.json").read_text(encoding="utf-8"))


def _wrap(text: str, bullet: bool = False) -> str:
    """A paragraph (or a list item) wrapped as the docs wrap theirs."""
    return textwrap.fill(text, 100, initial_indent="- " if bullet else "", subsequent_indent="  " if bullet else "",
                         break_long_words=False, break_on_hyphens=False)


def _row(*cells: object) -> str:
    return "|" + "".join(f" {c} |" if c != "" else " |" for c in cells)


def _span(v: object, f: str = "") -> str:
    """``[a, b]`` as a–b; a single value as itself; None as an empty cell."""
    if v is None:
        return ""
    return "–".join(format(x, f) for x in v) if isinstance(v, list) else format(v, f)


def _and(v: list, f: str = "", unit: str = "") -> str:
    s = [format(x, f) + unit for x in v]
    return ", ".join(s[:-1]) + " and " + s[-1] if len(s) > 1 else s[0]


def _commas(v: list) -> str:
    return ", ".join(str(x) for x in v)


def history_precision() -> str:
    """training.md, why `auto` wants a 50 % gain: bf16 against fp32 on the AMX CPU."""
    r = _history("precision")
    bb, bf = r["bench_small_15min"]["bf16"], r["bench_small_15min"]["fp32"]
    gb, gf = r["zh_en_global_7min"]["bf16"], r["zh_en_global_7min"]["fp32"]
    a = r["alternating_steps"]
    items = [
        f"The timing itself put bf16 at {_span(r['auto_timing_bf16_over_fp32'], '.2f')}× of fp32 from one start to the "
        f"next. One batch timed over and over gave {_span(r['one_batch_repeated_bf16_over_fp32'], '.1f')}×. Whole runs "
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
    return head + "\n".join(_wrap(i, True) for i in items) + "\n"


def history_compile() -> str:
    """training.md, trainer.compile=true against the eager step."""
    r = _history("compile")
    c, e = r["compiled_tgt_tok_per_s"], r["eager_tgt_tok_per_s"]
    return _wrap(f"On the same {r['batches']} Tatoeba batches it trained at {c:,} target tokens/s against {e:,} eager "
                 f"(+{round(100 * (c / e - 1))} %), after {r['compile_s']} s of compiling instead of "
                 f"{r['eager_warmup_s']} s of warm-up.") + "\n"


def history_recipes() -> str:
    """training.md, the results of the recipes, and the fresh clones' wall time."""
    r = _history("recipes")
    rows = ["| run | command | updates | train tgt tok/s | peak RSS | dev BLEU greedy | dev BLEU beam 5 (chrF) | "
            "test BLEU beam 5 (chrF) |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for x in r["rows"]:
        dev5 = f"**{x['dev_bleu_beam5']:.2f}** ({x['dev_chrf_beam5']:.2f})" if x["dev_bleu_beam5"] is not None else "—"
        rows.append(_row(x["run"], f"`{x['command']}`", f"{x['updates']:,}", f"{x['tgt_tok_per_s']:,}",
                         f"{x['peak_rss_mb']:,} MB", f"{x['dev_bleu_greedy']:.2f}", dev5,
                         f"{x['test_bleu_beam5']:.2f} ({x['test_chrf_beam5']:.2f})"))
    walls = [f"{x['wall_s_with_install'] // 60} min {x['wall_s_with_install'] % 60} s on the fresh clone of {x['commit'][:7]}"
             for x in r["rows"] if "wall_s_with_install" in x]
    return "\n".join(rows) + "\n\n" + _wrap("In all, the install included (warm pip cache), `make demo` took "
                                            + _and(walls) + ".") + "\n"


def history_recipe_sweep() -> str:
    """training.md, the sweep that chose the recipe."""
    xs = _history("recipe_sweep")["rows"]
    best = {k: max(x[k] for x in xs) for k in ("dev_bleu_greedy", "test_bleu_beam5")}

    def bold(x: dict, k: str) -> str:
        return f"**{x[k]:.2f}**" if x[k] == best[k] else f"{x[k]:.2f}"

    rows = ["| overrides on the old `zh_en_local_p` (7 min) | steps | train tgt tok/s | dev BLEU greedy | dev chrF | dev ppl | "
            "test BLEU beam 5 | test chrF |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [_row(x["overrides"], f"{x['steps']:,}", f"{x['tgt_tok_per_s']:,}", bold(x, "dev_bleu_greedy"),
                  f"{x['dev_chrf']:.2f}", f"{x['dev_ppl']:.2f}", bold(x, "test_bleu_beam5"), f"{x['test_chrf']:.2f}")
             for x in xs]
    return "\n".join(rows) + "\n"


def history_input_feeding() -> str:
    """training.md, bench-small with and without input feeding."""
    r = _history("input_feeding")
    w, f = r["without"], r["with"]
    return _wrap(
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
    """attention.md, Table 4 on Tatoeba: scripts/quality/compare_attention.py's rows, grouped by variant as its table() does."""
    r = _history("attention")
    groups: dict[str, list[dict]] = {}
    for line in (REPO / r["runs"]).read_text(encoding="utf-8").splitlines():
        if line.strip():
            x = json.loads(line)
            groups.setdefault(x["variant"], []).append(x)

    def mean(rs: list[dict], k: str, digits: int = 2) -> float:
        return round(statistics.fmean(x[k] for x in rs), digits)

    def seeds(rs: list[dict], k: str) -> str:
        each = f" ({' / '.join(f'{x[k]:.2f}' for x in rs)})" if len(rs) > 1 else ""
        return f"{mean(rs, k):.2f}{each}"

    def spread(rs: list[dict], k: str) -> str:
        return f"{max(x[k] for x in rs) - min(x[k] for x in rs):.2f}"

    rows = ["| variant | dev BLEU | test BLEU | seed spread dev / test | dev chrF | test chrF | dev ppl | params | updates | "
            "train tgt tok/s | decode sent/s | paper (Table 4) |", "| --- |" + " ---: |" * 10 + " --- |"]
    for name, rs in sorted(groups.items(), key=lambda kv: -mean(kv[1], "dev_bleu")):
        rs = sorted(rs, key=lambda x: x["seed"])
        rows.append(_row(
            f"`{name}`", seeds(rs, "dev_bleu"), seeds(rs, "test_bleu"),
            f"{spread(rs, 'dev_bleu')} / {spread(rs, 'test_bleu')}" if len(rs) > 1 else "one seed",
            f"{mean(rs, 'dev_chrf'):.2f}", f"{mean(rs, 'test_chrf'):.2f}", f"{mean(rs, 'dev_ppl'):.2f}",
            f"{rs[0]['parameters']:,}", f"{round(mean(rs, 'updates', 0)):,}", f"{round(mean(rs, 'train_tgt_tok_per_s', 0)):,}",
            f"{mean(rs, 'decode_sents_per_s', 1):,.1f}", r["paper_table4"].get(name, "–")))
    runs = sum(len(rs) for rs in groups.values())
    return (_wrap(f"Measured on {r['date']} ({r['machine']}), {r['wall_minutes']} minutes for the {runs} runs:")
            + "\n\n" + "\n".join(rows) + "\n")


def history_attention_local() -> str:
    """attention.md, scripts/bench/benchmark_local.py: step time of global and local attention by source length."""
    rows = ["| source length | global s/step | local-m | local-p | local-p gathered | local-p / global |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [_row(x["length"], f"{x['global_s']:.3f}", f"{x['local_m_s']:.3f}", f"{x['local_p_s']:.3f}",
                  f"{x['local_p_gathered_s']:.3f}", f"{x['local_p_over_global']:.2f}")
             for x in _history("attention_local")["rows"]]
    return "\n".join(rows) + "\n"


def history_data_prepare() -> str:
    """data.md, scripts/bench/benchmark_data.py: preparing 1M and 2M pairs, and what the difference says."""
    r = _history("data_prepare")
    rows = ["| pairs | prepare | pairs/s | peak memory | of it anon | cached restart | its memory (anon) | "
            "one epoch's batch order |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [_row(f"{x['pairs']:,}", f"{x['prepare_s']} s", f"{x['pairs_per_s']:,}", f"{x['peak_mb']:,} MB",
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
    return "\n".join(rows) + "\n\n" + "\n".join(_wrap(i, True) for i in items) + "\n"


def history_serve_bf16() -> str:
    """serving.md, bf16 and fp32 servers under load on the avx512_bf16 EPYC."""
    r = _history("serve_bf16")
    return _wrap(
        f"bf16 under load on {r['machine']} ({r['date']}; {r['setup']}): bf16 {_and(r['bf16_sents_per_s'])} "
        f"sentences/s, fp32 {_and(r['fp32_sents_per_s'])}. {r['errors']} errors, {r['malformed_4xx']} of "
        f"{r['malformed_sent']} malformed requests answered with a 4xx; {_span(r['ratio_to_translate'], '.2f')}× of "
        "`translate` in the same precision or in fp32.") + "\n"


def history_serve_clients() -> str:
    """serving.md, more clients (more lines in flight) against the same server."""
    r = _history("serve_epyc_avx512")
    runs = []
    for i, x in enumerate(r["clients_runs"]):
        ratio = f"{x['ratio']:.2f}×"
        extra = f", {x['batches']} batches, p95 {x['p95_ms']} ms" if "batches" in x else ""
        runs.append(f"{x['clients']} clients {x['sents_per_s']:.1f}{' sentences/s' if i == 0 else ''} "
                    f"({f'**{ratio}**' if x['ratio'] >= 0.7 else ratio}{extra})")
    return _wrap(f"The same server and machine ({r['machine']}, {r['date']}), load runs in this order with `--compare`: "
                 + ", ".join(runs) + f". {r['clients_runs_errors']} errors and {r['clients_runs_malformed_4xx']} / "
                 f"{r['clients_runs_malformed_sent']} malformed requests answered with a 4xx in each.") + "\n"


def history_serve_amx() -> str:
    """serving.md, 2026-12-01 on the AMX machine: the first load figures, the batch wait, where the time went."""
    r = _history("serve_amx")
    f, w, xs = r["first"], r["where_the_time_went"], r["runs"]
    top = max(xs, key=lambda x: x["sents_per_s"])
    rows = ["| `--batch-wait-ms` | connections | sentences/s | p50 ms | p95 ms | p99 ms | errors | malformed → 4xx |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [_row(x["batch_wait_ms"], x["connections"], f"**{x['sents_per_s']:.1f}**" if x is top else f"{x['sents_per_s']:.1f}",
                  x["p50_ms"], x["p95_ms"], x["p99_ms"], x["errors"], f"{x['malformed_4xx']} / {x['malformed_sent']}")
             for x in xs]
    busy = w["second_openmp_thread_busy_pct"]
    return "\n\n".join([
        _wrap(f"First measurement: all {f['sentences']:,} answers in {f['seconds']:.2f} s, **{f['sents_per_s']:.1f} "
              f"sentences/s**, p50 {f['p50_ms']} ms, p95 {f['p95_ms']} ms, p99 {f['p99_ms']} ms. `translate` did "
              f"{f['translate_sents_per_s']:.1f}: **{f['ratio']:.2f}×**. With 32 clients at most 32 one-sentence requests "
              "are ever waiting, so each beam search ran on at most 32 sentences, where `translate --input` sorts and "
              f"batches {f['sentences']:,}."),
        _wrap("Later the same day, one run each, in this order (`load_serve.py` now holding one keep-alive connection "
              "per client):"),
        "\n".join(rows),
        _wrap(f"`translate` ran at {r['runs_translate_sents_per_s']:.1f} sentences/s in that sitting, so the best "
              f"setting, the default {top['batch_wait_ms']} ms with {top['connections']}, reached **{r['best_ratio']:.2f}×**. "
              "A longer wait makes it worse: the batch cannot exceed 32 sentences anyway, and waiting only adds latency. "
              "The clients share the server's 2 cores."),
        _wrap(f"Where the time went, measured on the running server the same day: the event loop used "
              f"{w['event_loop_core_pct']} % of a core and the decode thread was on the CPU "
              f"{_span(w['decode_thread_on_cpu_pct'])} % of the run, so HTTP was not what cost. The batch size was. "
              "`translate` decodes the same sentences in chunks of 32 at "
              f"{_span(w['translate_chunks_of_32_vs_whole_file'], '.1f')}× of its speed on the whole file. The decode "
              "thread's second OpenMP thread, idle while the answers go out, slept and had to be woken for each parallel "
              f"region (busy {busy['server']} % in the server, {busy['plain_loop']} % when the same batches decode in a "
              "plain loop). In three load-then-`translate` pairs of that sitting the server reached "
              f"{_and(w['pairs_ratio'], '.2f', '×')} ({_span(w['pairs_server_sents_per_s'])} against "
              f"{_span(w['pairs_translate_sents_per_s'])} sentences/s; p95 {_span(w['pairs_p95_ms'])} ms)."),
    ]) + "\n"


def history_serve_openmp() -> str:
    """serving.md, 2026-12-03 on the Xeon: what OpenMP wake-ups cost, and the load runs before and after the fix."""
    r = _history("serve_openmp")
    m = r["micro"]
    rows = ["| setting | sentences/s | p95 ms | `translate` | × |", "| --- | --- | --- | --- | --- |"]
    rows += [_row(x["setting"], _commas(x["sents_per_s"]), _span(x.get("p95_ms")), _span(x.get("translate_sents_per_s")),
                  f"**{_span(x['ratio'], '.2f')}×**" if "ratio" in x else "") for x in r["fix_runs"]]
    nohttp = r["without_http_sents_per_s"]
    return "\n\n".join([
        "\n".join([
            _wrap(f"An {m['add_elements']}-element add took {m['add_us']['thread']} µs in such a thread against "
                  f"{m['add_us']['main']} µs in the main thread; a log-softmax over {m['log_softmax_scores']} scores "
                  f"{m['log_softmax_us']['thread']} against {m['log_softmax_us']['main']} µs.", True),
            _wrap(f"`translate_nbest` on {m['translate_nbest_lines']} dev lines ran {m['translate_nbest_slower_pct']} % "
                  f"slower: {m['translate_nbest_sents_per_s']['thread']} against "
                  f"{_span(m['translate_nbest_sents_per_s']['main'])} sentences/s (the same in a thread started before the "
                  "main thread had a team).", True)]),
        _wrap("The fix: `nmt.serve` loads on one intra-op thread, and each decoding thread sets its own count when it "
              "starts (`TorchEngine.use_threads`, run by the batcher's thread initializer). Load runs with the 7-minute "
              "local-p model:"),
        "\n".join(rows),
        _wrap(f"Without HTTP (32 asyncio clients calling the batcher in one process) one worker did "
              f"{_span(nohttp['one_worker'])} sentences/s and two {nohttp['two_workers']}. The clients' HTTP, the event "
              "loop and the two decoding threads' share of one GIL cost the rest."),
    ]) + "\n"


def history_serve_openmp_later() -> str:
    """serving.md, 2026-12-03 on the Xeon, later: one worker against two, and the default's three runs."""
    r = _history("serve_openmp")
    rows = ["| model | setting | sentences/s | p95 ms |", "| --- | --- | --- | --- |"]
    for x in r["later_runs"]:
        sps = _commas(x["sents_per_s"]) + (f" / {_commas(x['fp32_sents_per_s'])}" if "fp32_sents_per_s" in x else "")
        rows.append(_row(x["model"], x["setting"], sps, _span(x.get("p95_ms"))))
    d = r["default_runs"]
    return "\n".join(rows) + "\n\n" + _wrap(
        f"So the default became one worker. Three runs of the command above (`--workers 1`, fp32): "
        f"**{_and(d['sents_per_s'], '.1f')} sentences/s**, p50 {_span(d['p50_ms'])} ms, p95 {_span(d['p95_ms'])} ms, "
        f"p99 {_span(d['p99_ms'])} ms, against `translate`'s {_and(d['translate_sents_per_s'])}: "
        f"**{_and(d['ratio'], '.2f', '×')}**, still short of 0.7×.") + "\n"


def history_serve_batch_wait() -> str:
    """serving.md, 2026-12-03 on the Xeon: the batch waits after its thread is free (693c05c), new against old."""
    r = _history("serve_batch_wait")
    b, p = r["batches"], r["one_process"]
    rows = ["| order | sentences/s | p95 ms | `translate` | × |", "| --- | --- | --- | --- | --- |"]
    for x in r["runs"]:
        tr = _commas(x["translate_sents_per_s"]) + f" ({x['translate_note']})" if "translate_sents_per_s" in x else ""
        ratio = ", ".join(f"{v:.2f}×" for v in x.get("ratio", []))
        rows.append(_row(x["order"], _commas(x["sents_per_s"]), _span(x.get("p95_ms")), tr,
                         f"**{ratio}**" if ratio and x["order"].startswith("new") else ratio))
    return "\n\n".join([
        _wrap(f"`/health` then counted {b['before']} batches for the {r['requests']:,} one-line requests. The "
              f"{r['clients']} clients had split into two groups of {r['clients'] // 2} taking turns, since a batch started "
              "the moment the thread was free, before the callers it had just answered could send again. Now the batch "
              "waits `--batch-wait-ms` after the thread is free (a test has the answered caller's next line join the one "
              f"that waited): {_span(b['after'])} batches."),
        "\n".join(rows),
        _wrap(f"What bounds it now is batch size itself: unsorted chunks of {p['unsorted_chunk_lines']} lines decode at "
              f"about {p['unsorted_sents_per_s_about']} sentences/s on this model in one process, sorted batches of about "
              f"{p['sorted_batch_about']} sentences at {_span(p['sorted_sents_per_s'])}."),
    ]) + "\n"


def history_serve_epyc_avx2() -> str:
    """serving.md, 2026-12-03 and 12-04 on the AVX2-only EPYC: sorted chunks, drift, the busy share (2023b2e)."""
    r = _history("serve_epyc_avx2")
    s, d, fm, ld, sm = r["sorted_chunks"], r["drift"], r["fresh_model"], r["load"], r["summary"]
    return "\n\n".join([
        _wrap(f"Sorting chunks of {s['lines']} by length first (what a server cannot do) took them from "
              f"{s['unsorted_sents_per_s']} to {s['sorted_sents_per_s']} sentences/s in one process, against "
              f"{s['translate_sents_per_s']} for the whole 1,000 lines in `translate`'s sorted batches: batch size, not the "
              f"tail of unsorted lengths, is most of the gap. The same sitting put this machine's drift at {d['factor']}× "
              f"(an eager server at {d['eager_server_sents_per_s']} sentences/s, {d['ratio']:.2f}× of `translate`'s "
              f"{d['translate_sents_per_s']})."),
        _wrap(f"{r['date'].split('/')[1]}, with `/health`'s `decode_s` and `load_serve.py`'s `server_decoding` "
              f"({r['commit'][:7]}): the fresh 7-minute model ({fm['updates']:,} updates, test BLEU {fm['test_bleu']:.2f}) "
              f"served at {_span(ld['sents_per_s'])} sentences/s against `translate`'s {_span(ld['translate_sents_per_s'])} "
              f"in the same runs (**{_and(ld['ratio'], '.2f', '×')}**), decoding busy {_span(ld['server_decoding_pct'])} % "
              f"of the run in {_span(ld['batches'])} batches. The same model in one process, unsorted chunks of 32 lines: "
              f"{r['one_process_chunks_of_32_sents_per_s']} sentences/s. A server whose engine only sleeps spends "
              f"{_span(r['idle_server_cpu_s'], '.2f')} s of CPU on the 1,000 requests (uvicorn, Starlette, JSON), and the "
              f"{r['clients']} client threads {_span(r['client_threads_cpu_s'], '.2f')} s, all on the two cores the "
              "decode's OpenMP team needs. On two cores shared with its clients the server stays near "
              f"{sm['server_near_ratio']}× of `translate`: 32 unsorted lines per batch decode at about "
              f"{sm['chunks_of_32_vs_sorted_about']:.2f}× of `translate`'s sorted batches, and the HTTP on both sides takes "
              f"about {sm['http_cpu_share_about']} of the CPU."),
    ]) + "\n"


def history_serve_epyc_avx512() -> str:
    """serving.md, 2026-12-04 on the avx512_bf16 EPYC: the make-demo model served, and 32-line chunks in one process."""
    r = _history("serve_epyc_avx512")
    c, w = r["cold"], r["warm"]
    chunks = ", ".join(f"{x['precision']} {x['sents_per_s']} against {x['translate_sents_per_s']}"
                       f"{' sentences/s' if i == 0 else ''} ({x['ratio']:.2f}×)"
                       for i, x in enumerate(r["one_process_chunks_of_32"]))
    return "\n\n".join([
        _wrap(f"The {r['model']['name']} (test BLEU {r['model']['test_bleu_beam5']:.2f} beam 5), `--workers "
              f"{r['workers']}`, {r['precision']}. A cold server's first run did {c['sents_per_s']:.1f} sentences/s against "
              f"`translate`'s {c['translate_sents_per_s']:.1f} ({c['ratio']:.2f}×). Warm, three runs with `--compare`: "
              f"{_and(w['sents_per_s'], '.1f')} sentences/s against {_and(w['translate_sents_per_s'], '.1f')}: "
              f"**{_and(w['ratio'], '.2f', '×')}** (p95 {_span(w['p95_ms'])} ms, {_span(w['batches'])} batches, decoding "
              f"busy {_span(w['server_decoding_pct'])} % of the run)."),
        _wrap("In one warm process, the 1,000 dev lines in unsorted chunks of 32 against the whole file in `translate`'s "
              f"batches, beam 5, medians of three alternating passes: {chunks}."),
    ]) + "\n"



HISTORY: dict[str, Callable[[], str]] = {
    "history_precision": history_precision, "history_compile": history_compile, "history_recipes": history_recipes,
    "history_recipe_sweep": history_recipe_sweep, "history_input_feeding": history_input_feeding,
    "history_attention": history_attention, "history_attention_local": history_attention_local,
    "history_data_prepare": history_data_prepare, "history_serve_bf16": history_serve_bf16,
    "history_serve_clients": history_serve_clients, "history_serve_amx": history_serve_amx,
    "history_serve_openmp": history_serve_openmp, "history_serve_openmp_later": history_serve_openmp_later,
    "history_serve_batch_wait": history_serve_batch_wait, "history_serve_epyc_avx2": history_serve_epyc_avx2,
    "history_serve_epyc_avx512": history_serve_epyc_avx512,
}


def history_like_for_like() -> str:
    """benchmarks.md, the first like-for-like sittings (issue 39's figures): every side at 8,000-token batches."""
    r = _history("like_for_like")
    o, e = r["onmt"], r["eole"]
    lines = [_row("figure", "nmt", o["peer"], f"nmt / {o['peer'].split()[0]}"), "| --- | ---: | ---: | ---: |"]
    lines += [_row(x["figure"], f"{x['nmt']:,}", f"{x['peer']:,}", f"{x['ratio_as_written']:.2f}×") for x in o["rows"]]
    t, g, b = e["rows"]
    lines += ["", _wrap(f"In a second sitting against {e['peer']} (same machine): training {t['nmt']:,} against "
                        f"{t['peer']:,} target tokens/s ({t['ratio_as_written']:.2f}×), greedy {g['nmt']:,} against "
                        f"{g['peer']:,} sentences/s, beam 5 {b['nmt']:,} against {b['peer']:,}.")]
    return "\n".join(lines) + "\n"


HISTORY["history_like_for_like"] = history_like_for_like
