"""``nmt.evaluate``'s search settings (``--beta``, ``--stop``) and ``--by-length`` (BLEU and chrF per source-length
bucket: the table, the JSON rows, the PNG), through the real command line on the shared tiny run (``trained_run`` in
conftest.py), and ``nmt.metrics.by_length`` on text alone."""

from __future__ import annotations

import json

import pytest
from sacrebleu.metrics import BLEU, CHRF

from nmt.metrics import bucket_label, by_length, score

REFS = ["the cat sat on the mat", "a dog ran in the park today", "we will go to the station tomorrow morning",
        "it is raining", "she reads a book every night before bed", "the library is inside the school",
        "thank you very much", "he lives in a small town near the sea"]
HYPS = ["the cat sat on a mat", "a dog runs in the park", "we go to the station tomorrow", "it rains",
        "she reads books every night", "the library is in the school", "thanks a lot", "he lives in a town by the sea"]
LENGTHS = [3, 7, 12, 2, 9, 25, 4, 11]  # source lengths of the lines above


def test_buckets_hold_every_line_once_and_score_like_sacrebleu_on_their_lines():
    buckets = by_length(HYPS, [REFS], LENGTHS, (5, 10, 20))
    assert [(b.bucket, b.sentences) for b in buckets] == [("1-5", 3), ("6-10", 2), ("11-20", 2), ("21+", 1)]
    members = {"1-5": [0, 3, 6], "6-10": [1, 4], "11-20": [2, 7], "21+": [5]}
    for b in buckets:
        hyps, refs = [HYPS[i] for i in members[b.bucket]], [[REFS[i] for i in members[b.bucket]]]
        assert b.bleu == BLEU(tokenize="13a").corpus_score(hyps, refs).score
        assert b.chrf == CHRF().corpus_score(hyps, refs).score
    assert len({b.bleu for b in buckets}) > 1  # the buckets score differently: no constant passes


def test_one_bucket_gives_the_whole_sets_scores_and_empty_buckets_are_left_out():
    whole = score(HYPS, [REFS])
    (only,) = by_length(HYPS, [REFS], LENGTHS, (30,))  # 31+ holds no line: left out
    assert (only.bucket, only.sentences, only.bleu, only.chrf) == ("1-30", 8, whole.bleu, whole.chrf)
    assert 0 < whole.bleu < 100
    (zh,) = by_length(HYPS, [REFS, REFS[::-1]], LENGTHS, (30,), tgt_lang="zh")  # the zh tokenizer, two references
    assert zh.bleu == score(HYPS, [REFS, REFS[::-1]], "zh").bleu and zh.bleu != only.bleu
    labels = [b.bucket for b in by_length(HYPS, [REFS], [0, *LENGTHS[1:]], (1, 2, 30))]
    assert labels == ["0", "2", "3-30"]  # an empty source line has its own bucket; "1" and "31+" hold none


@pytest.mark.parametrize("length,edges,label", [
    (1, (10, 20), "1-10"), (10, (10, 20), "1-10"), (11, (10, 20), "11-20"), (20, (10, 20), "11-20"),
    (21, (10, 20), "21+"), (0, (10, 20), "0"), (1, (1, 5), "1"), (2, (1, 5), "2-5"), (6, (1, 5), "6+"),
])
def test_bucket_labels(length, edges, label):
    assert bucket_label(length, edges) == label


def test_by_length_refuses_what_it_cannot_bucket():
    with pytest.raises(ValueError, match=r"rising positive integers, got \[10, 5\]"):
        by_length(HYPS, [REFS], LENGTHS, (10, 5))
    with pytest.raises(ValueError, match="7 source lengths but 8 hypotheses"):
        by_length(HYPS, [REFS], LENGTHS[:7], (10,))


# --------------------------------------------------------------------------- the command line
def _piece_lengths(trained_run, src: list[str]) -> list[int]:
    from nmt.translator import Translator

    tr = Translator.load(str(trained_run), "cpu")
    return [len(ids) for ids in tr.tokenizer.encode_src([tr.normalize(s) for s in src])]


def test_the_acceptance_command(trained_run, run_cli, hsk_corpus, explain, tmp_path):
    """``nmt.evaluate RUN --split test --beam 5 --beta 0.2 --by-length --json``: one JSON row naming beta, its
    buckets (the default edges, by source pieces) holding every test line once; the hypotheses are the API's at
    beta 0.2."""
    from nmt.translator import Translator

    proc = run_cli("nmt.evaluate", trained_run, "--split", "test", "--beam", "5", "--beta", "0.2", "--by-length",
                   "--json", "--output", tmp_path / "test.hyp")
    assert proc.returncode == 0, explain(proc)
    row = json.loads(proc.stdout)
    assert (row["beam"], row["alpha"], row["beta"], row["stop"]) == (5, 1.0, 0.2, "full")
    assert all(set(b) == {"bucket", "sentences", "bleu", "chrf"} for b in row["by_length"])
    src = list(hsk_corpus["test"]["src"])
    lengths = _piece_lengths(trained_run, src)
    edges = [(1, 5), (6, 10), (11, 15), (16, 20), (21, 30), (31, 40), (41, 10**9)]  # the default --buckets
    counts = {f"{lo}-{hi}" if hi < 10**9 else f"{lo}+": sum(lo <= n <= hi for n in lengths) for lo, hi in edges}
    assert [(b["bucket"], b["sentences"]) for b in row["by_length"]] == [(k, v) for k, v in counts.items() if v]
    assert sum(b["sentences"] for b in row["by_length"]) == row["sentences"] == len(src) == 100
    assert len(row["by_length"]) >= 2  # the split has lines of several lengths
    api = Translator.load(str(trained_run), "cpu").translate(src, beam=5, beta=0.2)
    assert (tmp_path / "test.hyp").read_text(encoding="utf-8").splitlines() == [t.text for t in api]


