"""Renderers of serving.md's figures measured before records were kept (docs/results/history_serve_*.json, each with
date, commit, command or null, machine and source): they give back the doc's own tables and sentences."""

from __future__ import annotations

from collections.abc import Callable

from scripts.records.render_history import commas, listed, load_history, row, span, wrap


def history_serve_bf16() -> str:
    """serving.md, bf16 and fp32 servers under load on the avx512_bf16 EPYC."""
    r = load_history("serve_bf16")
    return wrap(
        f"bf16 under load on {r['machine']} ({r['date']}; {r['setup']}): bf16 {listed(r['bf16_sents_per_s'])} "
        f"sentences/s, fp32 {listed(r['fp32_sents_per_s'])}. {r['errors']} errors, {r['malformed_4xx']} of "
        f"{r['malformed_sent']} malformed requests answered with a 4xx; {span(r['ratio_to_translate'], '.2f')}× of "
        "`translate` in the same precision or in fp32.") + "\n"


def history_serve_clients() -> str:
    """serving.md, more clients (more lines in flight) against the same server."""
    r = load_history("serve_epyc_avx512")
    runs = []
    for i, x in enumerate(r["clients_runs"]):
        ratio = f"{x['ratio']:.2f}×"
        extra = f", {x['batches']} batches, p95 {x['p95_ms']} ms" if "batches" in x else ""
        runs.append(f"{x['clients']} clients {x['sents_per_s']:.1f}{' sentences/s' if i == 0 else ''} "
                    f"({f'**{ratio}**' if x['ratio'] >= 0.7 else ratio}{extra})")
    return wrap(f"The same server and machine ({r['machine']}, {r['date']}), load runs in this order with `--compare`: "
                 + ", ".join(runs) + f". {r['clients_runs_errors']} errors and {r['clients_runs_malformed_4xx']} / "
                 f"{r['clients_runs_malformed_sent']} malformed requests answered with a 4xx in each.") + "\n"


def history_serve_amx() -> str:
    """serving.md, 2026-12-01 on the AMX machine: the first load figures, the batch wait, where the time went."""
    r = load_history("serve_amx")
    f, w, xs = r["first"], r["where_the_time_went"], r["runs"]
    top = max(xs, key=lambda x: x["sents_per_s"])
    rows = ["| `--batch-wait-ms` | connections | sentences/s | p50 ms | p95 ms | p99 ms | errors | malformed → 4xx |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows += [row(x["batch_wait_ms"], x["connections"], f"**{x['sents_per_s']:.1f}**" if x is top else f"{x['sents_per_s']:.1f}",
                  x["p50_ms"], x["p95_ms"], x["p99_ms"], x["errors"], f"{x['malformed_4xx']} / {x['malformed_sent']}")
             for x in xs]
    busy = w["second_openmp_thread_busy_pct"]
    return "\n\n".join([
        wrap(f"First measurement: all {f['sentences']:,} answers in {f['seconds']:.2f} s, **{f['sents_per_s']:.1f} "
              f"sentences/s**, p50 {f['p50_ms']} ms, p95 {f['p95_ms']} ms, p99 {f['p99_ms']} ms. `translate` did "
              f"{f['translate_sents_per_s']:.1f}: **{f['ratio']:.2f}×**. With 32 clients at most 32 one-sentence requests "
              "are ever waiting, so each beam search ran on at most 32 sentences, where `translate --input` sorts and "
              f"batches {f['sentences']:,}."),
        wrap("Later the same day, one run each, in this order (`load_serve.py` now holding one keep-alive connection "
              "per client):"),
        "\n".join(rows),
        wrap(f"`translate` ran at {r['runs_translate_sents_per_s']:.1f} sentences/s in that sitting, so the best "
              f"setting, the default {top['batch_wait_ms']} ms with {top['connections']}, reached **{r['best_ratio']:.2f}×**. "
              "A longer wait makes it worse: the batch cannot exceed 32 sentences anyway, and waiting only adds latency. "
              "The clients share the server's 2 cores."),
        wrap(f"Where the time went, measured on the running server the same day: the event loop used "
              f"{w['event_loop_core_pct']} % of a core and the decode thread was on the CPU "
              f"{span(w['decode_thread_on_cpu_pct'])} % of the run, so HTTP was not what cost. The batch size was. "
              "`translate` decodes the same sentences in chunks of 32 at "
              f"{span(w['translate_chunks_of_32_vs_whole_file'], '.1f')}× of its speed on the whole file. The decode "
              "thread's second OpenMP thread, idle while the answers go out, slept and had to be woken for each parallel "
              f"region (busy {busy['server']} % in the server, {busy['plain_loop']} % when the same batches decode in a "
              "plain loop). In three load-then-`translate` pairs of that sitting the server reached "
              f"{listed(w['pairs_ratio'], '.2f', '×')} ({span(w['pairs_server_sents_per_s'])} against "
              f"{span(w['pairs_translate_sents_per_s'])} sentences/s; p95 {span(w['pairs_p95_ms'])} ms)."),
    ]) + "\n"


