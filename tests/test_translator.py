"""The Python API as a user calls it: ``from nmt import Translator`` on a run written by ``nmt.train``; the same
translations as ``python -m nmt.translate``, n-best lists, attention, scores, ensembles and clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sacrebleu

LINES = ["我爱你。", "今天天气很好。", "", "他明天要去北京。"]


@pytest.fixture(scope="module")
def translator(trained_run):
    from nmt import Translator

    return Translator.load(trained_run, device="cpu")


def test_translations_match_the_command_line(translator, trained_run, run_cli, explain):
    """One decoding path: the API's best translations are nmt.translate's output, line for line."""
    got = translator.translate(LINES, beam=5)
    proc = run_cli("nmt.translate", trained_run, "--beam", "5", "--device", "cpu", input="\n".join(LINES) + "\n")
    assert proc.returncode == 0, explain(proc)
    assert [t.text for t in got] == proc.stdout.split("\n")[:-1]
    assert [t.source for t in got] == LINES
    assert got[2].text == "" and got[2].nbest[0].score == 0.0  # an empty line: one empty translation
    assert all(isinstance(t.score, float) for t in got)


def test_n_best_lists_are_ranked_and_attention_has_a_row_per_target_piece(translator):
    t = translator.translate(["我爱你。"], beam=4, n_best=3, attention=True)[0]
    assert len(t.nbest) == 3 and t.text == t.nbest[0].text
    scores = [h.score for h in t.nbest]
    assert scores == sorted(scores, reverse=True)
    a = t.attention
    assert a.weights.shape == (len(a.tgt_pieces), len(a.src_pieces)) and a.tgt_pieces[-1] == "</s>"
    sums = a.weights.sum(-1)  # local-p: the alignment times the paper's Gaussian, not renormalized, so at most 1
    assert (a.weights >= 0).all() and (sums <= 1 + 1e-5).all() and (sums > 0.5).all()
    assert a.centres is not None and a.centres.shape == (len(a.tgt_pieces),)  # the run is local-p: p_t per step


def test_evaluate_scores_what_it_translates(translator):
    """BLEU and chrF of the hypotheses it returns, as sacrebleu computes them, with the signature."""
    src, refs = LINES[:2] + LINES[3:], ["I love you.", "The weather is nice today.", "He is going to Beijing tomorrow."]
    s = translator.evaluate(src, [refs], beam=2)
    assert s.hypotheses == [t.text for t in translator.translate(src, beam=2)]
    assert s.bleu == pytest.approx(sacrebleu.corpus_bleu(s.hypotheses, [refs]).score)
    assert "tok:13a" in s.bleu_signature and s.chrf == pytest.approx(sacrebleu.corpus_chrf(s.hypotheses, [refs]).score)


def test_an_ensemble_of_one_model_twice_translates_like_it(translator, trained_run):
    from nmt import Translator

    pair = Translator.load([trained_run, trained_run], device="cpu")
    assert len(pair.models) == 2
    assert [t.text for t in pair.translate(LINES, beam=3)] == [t.text for t in translator.translate(LINES, beam=3)]


def test_bad_settings_and_paths_are_one_line_errors(translator, tmp_path):
    from nmt import Translator
    from nmt.checkpoint import CheckpointError

    with pytest.raises(ValueError, match=r"n_best=6: must be between 1 and beam \(5\)"):
        translator.translate(["我爱你。"], beam=5, n_best=6)
    with pytest.raises(ValueError, match="beam=0"):
        translator.translate(["我爱你。"], beam=0)
    with pytest.raises(ValueError, match="stop='never'"):
        translator.translate(["我爱你。"], stop="never")
    with pytest.raises(TypeError):
        translator.translate(["我爱你。"], beem=5)  # a misspelled setting is not ignored
    with pytest.raises(ValueError, match="precision='int4'"):
        Translator(translator.models, translator.tokenizer, translator.config, precision="int4")
    with pytest.raises(CheckpointError, match=str(tmp_path)):
        Translator.load(tmp_path)
    with pytest.raises(ValueError, match="no source lines"):
        translator.evaluate([], [[]])


def test_import_nmt_alone_does_not_import_torch():
    """``import nmt`` stays light (the ONNX runtime and the page do not need torch); the API loads on first use."""
    code = "import sys, nmt; assert 'torch' not in sys.modules; from nmt import Translator; assert 'torch' in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


SETUP = """
import os, sys, torch
import nmt.device
from nmt import Translator
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])  # the cores this process is given: one
calls = []
keep = nmt.device.keep_freed_memory
nmt.device.keep_freed_memory = lambda: calls.append(1) or keep()
torch.set_num_threads(3)  # torch's own choice, as a caller who never set anything up finds it
if sys.argv[2] == "set_threads_first":
    nmt.device.set_threads(2)  # as the commands, the server (1) and the scripts' --threads do before loading
Translator.load(sys.argv[1], "cpu", setup_process=sys.argv[2] != "off")
print(torch.get_num_threads(), len(calls))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="needs CPU affinity (Linux)")
@pytest.mark.parametrize("how, expected", [("on", "1 1"), ("off", "3 0"), ("set_threads_first", "2 1")])
def test_load_sets_the_process_up_as_the_commands_do(trained_run, cli_env, how, expected):
    """Translator.load gives a fresh process a thread per core it was given and glibc keeping freed blocks, as the
    commands have; setup_process=False touches neither; a process already set up by set_threads keeps its threads,
    and the allocator is set once."""
    proc = subprocess.run([sys.executable, "-c", SETUP, str(trained_run), how], capture_output=True, text=True,
                          env=cli_env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == expected.split()
