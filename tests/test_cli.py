"""End to end through the real command lines: ``python -m nmt.train | nmt.translate | nmt.evaluate``.

One tiny run (``trained_run`` in conftest.py, 30 steps) is shared by every test here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

SENTENCES = ["老师，您好！", "", "   ", "图书馆在学校里边。", "谢谢你！不客气。"]


def assert_clean_failure(proc, *fragments: str, prog: str | None = None) -> None:
    """Non-zero exit, no Python traceback, and the fragments on stderr (on the error line itself
    when ``prog`` says which ``<prog>: error:`` line that is)."""
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    if prog:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"{prog}: error:")]
        assert len(lines) == 1, proc.stderr[-3000:]
        text = lines[0]
    else:
        text = proc.stderr
    for fragment in fragments:
        assert fragment in text, proc.stderr[-3000:]


def snapshot(run: Path) -> dict:
    keep = [p for p in run.rglob("*") if p.is_file() and ".hydra" not in p.parts and p.name != "train.log"]
    return {str(p.relative_to(run)): (p.read_bytes(), p.stat().st_mtime_ns) for p in keep}


# --------------------------------------------------------------------------- train
def test_train_writes_a_complete_run(trained_run):
    """Checkpoints, metrics (with the test score), tokenizer models and the resolved config."""
    for name in ("checkpoints/best.pt", "checkpoints/last.pt", "spm.src.model", "spm.tgt.model",
                 ".hydra/config.yaml", "metrics.json"):
        assert (trained_run / name).is_file(), name
    metrics = json.loads((trained_run / "metrics.json").read_text())
    assert metrics["steps"] == 30
    assert [h["step"] for h in metrics["history"]] == [15, 30]
    assert metrics["test_beam"] == 2  # its test_bleu: test_evaluate_split_text_output gets it again from nmt.evaluate
    assert metrics["bleu_signature"].startswith("nrefs:1|")
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(trained_run / ".hydra" / "config.yaml")
    assert cfg.model.attention.mode == "local_p" and cfg.model.hidden_size == 32
    assert cfg.trainer.max_steps == 30


def test_best_checkpoint_is_only_replaced_by_a_better_one(trained_run):
    """best.pt is the first validation with the highest dev BLEU (a tie does not replace it);
    last.pt is the final step."""
    from nmt.checkpoint import load

    history = json.loads((trained_run / "metrics.json").read_text())["history"]
    top = max(h["valid_bleu"] for h in history)
    first_top = next(h["step"] for h in history if h["valid_bleu"] == top)
    assert load(trained_run / "checkpoints" / "best.pt")["step"] == first_top
    assert load(trained_run / "checkpoints" / "last.pt")["step"] == 30


def test_train_logs_tensorboard_scalars(trained_run):
    """The TensorBoard log holds the training, validation and test curves at the right steps."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(trained_run / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    train_tags = {f"train/{k}" for k in ("loss", "ppl", "lr", "src_tok_per_s", "tgt_tok_per_s")}
    valid_tags = {f"valid/{k}" for k in ("loss", "ppl", "bleu", "chrf")}
    assert train_tags | valid_tags | {"test/bleu", "test/chrf"} <= tags
    for tag in train_tags:
        assert [e.step for e in acc.Scalars(tag)] == [10, 20, 30]
    for tag in valid_tags:
        assert [e.step for e in acc.Scalars(tag)] == [15, 30]
    assert [e.value for e in acc.Scalars("train/lr")] == pytest.approx([1e-3] * 3)
    assert all(e.value > 0 for e in acc.Scalars("train/tgt_tok_per_s"))