def history_serve_openmp() -> str:
    """serving.md, 2026-12-03 on the Xeon: what OpenMP wake-ups cost, and the load runs before and after the fix."""
    r = load_history("serve_openmp")
    m = r["micro"]
    rows = ["| setting | sentences/s | p95 ms | `translate` | × |", "| --- | --- | --- | --- | --- |"]
    rows += [row(x["setting"], commas(x["sents_per_s"]), span(x.get("p95_ms")), span(x.get("translate_sents_per_s")),
                  f"**{span(x['ratio'], '.2f')}×**" if "ratio" in x else "") for x in r["fix_runs"]]
    nohttp = r["without_http_sents_per_s"]
    return "\n\n".join([
        "\n".join([
            wrap(f"An {m['add_elements']}-element add took {m['add_us']['thread']} µs in such a thread against "
                  f"{m['add_us']['main']} µs in the main thread; a log-softmax over {m['log_softmax_scores']} scores "
                  f"{m['log_softmax_us']['thread']} against {m['log_softmax_us']['main']} µs.", True),
            wrap(f"`translate_nbest` on {m['translate_nbest_lines']} dev lines ran {m['translate_nbest_slower_pct']} % "
                  f"slower: {m['translate_nbest_sents_per_s']['thread']} against "
                  f"{span(m['translate_nbest_sents_per_s']['main'])} sentences/s (the same in a thread started before the "
                  "main thread had a team).", True)]),
        wrap("The fix: `nmt.serve` loads on one intra-op thread, and each decoding thread sets its own count when it "
              "starts (`TorchEngine.use_threads`, run by the batcher's thread initializer). Load runs with the 7-minute "
              "local-p model:"),
        "\n".join(rows),
        wrap(f"Without HTTP (32 asyncio clients calling the batcher in one process) one worker did "
              f"{span(nohttp['one_worker'])} sentences/s and two {nohttp['two_workers']}. The clients' HTTP, the event "
              "loop and the two decoding threads' share of one GIL cost the rest."),
    ]) + "\n"


def history_serve_openmp_later() -> str:
    """serving.md, 2026-12-03 on the Xeon, later: one worker against two, and the default's three runs."""
    r = load_history("serve_openmp")
    rows = ["| model | setting | sentences/s | p95 ms |", "| --- | --- | --- | --- |"]
    for x in r["later_runs"]:
        sps = commas(x["sents_per_s"]) + (f" / {commas(x['fp32_sents_per_s'])}" if "fp32_sents_per_s" in x else "")
        rows.append(row(x["model"], x["setting"], sps, span(x.get("p95_ms"))))
    d = r["default_runs"]
    return "\n".join(rows) + "\n\n" + wrap(
        f"So the default became one worker. Three runs of the command above (`--workers 1`, fp32): "
        f"**{listed(d['sents_per_s'], '.1f')} sentences/s**, p50 {span(d['p50_ms'])} ms, p95 {span(d['p95_ms'])} ms, "
        f"p99 {span(d['p99_ms'])} ms, against `translate`'s {listed(d['translate_sents_per_s'])}: "
        f"**{listed(d['ratio'], '.2f', '×')}**, still short of 0.7×.") + "\n"


def history_serve_batch_wait() -> str:
    """serving.md, 2026-12-03 on the Xeon: the batch waits after its thread is free (693c05c), new against old."""
    r = load_history("serve_batch_wait")
    b, p = r["batches"], r["one_process"]
    rows = ["| order | sentences/s | p95 ms | `translate` | × |", "| --- | --- | --- | --- | --- |"]
    for x in r["runs"]:
        tr = commas(x["translate_sents_per_s"]) + f" ({x['translate_note']})" if "translate_sents_per_s" in x else ""
        ratio = ", ".join(f"{v:.2f}×" for v in x.get("ratio", []))
        rows.append(row(x["order"], commas(x["sents_per_s"]), span(x.get("p95_ms")), tr,
                         f"**{ratio}**" if ratio and x["order"].startswith("new") else ratio))
    return "\n\n".join([
        wrap(f"`/health` then counted {b['before']} batches for the {r['requests']:,} one-line requests. The "
              f"{r['clients']} clients had split into two groups of {r['clients'] // 2} taking turns, since a batch started "
              "the moment the thread was free, before the callers it had just answered could send again. Now the batch "
              "waits `--batch-wait-ms` after the thread is free (a test has the answered caller's next line join the one "
              f"that waited): {span(b['after'])} batches."),
        "\n".join(rows),
        wrap(f"What bounds it now is batch size itself: unsorted chunks of {p['unsorted_chunk_lines']} lines decode at "
              f"about {p['unsorted_sents_per_s_about']} sentences/s on this model in one process, sorted batches of about "
              f"{p['sorted_batch_about']} sentences at {span(p['sorted_sents_per_s'])}."),
    ]) + "\n"


