"""Each side's weights under each side's search: the BLEU gap to Eole split into training and decoding (issue 39).

    python scripts/swap_search.py --ours RUN/checkpoints/last.pt \\
        --eole ~/.cache/nmt-peers/bench/work/eole/budget/step_8200 --json docs/results/swap_search.json

Eole 0.6.4's bench-small (a brnn LSTM encoder, an LSTM decoder with input feeding, general global attention, a
softmax generator) is our ``bench_small``: the same parameters under other names. This script moves Eole's weights
into our ``Seq2Seq`` and decodes with our search, and moves ours into an Eole model folder and decodes with Eole's
``predict`` (at its default 30 sentences a batch, and one a batch, which reads no padding). Both models translate
the harness's test set (its raw Tatoeba dev split): Eole's from the harness's pieces, ours from our normalization
and sentencepiece models. Every cell is scored by the harness's ``bench_util.py score`` (pieces detokenized by the
side's own sentencepiece model, sacreBLEU against the raw references). Writes a record (date, commit, command, CPU).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from nmt.batching import inference_batches
from nmt.checkpoint import load_model
from nmt.config import ModelConfig
from nmt.data.normalize import src_normalizer
from nmt.device import cpu_info, set_threads
from nmt.model import Seq2Seq, build_model
from nmt.run_folder import git_commit
from nmt.search import beam_search

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the sibling script below
from scripts.decode_side_by_side import peer_decode  # noqa: E402

# Eole's vocabularies start <unk> <blank> <s> </s>, ours <pad> <unk> <s> </s>: ids 0 and 1 trade places (both ways)
EOLE_SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]
# the Eole settings that make its model ours (config.json key: value); any other value is a model we cannot map
EOLE_ARCH = {"model.encoder.encoder_type": "brnn", "model.encoder.rnn_type": "LSTM", "model.encoder.bridge": False,
             "model.decoder.decoder_type": "rnn", "model.decoder.rnn_type": "LSTM", "model.decoder.global_attention": "general",
             "model.decoder.global_attention_function": "softmax", "model.decoder.coverage_attn": False,
             "model.decoder.context_gate": None, "model.input_feed": 1, "model.generator_function": "softmax",
             "model.share_embeddings": False, "model.share_decoder_embeddings": False}
OUR_SEARCHES = (("greedy", 1, "full"), ("beam5", 5, "full"), ("beam5_first", 5, "first"))
EOLE_SEARCHES = (("greedy", 1, "default"), ("beam5", 5, "default"), ("greedy", 1, "sents:1"), ("beam5", 5, "sents:1"))


def _get(config: dict, dotted: str):
    for part in dotted.split("."):
        config = config.get(part) if isinstance(config, dict) else None
    return config


def eole_model_config(config: dict, where: str = "config.json") -> ModelConfig:
    """Our ModelConfig of an Eole model's config.json; a ValueError naming the key where it is not our model."""
    for key, want in EOLE_ARCH.items():
        if _get(config, key) != want:
            raise ValueError(f"{where}: {key} is {_get(config, key)!r}; only {want!r} maps onto our model")
    enc, dec, emb = config["model"]["encoder"], config["model"]["decoder"], config["model"]["embeddings"]
    if enc["hidden_size"] != dec["hidden_size"] or emb["src_word_vec_size"] != emb["tgt_word_vec_size"]:
        raise ValueError(f"{where}: encoder and decoder sizes differ (hidden {enc['hidden_size']}/{dec['hidden_size']},"
                         f" embeddings {emb['src_word_vec_size']}/{emb['tgt_word_vec_size']}); ours share them")
    cfg = ModelConfig(rnn_type="lstm", emb_size=emb["src_word_vec_size"], hidden_size=dec["hidden_size"],
                      encoder_layers=enc["layers"], decoder_layers=dec["layers"], bidirectional=True, input_feeding=True)
    cfg.attention.score, cfg.attention.mode = "general", "global"
    return cfg


def same_model(a, b) -> bool:
    """Whether two model configs (ModelConfig or its DictConfig) build the same parameters and decoder."""
    keys = ("rnn_type", "emb_size", "hidden_size", "encoder_layers", "decoder_layers", "bidirectional", "input_feeding",
            "tie_embeddings")
    return all(getattr(a, k) == getattr(b, k) for k in keys) and all(
        getattr(a.attention, k) == getattr(b.attention, k) for k in ("score", "mode", "heads"))


def _swap01(t: torch.Tensor) -> torch.Tensor:
    """Rows 0 and 1 traded: the vocabulary ids between Eole's order and ours."""
    perm = torch.arange(t.size(0))
    perm[0], perm[1] = 1, 0
    return t.index_select(0, perm)