def test_train_writes_settings_and_final_scores_as_hparams(trained_run):
    """TensorBoard's HPARAMS tab can compare a sweep: each run logs its settings and final dev/test scores."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    sessions, metrics = [], {}
    (path,) = (trained_run / "tensorboard").glob("events.out.tfevents.*")  # one events file per run
    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name == "hparams":
                data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                if data.HasField("session_start_info"):
                    sessions.append(data.session_start_info.hparams)
            elif value.tag.startswith("hparams/"):
                metrics[value.tag] = value.tensor.float_val[0] if value.tensor.float_val else value.simple_value
    assert len(sessions) == 1
    hp = sessions[0]
    assert hp["model.attention.mode"].string_value == "local_p"
    assert hp["model.hidden_size"].number_value == 32
    final = json.loads((trained_run / "metrics.json").read_text())
    assert metrics["hparams/dev_bleu"] == pytest.approx(final["best_valid_bleu"], abs=1e-4)
    assert metrics["hparams/test_bleu"] == pytest.approx(final["test_bleu"], abs=1e-4)
    assert {"hparams/dev_chrf", "hparams/steps"} <= set(metrics)


# --------------------------------------------------------------------------- translate
@pytest.fixture(scope="module")
def stdin_translation(trained_run, run_cli):
    proc = run_cli("nmt.translate", trained_run, "--beam", "2", input="\n".join(SENTENCES) + "\n")
    return proc


def test_translate_stdin_one_line_out_per_line_in(stdin_translation, explain):
    """Every input line (blank ones included) gives exactly one output line, in order; blank
    input gives a blank line; stdout carries translations only (logs go to stderr)."""
    proc = stdin_translation
    assert proc.returncode == 0, explain(proc)
    out = proc.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(SENTENCES), proc.stdout
    assert out[1] == "" and out[2] == ""
    assert not any("INFO" in line or "nmt." in line for line in out)


def test_translate_arguments_match_stdin(trained_run, run_cli, stdin_translation, explain):
    """Sentences given as arguments (to a checkpoint file, not a run dir) translate the same."""
    proc = run_cli("nmt.translate", trained_run / "checkpoints" / "best.pt", *SENTENCES, "--beam", "2")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == stdin_translation.stdout


def test_translate_with_source_prints_each_source_beside_its_translation(trained_run, run_cli, stdin_translation,
                                                                        explain):
    proc = run_cli("nmt.translate", trained_run, "--beam", "2", "--with-source", *SENTENCES)  # as make demo does
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.splitlines() == [f"{s}\t{t}" for s, t in zip(SENTENCES, stdin_translation.stdout.splitlines())]


def test_translate_input_and_output_files(trained_run, run_cli, stdin_translation, tmp_path, explain):
    src, out = tmp_path / "in.zh", tmp_path / "out.en"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    proc = run_cli("nmt.translate", trained_run, "--input", src, "--output", out, "--beam", "2")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == ""
    assert out.read_text(encoding="utf-8") == stdin_translation.stdout


def test_translate_stop_rules(trained_run, run_cli, explain):
    """--stop picks when a sentence's beam ends; each rule translates every line; another word
    is a usage error."""
    for stop in ("exact", "first"):
        proc = run_cli("nmt.translate", trained_run, *SENTENCES, "--beam", "3", "--stop", stop)
        assert proc.returncode == 0, explain(proc)
        assert len(proc.stdout.splitlines()) == len(SENTENCES)
    proc = run_cli("nmt.translate", trained_run, *SENTENCES, "--stop", "never")
    assert_clean_failure(proc, "--stop", "invalid choice", prog="nmt.translate")


# --------------------------------------------------------------------------- evaluate
def test_evaluate_files_json(trained_run, run_cli, stdin_translation, tmp_path, explain):
    """--src/--ref/--ref gives one JSON object with BLEU, chrF and signatures for two references;
    its hypotheses are exactly what translate produces with the same beam."""
    src = ["老师，您好！", "图书馆在学校里边。", "谢谢你！不客气。"]
    refs1 = ["Hello, teacher!", "The library is inside the school.", "Thank you! You're welcome."]
    refs2 = ["Hi, teacher!", "The library is in the school.", "Thanks! No problem."]
    for name, lines in (("src.zh", src), ("ref1.en", refs1), ("ref2.en", refs2)):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_cli("nmt.evaluate", trained_run, "--src", tmp_path / "src.zh", "--ref", tmp_path / "ref1.en",
                   "--ref", tmp_path / "ref2.en", "--beam", "2", "--json", "--output", tmp_path / "hyp.en")
    assert proc.returncode == 0, explain(proc)
    result = json.loads(proc.stdout)
    assert {"bleu", "chrf", "bleu_signature", "chrf_signature"} <= result.keys()
    import sacrebleu

    hyps = (tmp_path / "hyp.en").read_text(encoding="utf-8").splitlines()
    assert result["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs1, refs2]).score)  # what it wrote, scored
    assert result["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs1, refs2]).score)
    assert "nrefs:2" in result["bleu_signature"]
    assert result["sentences"] == 3 and result["beam"] == 2 and result["stop"] == "full"
    translated = stdin_translation.stdout.split("\n")
    assert (tmp_path / "hyp.en").read_text(encoding="utf-8").split("\n")[:3] == [translated[i] for i in (0, 3, 4)]


def test_evaluate_split_text_output(trained_run, run_cli, explain):
    """--split test re-loads the training corpus's test split; text output names BLEU and the signature."""
    proc = run_cli("nmt.evaluate", trained_run, "--split", "test", "--beam", "2")
    assert proc.returncode == 0, explain(proc)
    header, row = proc.stdout.splitlines()[:2]
    assert header.split() == ["set", "sents", "refs", "BLEU", "chrF", "sent/s"]
    assert row.split()[:3] == ["test", "100", "1"]
    assert "BLEU: nrefs:1|case:mixed" in proc.stdout and "chrF: nrefs:1" in proc.stdout
    metrics = json.loads((trained_run / "metrics.json").read_text())
    assert row.split()[3] == f"{metrics['test_bleu']:.2f}"  # the same score training reported