def test_by_length_table_and_plot(trained_run, run_cli, explain, tmp_path):
    """Text output: a sub-table per set after the main table; ``--plot`` (implying --by-length) writes a PNG."""
    png = tmp_path / "plots" / "by_length.png"
    proc = run_cli("nmt.evaluate", trained_run, "--split", "test", "--split", "dev", "--beam", "1",
                   "--buckets", "8,12", "--plot", png)
    assert proc.returncode == 0, explain(proc)
    out = proc.stdout.split("\n\n")
    assert len(out) == 3 and out[0].splitlines()[0].split() == ["set", "sents", "refs", "BLEU", "chrF", "sent/s"]
    for block, name in zip(out[1:], ("test", "dev")):
        lines = block.strip().splitlines()
        assert lines[0] == f"{name} by length (source sentencepiece pieces)"
        assert lines[1].split() == ["bucket", "sents", "BLEU", "chrF"]
        rows = [ln.split() for ln in lines[2:]]
        assert [r[0] for r in rows] == [b for b in ("1-8", "9-12", "13+") if b in {r[0] for r in rows}]
        assert sum(int(r[1]) for r in rows) == 100
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") >= 400  # width in the IHDR chunk


def test_search_settings_reach_the_search_and_one_bucket_is_the_whole_set(trained_run, monkeypatch, capsys):
    """--beam, --alpha, --beta and --stop reach ``Translator.translate`` as given, and the JSON row names them (this
    run's outputs run to the length limit, where coverage is saturated: beta cannot show in its texts, so the call is
    what is checked); ``--buckets 1000`` makes one bucket whose figures are the row's own, exactly (this run writes
    one-token lines, BLEU 0: the tests above check BLEU on real n-grams)."""
    import nmt.evaluate
    from nmt.translator import Translator

    tr = Translator.load(str(trained_run), "cpu")
    calls, translate = [], tr.translate
    monkeypatch.setattr(tr, "translate", lambda *a, **kw: calls.append(kw) or translate(*a, **kw))
    monkeypatch.setattr(nmt.evaluate, "start_decoding", lambda args: tr)
    args = [str(trained_run), "--split", "test", "--beam", "3", "--alpha", "0.6", "--beta", "0.2", "--stop", "exact",
            "--by-length", "--buckets", "1000", "--json"]
    assert nmt.evaluate.main(args) == 0
    assert [{k: c[k] for k in ("beam", "alpha", "beta", "stop")} for c in calls] == [
        {"beam": 3, "alpha": 0.6, "beta": 0.2, "stop": "exact"}]
    row = json.loads(capsys.readouterr().out)
    assert (row["beam"], row["alpha"], row["beta"], row["stop"]) == (3, 0.6, 0.2, "exact") and row["chrf"] > 0
    assert row["by_length"] == [{"bucket": "1-1000", "sentences": 100, "bleu": row["bleu"], "chrf": row["chrf"]}]


@pytest.mark.parametrize("tool,args,message", [
    ("nmt.evaluate", ["--beta", "2"], "argument --beta: must be a number between 0 and 1, got '2'"),
    ("nmt.evaluate", ["--beta", "x"], "argument --beta: must be a number between 0 and 1, got 'x'"),
    ("nmt.translate", ["--beta", "-0.1"], "argument --beta: must be a number between 0 and 1, got '-0.1'"),
    ("nmt.evaluate", ["--stop", "last"], "argument --stop: invalid choice: 'last'"),
    ("nmt.evaluate", ["--buckets", "10,5"], "argument --buckets: expected rising positive integers"),
    ("nmt.evaluate", ["--buckets", "ten"], "argument --buckets: expected integers separated by commas"),
    ("nmt.evaluate", ["--buckets", "0,5"], "argument --buckets: expected rising positive integers"),
])
def test_bad_search_and_bucket_values_are_usage_errors(capsys, tmp_path, tool, args, message):
    """Refused while parsing, before any model is loaded: exit 2 and argparse's line naming the flag and the value."""
    import importlib

    main = importlib.import_module(tool).main
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "missing.pt"), *(["--split", "test"] if tool == "nmt.evaluate" else ["你好。"]), *args])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