_EOLE_ENC = re.compile(r"encoder\.rnn\.(weight|bias)_(ih|hh)_l(\d+)(_reverse)?$")
_EOLE_DEC = re.compile(r"decoder\.rnn\.layers\.(\d+)\.(weight|bias)_(ih|hh)$")
_OUR_ENC = re.compile(r"encoder\.rnn\.(\d+)\.(weight|bias)_(ih|hh)_l0(_reverse)?$")
_OUR_DEC = re.compile(r"decoder\.rnn\.(weight|bias)_(ih|hh)_l(\d+)$")
# the rest, name for name (rows of vocabulary matrices swapped; Eole's linear_in scores (W h_t)·h̄_s, our W_a h_t·(W h̄_s))
_PLAIN = {"src_emb.embeddings.weight": "encoder.embed.weight", "tgt_emb.embeddings.weight": "decoder.embed.weight",
          "generator.weight": "decoder.out.weight", "generator.bias": "decoder.out.bias",
          "decoder.attn.linear_in.weight": "decoder.attention.W_a.weight", "decoder.attn.linear_out.weight": "decoder.W_c.weight"}
_BACK = {ours: eole for eole, ours in _PLAIN.items()}
_VOCAB = {"encoder.embed.weight", "decoder.embed.weight", "decoder.out.weight", "decoder.out.bias"}


def _moved(key: str, value: torch.Tensor) -> torch.Tensor:
    """Our parameter ``key``'s value in the other side's layout (both ways: a transpose and a row swap undo themselves)."""
    return value.t().contiguous() if key.endswith("W_a.weight") else _swap01(value) if key in _VOCAB else value


def _our_name(key: str) -> str:
    if m := _EOLE_ENC.match(key):
        kind, gate, layer, rev = m.groups()
        return f"encoder.rnn.{layer}.{kind}_{gate}_l0{rev or ''}"
    if m := _EOLE_DEC.match(key):
        layer, kind, gate = m.groups()
        return f"decoder.rnn.{kind}_{gate}_l{layer}"
    if key in _PLAIN:
        return _PLAIN[key]
    raise ValueError(f"Eole weight {key!r} has no place in our model")


def _eole_name(key: str) -> str:
    if m := _OUR_ENC.match(key):
        layer, kind, gate, rev = m.groups()
        return f"encoder.rnn.{kind}_{gate}_l{layer}{rev or ''}"
    if m := _OUR_DEC.match(key):
        kind, gate, layer = m.groups()
        return f"decoder.rnn.layers.{layer}.{kind}_{gate}"
    if key in _BACK:
        return _BACK[key]
    raise ValueError(f"our weight {key!r} has no place in an Eole bench-small (tied embeddings, another attention?)")


def eole_to_ours(state: dict) -> dict:
    """Our state dict of an Eole bench-small's (``model.00.safetensors``)."""
    return {(k := _our_name(key)): _moved(k, value) for key, value in state.items()}


def ours_to_eole(state: dict) -> dict:
    """An Eole bench-small's state dict of ours: the inverse of ``eole_to_ours``."""
    return {_eole_name(key): _moved(key, value) for key, value in state.items()}


def _safetensors(python: Path, command: str, *paths: Path) -> None:
    """safetensors lives in Eole's venv, not ours: convert there between .safetensors and torch.save files."""
    subprocess.run([str(python), "-c", command, *map(str, paths)], check=True)


def load_eole(folder: Path, python: Path, tmp: Path) -> tuple[Seq2Seq, list[str], list[str]]:
    """Eole's model in ours (eval mode) and its source and target vocabularies (Eole's id order)."""
    config = json.loads((folder / "config.json").read_text())
    cfg = eole_model_config(config, str(folder / "config.json"))
    vocab = json.loads((folder / "vocab.json").read_text())
    if vocab["src"][:4] != EOLE_SPECIALS or vocab["tgt"][:4] != EOLE_SPECIALS:
        raise ValueError(f"{folder / 'vocab.json'}: the vocabularies do not start {' '.join(EOLE_SPECIALS)}")
    _safetensors(python, "import sys, torch; from safetensors.torch import load_file; "
                 "torch.save(load_file(sys.argv[1]), sys.argv[2])", folder / "model.00.safetensors", tmp / "eole.pt")
    state = eole_to_ours(torch.load(tmp / "eole.pt"))
    model = build_model(cfg, state["encoder.embed.weight"].size(0), state["decoder.out.weight"].size(0))
    model.load_state_dict(state)
    return model.eval(), vocab["src"], vocab["tgt"]


def write_eole(checkpoint: str, template: Path, python: Path, out: Path) -> None:
    """Our checkpoint as an Eole model folder (``template``: an Eole bench-small's folder, for its config.json)."""
    model, tok, cfg, _ = load_model(checkpoint)
    config = json.loads((template / "config.json").read_text())
    if not same_model(eole_model_config(config), cfg.model):
        raise ValueError(f"{checkpoint}: its model is not {template}'s (our bench_small is Eole's bench-small)")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    vocab = json.loads((template / "vocab.json").read_text())
    vocab["src"] = EOLE_SPECIALS + [tok.src.id_to_piece(i) for i in range(4, tok.src_vocab_size)]
    vocab["tgt"] = EOLE_SPECIALS + [tok.tgt.id_to_piece(i) for i in range(4, tok.tgt_vocab_size)]
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    torch.save(ours_to_eole(model.state_dict()), out / "ours.pt")
    _safetensors(python, "import sys, torch; from safetensors.torch import save_file; "
                 "save_file(torch.load(sys.argv[1]), sys.argv[2])", out / "ours.pt", out / "model.00.safetensors")
    (out / "ours.pt").unlink()


