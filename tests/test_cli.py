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
    assert 0 <= metrics["test_bleu"] <= 100 and metrics["test_beam"] == 2
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


def test_translate_input_and_output_files(trained_run, run_cli, stdin_translation, tmp_path, explain):
    src, out = tmp_path / "in.zh", tmp_path / "out.en"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    proc = run_cli("nmt.translate", trained_run, "--input", src, "--output", out, "--beam", "2")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == ""
    assert out.read_text(encoding="utf-8") == stdin_translation.stdout


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
    assert 0 <= result["bleu"] <= 100 and 0 <= result["chrf"] <= 100
    assert "nrefs:2" in result["bleu_signature"]
    assert result["sentences"] == 3 and result["beam"] == 2
    translated = stdin_translation.stdout.split("\n")
    assert (tmp_path / "hyp.en").read_text(encoding="utf-8").split("\n")[:3] == [translated[i] for i in (0, 3, 4)]


def test_evaluate_split_text_output(trained_run, run_cli, explain):
    """--split test re-loads the training corpus's test split; text output names BLEU and the signature."""
    proc = run_cli("nmt.evaluate", trained_run, "--split", "test", "--beam", "2")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.startswith("test: BLEU ")
    assert "(100 sentences, beam 2)" in proc.stdout
    assert "nrefs:1|case:mixed" in proc.stdout and "chrF" in proc.stdout
    metrics = json.loads((trained_run / "metrics.json").read_text())
    assert f"BLEU {metrics['test_bleu']:.2f}" in proc.stdout  # the same score training reported


def test_evaluate_reference_of_another_length(trained_run, run_cli, tmp_path):
    (tmp_path / "src").write_text("你好\n谢谢\n", encoding="utf-8")
    (tmp_path / "ref").write_text("hello\n", encoding="utf-8")
    proc = run_cli("nmt.evaluate", trained_run, "--src", tmp_path / "src", "--ref", tmp_path / "ref")
    assert_clean_failure(proc, "has 1 lines", "has 2", prog="nmt.evaluate")


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


def test_train_invalid_utf8_names_file_and_line(run_cli, tmp_path, train_overrides):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.zh").write_bytes("你好\n谢谢\n".encode() + b"\xc3\x28\n")
    (data / "train.en").write_text("hello\nthanks\nbye\n", encoding="utf-8")
    proc = run_cli("nmt.train", *train_overrides, "data=files", f"data.dir={data}", f"hydra.run.dir={tmp_path / 'r'}")
    assert_clean_failure(proc, f"{data / 'train.zh'}:3", "invalid UTF-8", prog="nmt.train")


def test_train_vocabulary_too_small_for_the_characters(run_cli, tmp_path, train_overrides):
    """The Chinese side needs ~1,750 pieces for its characters at the default coverage. A smaller
    tokenizer.src_vocab_size must either work (the size is documented as soft) or fail with a
    one-line error naming the setting; today sentencepiece's RuntimeError escapes as a traceback."""
    proc = run_cli("nmt.train", *train_overrides, "tokenizer.src_vocab_size=500", "trainer.max_steps=2",
                   "trainer.valid_every=2", "trainer.test_beam=0", f"hydra.run.dir={tmp_path / 'r'}")
    if proc.returncode != 0:
        assert_clean_failure(proc, "vocab_size", prog="nmt.train")