def history_serve_epyc_avx2() -> str:
    """serving.md, 2026-12-03 and 12-04 on the AVX2-only EPYC: sorted chunks, drift, the busy share (2023b2e)."""
    r = load_history("serve_epyc_avx2")
    s, d, fm, ld, sm = r["sorted_chunks"], r["drift"], r["fresh_model"], r["load"], r["summary"]
    return "\n\n".join([
        wrap(f"Sorting chunks of {s['lines']} by length first (what a server cannot do) took them from "
              f"{s['unsorted_sents_per_s']} to {s['sorted_sents_per_s']} sentences/s in one process, against "
              f"{s['translate_sents_per_s']} for the whole 1,000 lines in `translate`'s sorted batches: batch size, not the "
              f"tail of unsorted lengths, is most of the gap. The same sitting put this machine's drift at {d['factor']}× "
              f"(an eager server at {d['eager_server_sents_per_s']} sentences/s, {d['ratio']:.2f}× of `translate`'s "
              f"{d['translate_sents_per_s']})."),
        wrap(f"{r['date'].split('/')[1]}, with `/health`'s `decode_s` and `load_serve.py`'s `server_decoding` "
              f"({r['commit'][:7]}): the fresh 7-minute model ({fm['updates']:,} updates, test BLEU {fm['test_bleu']:.2f}) "
              f"served at {span(ld['sents_per_s'])} sentences/s against `translate`'s {span(ld['translate_sents_per_s'])} "
              f"in the same runs (**{listed(ld['ratio'], '.2f', '×')}**), decoding busy {span(ld['server_decoding_pct'])} % "
              f"of the run in {span(ld['batches'])} batches. The same model in one process, unsorted chunks of 32 lines: "
              f"{r['one_process_chunks_of_32_sents_per_s']} sentences/s. A server whose engine only sleeps spends "
              f"{span(r['idle_server_cpu_s'], '.2f')} s of CPU on the 1,000 requests (uvicorn, Starlette, JSON), and the "
              f"{r['clients']} client threads {span(r['client_threads_cpu_s'], '.2f')} s, all on the two cores the "
              "decode's OpenMP team needs. On two cores shared with its clients the server stays near "
              f"{sm['server_near_ratio']}× of `translate`: 32 unsorted lines per batch decode at about "
              f"{sm['chunks_of_32_vs_sorted_about']:.2f}× of `translate`'s sorted batches, and the HTTP on both sides takes "
              f"about {sm['http_cpu_share_about']} of the CPU."),
    ]) + "\n"


def history_serve_epyc_avx512() -> str:
    """serving.md, 2026-12-04 on the avx512_bf16 EPYC: the make-demo model served, and 32-line chunks in one process."""
    r = load_history("serve_epyc_avx512")
    c, w = r["cold"], r["warm"]
    chunks = ", ".join(f"{x['precision']} {x['sents_per_s']} against {x['translate_sents_per_s']}"
                       f"{' sentences/s' if i == 0 else ''} ({x['ratio']:.2f}×)"
                       for i, x in enumerate(r["one_process_chunks_of_32"]))
    return "\n\n".join([
        wrap(f"The {r['model']['name']} (test BLEU {r['model']['test_bleu_beam5']:.2f} beam 5), `--workers "
              f"{r['workers']}`, {r['precision']}. A cold server's first run did {c['sents_per_s']:.1f} sentences/s against "
              f"`translate`'s {c['translate_sents_per_s']:.1f} ({c['ratio']:.2f}×). Warm, three runs with `--compare`: "
              f"{listed(w['sents_per_s'], '.1f')} sentences/s against {listed(w['translate_sents_per_s'], '.1f')}: "
              f"**{listed(w['ratio'], '.2f', '×')}** (p95 {span(w['p95_ms'])} ms, {span(w['batches'])} batches, decoding "
              f"busy {span(w['server_decoding_pct'])} % of the run)."),
        wrap("In one warm process, the 1,000 dev lines in unsorted chunks of 32 against the whole file in `translate`'s "
              f"batches, beam 5, medians of three alternating passes: {chunks}."),
    ]) + "\n"


SERVING_HISTORY: dict[str, Callable[[], str]] = {
    "history_serve_bf16": history_serve_bf16, "history_serve_clients": history_serve_clients,
    "history_serve_amx": history_serve_amx, "history_serve_openmp": history_serve_openmp,
    "history_serve_openmp_later": history_serve_openmp_later, "history_serve_batch_wait": history_serve_batch_wait,
    "history_serve_epyc_avx2": history_serve_epyc_avx2, "history_serve_epyc_avx512": history_serve_epyc_avx512,
}