def our_search(model: Seq2Seq, src: list[list[int]], beam: int, stop: str) -> list[list[int]]:
    """Our search's best hypothesis (ids) of each source, in input order, at our default batches."""
    out: list[list[int]] = [[] for _ in src]
    for batch in inference_batches(src, max(8000 // beam, 250), 1000):
        hyps = beam_search(model, batch, beam=beam, stop=stop)
        for row, tokens in zip(batch.index.tolist(), hyps.tokens):
            out[row] = tokens
    return out


def bleu(pieces: list[list[str]], spm: Path, harness: Path, venvs: Path, work: Path) -> float:
    """The harness's BLEU of hypotheses given as pieces (detokenized by ``spm``)."""
    hyp = work / "hyp.txt"
    hyp.write_text("".join(" ".join(p) + "\n" for p in pieces), encoding="utf-8")
    subprocess.run([str(venvs / "bench-venv" / "bin" / "python"), str(harness / "bench_util.py"), "score", "--hyp",
                    str(hyp), "--spm", str(spm), "--out", str(work / "score.json")], check=True, stdout=subprocess.DEVNULL)
    return json.loads((work / "score.json").read_text())["bleu"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ours", required=True, help="our bench_small checkpoint (a side_by_side round's ours_budget last.pt)")
    p.add_argument("--eole", type=Path, required=True, help="Eole's trained model folder (work/eole/budget/step_N)")
    p.add_argument("--harness", type=Path, default=Path("~/.cache/nmt-peers/bench").expanduser(),
                   help="the harness's writable copy (data/, bench_util.py; its venvs beside it)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    venvs, python = args.harness.parent, args.harness.parent / "eole-venv" / "bin" / "python"
    for need in (args.harness / "bench_util.py", args.eole / "config.json", Path(args.ours), python):
        if not need.exists():
            p.error(f"{need}: not found")
    set_threads(args.threads)
    data = args.harness / "data"
    raw_src = (data / "raw" / "test.zh").read_text(encoding="utf-8").splitlines()
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # Eole's weights: the harness's pieces through Eole's vocabulary (unknown: <unk>), ids swapped into ours
        eole, eole_src, eole_tgt = load_eole(args.eole, python, tmp)
        index = {piece: i for i, piece in enumerate(eole_src)}
        swap = {0: 1, 1: 0}
        src = [[swap.get(index.get(w, 0), index.get(w, 0)) for w in line.split()]
               for line in (data / "sp" / "test.zh").read_text(encoding="utf-8").splitlines()]
        ours, tok, cfg, _ = load_model(args.ours)
        normalize = src_normalizer(cfg.data)
        our_src = tok.encode_src([normalize(t) for t in raw_src])
        our_folder = tmp / "ours_as_eole"
        write_eole(args.ours, args.eole, python, our_folder)
        our_sp = tmp / "spm.tgt.model"
        our_sp.write_bytes(tok.tgt.serialized_model_proto())
        sides = {"eole": (eole, src, lambda ids: [eole_tgt[swap.get(i, i)] for i in ids], data / "spm.en.model", args.eole),
                 "ours": (ours, our_src, tok.tgt_pieces, our_sp, our_folder)}
        greedy_ids = {}
        for weights, (model, ids, pieces, spm, folder) in sides.items():
            for name, beam, stop in OUR_SEARCHES:
                hyps = our_search(model, ids, beam, stop)
                if name == "greedy":
                    greedy_ids[weights] = [" ".join(pieces(h)) for h in hyps]
                rows.append({"weights": weights, "search": "ours", "decode": name, "batch": "default",
                             "bleu": bleu([pieces(h) for h in hyps], spm, args.harness, venvs, tmp)})
                print(json.dumps(rows[-1]), flush=True)
            if weights == "ours":  # Eole reads our pieces
                (tmp / "ours_src.txt").write_text("".join(" ".join(tok.src.id_to_piece(i) for i in s) + "\n"
                                                          for s in our_src), encoding="utf-8")
            for name, beam, batch in EOLE_SEARCHES:
                src_file = tmp / "ours_src.txt" if weights == "ours" else None
                got = peer_decode("eole", args.harness, str(folder), beam, batch, args.threads, tmp, venvs, src=src_file, spm=spm)
                row = {"weights": weights, "search": "eole", "decode": name, "batch": batch, "bleu": got["bleu"]}
                if name == "greedy" and batch == "sents:1":  # the same model, the same greedy search: the same output?
                    theirs = (tmp / "hyp.txt").read_text(encoding="utf-8").splitlines()
                    same = sum(a.split() == b.split() for a, b in zip(greedy_ids[weights], theirs))
                    row["same_as_our_greedy"] = same / len(theirs)
                rows.append(row)
                print(json.dumps(rows[-1]), flush=True)
    if args.json:
        record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(),
                  "command": sys.argv, "cpu": cpu_info(), "threads": args.threads, "ours": args.ours,
                  "eole": str(args.eole), "test_sentences": len(raw_src), "rows": rows}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