def test_evaluate_reference_of_another_length(trained_run, run_cli, tmp_path):
    (tmp_path / "src").write_text("你好\n谢谢\n", encoding="utf-8")
    (tmp_path / "ref").write_text("hello\n", encoding="utf-8")
    proc = run_cli("nmt.evaluate", trained_run, "--src", tmp_path / "src", "--ref", tmp_path / "ref")
    assert_clean_failure(proc, "has 1 lines", "has 2", prog="nmt.evaluate")


def test_evaluate_empty_files(trained_run, run_cli, tmp_path):
    """An empty --src and --ref is one error line naming the source file (sacrebleu raised
    IndexError on an empty corpus), exit 1."""
    (tmp_path / "empty.zh").write_text("", encoding="utf-8")
    (tmp_path / "empty.en").write_text("", encoding="utf-8")
    proc = run_cli("nmt.evaluate", trained_run, "--src", tmp_path / "empty.zh", "--ref", tmp_path / "empty.en")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert_clean_failure(proc, f"--src {tmp_path / 'empty.zh'} holds no lines", "nothing to score",
                         prog="nmt.evaluate")


def test_evaluate_rejects_a_beam_below_one(trained_run, run_cli):
    """--beam 0 must be a usage error (translate checks it; evaluate divides by it and crashes
    with ZeroDivisionError in translate_texts)."""
    proc = run_cli("nmt.evaluate", trained_run, "--split", "test", "--beam", "0")
    assert_clean_failure(proc, "--beam")


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("tool", ["nmt.translate", "nmt.evaluate"])
def test_corrupt_checkpoint(trained_run, run_cli, tmp_path, tool):
    bad = tmp_path / "best.pt"
    data = (trained_run / "checkpoints" / "best.pt").read_bytes()
    bad.write_bytes(data[: len(data) // 3])
    extra = ["你好"] if tool == "nmt.translate" else ["--split", "test"]
    assert_clean_failure(run_cli(tool, bad, *extra), str(bad), "corrupt or truncated", prog=tool)


@pytest.mark.parametrize("tool", ["nmt.translate", "nmt.evaluate"])
def test_missing_checkpoint(run_cli, tmp_path, tool):
    missing = tmp_path / "no_such_run"
    extra = ["你好"] if tool == "nmt.translate" else ["--split", "test"]
    assert_clean_failure(run_cli(tool, missing, *extra), str(missing), "does not exist", prog=tool)


def test_train_misspelled_key(run_cli, tmp_path, train_overrides):
    proc = run_cli("nmt.train", *train_overrides, "trainer.max_stepz=5", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, "max_stepz")


def test_train_misspelled_key_added_with_plus(run_cli, tmp_path, train_overrides):
    """A key added with Hydra's ``+`` is checked against the schema too, before anything is written."""
    proc = run_cli("nmt.train", *train_overrides, "+model.hiden_size=3", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, "model.hiden_size", "no such setting", prog="nmt.train")
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_train_invalid_attention_score(run_cli, tmp_path, train_overrides):
    proc = run_cli("nmt.train", *train_overrides, "model.attention.score=foo", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, "model.attention.score='foo'", "dot, general, concat", prog="nmt.train")
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_train_misaligned_files_leave_an_existing_run_untouched(trained_run, run_cli, tmp_path, train_overrides):
    """data=files with a line-count mismatch fails naming both files and counts; started in an
    existing run's directory it replaces no checkpoint, tokenizer, metrics or event file."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.zh").write_text("你好\n谢谢\n再见\n", encoding="utf-8")
    (data / "train.en").write_text("hello\nthanks\n", encoding="utf-8")
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    before = snapshot(run)
    proc = run_cli("nmt.train", *train_overrides, "data=files", f"data.dir={data}", f"hydra.run.dir={run}")
    assert_clean_failure(proc, "train.zh has 3 lines", "train.en has 2", prog="nmt.train")
    assert snapshot(run) == before


def test_train_files_without_a_folder(run_cli, tmp_path, train_overrides):
    proc = run_cli("nmt.train", *train_overrides, "data=files", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, "data.dir", prog="nmt.train")


def test_train_tsv_row_with_a_wrong_field_count(run_cli, tmp_path, train_overrides):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("你好\thello\n谢谢\n", encoding="utf-8")
    (data / "dev.tsv").write_text("再见\tbye\n", encoding="utf-8")
    proc = run_cli("nmt.train", *train_overrides, "data=files", "data.format=tsv", f"data.dir={data}",
                   f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, "train.tsv:2: expected 2 tab-separated fields, found 1", prog="nmt.train")


def test_train_hub_copy_without_the_language_pair(run_cli, tmp_path, train_overrides):
    import datasets

    copy = tmp_path / "copy"
    datasets.DatasetDict({s: datasets.Dataset.from_dict({"translation": [{"de": "Hallo", "en": "hello"}]})
                          for s in ("train", "validation")}).save_to_disk(str(copy))
    proc = run_cli("nmt.train", *train_overrides, "data=hub", f"data.name={copy}", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, "has languages ['de', 'en'], not zh-en", prog="nmt.train")


def test_train_invalid_utf8_names_file_and_line(run_cli, tmp_path, train_overrides):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.zh").write_bytes("你好\n谢谢\n".encode() + b"\xc3\x28\n")
    (data / "train.en").write_text("hello\nthanks\nbye\n", encoding="utf-8")
    proc = run_cli("nmt.train", *train_overrides, "data=files", f"data.dir={data}", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, f"{data / 'train.zh'}:3", "invalid UTF-8", prog="nmt.train")


def test_train_vocabulary_too_small_for_the_characters(run_cli, tmp_path, train_overrides):
    """The Chinese side needs ~1,750 pieces for its characters at the default coverage: a
    tokenizer.src_vocab_size of 500 fails at start-up with one line naming the size and the cause
    (not sentencepiece's traceback), before any checkpoint is written."""
    proc = run_cli("nmt.train", *train_overrides, "tokenizer.src_vocab_size=500", "trainer.max_steps=2",
                   "trainer.valid_every=2", "trainer.test_beam=0", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, "vocab_size=500", "smaller than required_chars", prog="nmt.train")
    assert not (tmp_path / "r" / "checkpoints").exists()


# --------------------------------------------------------------------------- n-best, ensembles, averaging, sets
def test_translate_n_best_format(trained_run, run_cli, explain):
    """--n-best 3 prints 'line ||| translation ||| score' lines, up to 3 per input, scores falling."""
    proc = run_cli("nmt.translate", trained_run, "老师，您好！", "谢谢你！", "--beam", "3", "--n-best", "3")
    assert proc.returncode == 0, explain(proc)
    rows = [line.split(" ||| ") for line in proc.stdout.splitlines()]
    assert {r[0] for r in rows} == {"0", "1"} and all(len(r) == 3 for r in rows)
    for line_no in ("0", "1"):
        scores = [float(r[2]) for r in rows if r[0] == line_no]
        assert 1 <= len(scores) <= 3 and scores == sorted(scores, reverse=True)


def test_ensemble_and_average_of_identical_checkpoints_translate_like_one(trained_run, run_cli, tmp_path, explain):
    """An ensemble of a checkpoint with itself, and the average of two copies of it, give the
    same translations as the checkpoint alone."""
    best = trained_run / "checkpoints" / "best.pt"
    copy = tmp_path / "copy.pt"
    shutil.copy(best, copy)
    alone = run_cli("nmt.translate", best, *SENTENCES, "--beam", "2")
    ens = run_cli("nmt.translate", best, *SENTENCES, "--beam", "2", "--ensemble", copy)
    assert alone.returncode == 0 and ens.returncode == 0, explain(ens)
    assert ens.stdout == alone.stdout
    avg = tmp_path / "avg.pt"
    proc = run_cli("nmt.average", "--out", avg, best, copy)
    assert proc.returncode == 0, explain(proc)
    averaged = run_cli("nmt.translate", avg, *SENTENCES, "--beam", "2")
    assert averaged.stdout == alone.stdout
    bad = run_cli("nmt.average", "--out", tmp_path / "bad.pt", best, tmp_path / "missing.pt")
    assert bad.returncode == 1 and "nmt.average: error:" in bad.stderr and "missing.pt" in bad.stderr, explain(bad)
    assert "Traceback" not in bad.stderr and not (tmp_path / "bad.pt").exists()


def test_evaluate_several_sets_in_one_table(trained_run, run_cli, tmp_path, explain):
    """A corpus split and a file pair with two references: one row each, and a JSON list."""
    src = ["老师，您好！", "谢谢你！不客气。"]
    refs = (["Hello, teacher!", "Thank you! You're welcome."], ["Hi, teacher!", "Thanks! No problem."])
    (tmp_path / "a.zh").write_text("\n".join(src) + "\n", encoding="utf-8")
    for i, r in enumerate(refs):
        (tmp_path / f"a{i}.en").write_text("\n".join(r) + "\n", encoding="utf-8")
    args = ["--split", "test", "--src", tmp_path / "a.zh", "--ref", tmp_path / "a0.en", "--ref", tmp_path / "a1.en",
            "--beam", "2"]
    proc = run_cli("nmt.evaluate", trained_run, *args, "--output", tmp_path / "hyps")
    assert proc.returncode == 0, explain(proc)
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["set", "sents", "refs", "BLEU", "chrF", "sent/s"]
    assert lines[1].split()[:3] == ["test", "100", "1"]
    assert lines[2].split()[1:3] == ["2", "2"]
    assert any("nrefs:1" in ln for ln in lines) and any("nrefs:2" in ln for ln in lines)
    assert (tmp_path / "hyps" / "test.hyp").read_text(encoding="utf-8").count("\n") == 100
    as_json = json.loads(run_cli("nmt.evaluate", trained_run, *args, "--json").stdout)
    assert [r["set"] for r in as_json] == ["test", str(tmp_path / "a.zh")]


def test_evaluate_ref_without_src_is_refused(trained_run, run_cli):
    proc = run_cli("nmt.evaluate", trained_run, "--ref", "x.en")
    assert proc.returncode == 2 and "--ref must follow a --src" in proc.stderr


def test_translate_survives_hostile_input(trained_run, run_cli, explain):
    """A fuzz test: 2,000 random lines (control characters, emoji, mixed scripts, very long lines,
    lines of spaces, invalid UTF-8 bytes) give exactly one output line each, each within the length
    limit (2 x 250 source pieces + 10 tokens at most)."""
    import random

    rng = random.Random(7)
    pools = [range(0x20), range(0x4E00, 0x9FA5), range(0x1F600, 0x1F64F), range(0x0400, 0x04FF),
             range(0x0600, 0x06FF), range(0x20, 0x7F), [0x200B, 0xFEFF, 0x202E, 0x3000, 0x85, 0x2028]]
    lines = []
    for i in range(2000):
        kind = i % 10
        if kind == 0:
            lines.append(" " * rng.randint(0, 40))
        elif kind == 1:
            lines.append("".join(chr(rng.choice(range(0x4E00, 0x9FA5))) for _ in range(rng.randint(300, 3000))))
        else:
            pool = rng.choice(pools)
            lines.append("".join(chr(rng.choice(pool)) for _ in range(rng.randint(1, 60))))
    # line separators inside a line would split it: one input line is one \n-terminated record
    text = "\n".join(ln.replace("\n", " ").replace("\r", " ") for ln in lines) + "\n"
    data = text.encode("utf-8", errors="surrogatepass") + b"\xff\xfe broken \xc3\n"
    proc = run_cli("nmt.translate", trained_run, "--beam", "2", input=None, timeout=600,
                   input_bytes=data)
    assert proc.returncode == 0, explain(proc)
    out = proc.stdout.split("\n")
    assert len(out) - 1 == len(lines) + 1
    assert all(len(o.split()) <= 2 * 250 + 10 for o in out)


def test_translate_is_interactive_at_a_terminal(trained_run, cli_env):
    """With a terminal on stdin, translate prompts and answers each line as it is typed."""
    import os
    import pty
    import subprocess
    import sys
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "nmt.translate", str(trained_run), "--beam", "2"], stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env, text=True)
    os.close(slave)
    try:
        deadline = time.time() + 120
        err = ""
        while "Type a sentence" not in err and time.time() < deadline:
            err += proc.stderr.readline()
        os.write(master, "老师，您好！\n".encode())
        first = proc.stdout.readline()  # answered before end of input
        assert first.endswith("\n")
        os.write(master, b"\x04")  # Ctrl-D
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(master)
        proc.kill()
