"""ONNX export: the encoder and one decoder step as two graphs, with everything else to decode.

The folder holds ``encoder.onnx``, ``decoder_step.onnx``, the sentencepiece models and
``meta.json`` (normalization, special ids, length limits, attention settings);
``nmt/onnx_runtime.py`` decodes it with onnxruntime, numpy and sentencepiece only.

The step takes its state by rows (a beam's hypotheses) and the source by sentence, as ``nmt.search`` does:
traced with two rows a sentence, its attention goes through ``LuongAttention``'s k-rows path, which holds
for any k (1 for greedy). ``meta.json`` says so (``shared_source``); folders exported before read as one
source row per state row, and the runtime repeats the sources for them.

The graphs are traced by torch's TorchScript-based ONNX exporter: it is the one that maps a
packed (bi)LSTM to ONNX's ``LSTM`` with ``sequence_lens``; torch.export cannot trace packing.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import torch
from torch import nn

from nmt import search
from nmt.build import build_model
from nmt.decode import MAX_SRC_PIECES
from nmt.decoder import Source
from nmt.model import Seq2Seq
from nmt.tokenizer import BOS, EOS, PAD, UNK, Tokenizer
from nmt.version import __version__

OPSET = 17
ENCODER_OUT = ["memory", "keys", "mask", "lens", "h", "c"]
STEP_IN = ["y", "feed", "h", "c", "memory", "keys", "mask", "lens", "position"]
STEP_OUT = ["logp", "feed_out", "h_out", "c_out", "attention", "centre"]


class _Encoder(nn.Module):
    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor):
        """src: (batch, src_len) long; src_lens: (batch,) long -> Source parts and (layers, batch, hidden) h, c."""
        source, state = self.model.encode(src, src_lens, src_lens)
        h, c = state if isinstance(state, tuple) else (state, torch.zeros_like(state))
        return source.memory, source.keys, source.mask, source.lens, h, c


class _Step(nn.Module):
    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.decoder = model.decoder
        self.lstm = model.decoder.rnn[0].mode == "LSTM"

    def forward(self, y, feed, h, c, memory, keys, mask, lens, position):
        """One step: (rows,) y, (rows, 1, hidden) feed, (layers, rows, hidden) h, c, Source parts of the sentences
        (rows = k · sentences, each sentence's k rows together), (1,) position."""
        state = (h, c) if self.lstm else h
        logp, feed, state, a, p = self.decoder.step(y, feed, state, Source(memory, keys, mask, lens), position)
        h, c = state if self.lstm else (state, c + 0.0)  # c + 0: a GRU's unused c stays a graph input
        centre = p.squeeze(1) if p is not None else torch.zeros_like(y, dtype=lens.dtype)  # (rows,)
        return logp, feed, h, c, a.squeeze(1), centre


SOURCE = {"memory", "keys", "mask", "lens"}  # the step's inputs by sentence; the others by row (hypothesis)


def _axes(names: list[str], batch_dim: dict, src_dim: set, rows: str = "batch") -> dict:
    """Dynamic axes: the batch axis (``rows`` for the step's state, "batch" for sources) and src_len."""
    return {n: {batch_dim.get(n, 0): "batch" if n in SOURCE else rows, **({1: "src_len"} if n in src_dim else {})}
            for n in names}


def export_onnx(model: Seq2Seq, tok: Tokenizer, cfg, out: Path, int8: bool = False) -> list[Path]:
    """Write the ONNX folder for ``model``; returns the files written. ``int8``: the decoder step's matmuls quantized
    to int8 by onnxruntime's dynamic quantizer (``quantize_int8``)."""
    if not model.decoder.shares_source:  # the step graph takes the source once per sentence: the fast engine's step
        fast = build_model(cfg.model, model.encoder.embed.num_embeddings, model.decoder.embed.num_embeddings)
        fast.load_state_dict(model.state_dict())
        model = fast
    model = model.eval().cpu()
    out.mkdir(parents=True, exist_ok=True)
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
    lens = torch.tensor([4, 2])
    state_batch = {"h": 1, "c": 1, "h_out": 1, "c_out": 1}
    src_dims = {"src", "memory", "keys", "mask", "attention"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation notice and tracer warnings on fixed shapes
        enc = _Encoder(model)
        memory, keys, mask, lens_f, h, c = enc(src, lens)
        torch.onnx.export(enc, (src, lens), str(out / "encoder.onnx"), dynamo=False, opset_version=OPSET,
                          input_names=["src", "src_lens"], output_names=ENCODER_OUT,
                          dynamic_axes=_axes(["src", "src_lens", *ENCODER_OUT], state_batch, src_dims))
        # two rows (hypotheses) a sentence: the trace takes the attention's k-rows path (nmt/engine/attention.py)
        feed = memory.new_zeros(4, 1, model.decoder.hidden)
        y = torch.full((4,), BOS, dtype=torch.long)
        h, c = h.repeat_interleave(2, 1), c.repeat_interleave(2, 1)  # (layers, rows, hidden)
        step_args = (y, feed, h, c, memory, keys, mask, lens_f, torch.zeros(1))
        _, _, _, _, _, centre = _Step(model)(*step_args)
        torch.onnx.export(_Step(model), step_args, str(out / "decoder_step.onnx"), dynamo=False, opset_version=OPSET,
                          input_names=STEP_IN, output_names=STEP_OUT,
                          dynamic_axes=_axes(STEP_IN[:-1] + STEP_OUT, state_batch, src_dims, rows="rows"))
    if int8:  # the decoder step only, as nmt/int8.py: the encoder (once a batch) in int8 costs BLEU, not time
        quantize_int8(out / "decoder_step.onnx")
    (out / "spm.src.model").write_bytes(tok.src_model)
    (out / "spm.tgt.model").write_bytes(tok.tgt_model)
    a, data = cfg.model.attention, cfg.data
    meta = {
        "format": "nmt-onnx/1", "nmt_version": __version__,
        "src_lang": data.src_lang, "tgt_lang": data.tgt_lang,
        "normalization": {"unicode": "NFKC", "whitespace": "collapsed",
                          "opencc": data.opencc if data.src_lang.startswith("zh") else None},
        "pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS, "max_src_pieces": MAX_SRC_PIECES,
        "max_len": {"ratio": search.RATIO, "extra": search.EXTRA, "cap": search.CAP},  # nmt.search's limits
        "hidden": model.decoder.hidden, "layers": len(model.decoder.rnn),
        "score": a.score, "mode": a.mode, "window": a.window, "has_centre": a.mode != "global",
        "int8": int8, "shared_source": True,  # the step takes the source once per sentence (module docstring)
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return [out / n for n in ("encoder.onnx", "decoder_step.onnx", "spm.src.model", "spm.tgt.model", "meta.json")]


def quantize_int8(graph: Path) -> None:
    """Rewrite ``graph`` with int8 weights (per output channel) and activations quantized at each call: onnxruntime's
    ``quantize_dynamic`` (MatMul, Gemm, LSTM, GRU), the quantizer of the runtime that runs the graph. Weights keep to
    7 bits (``reduce_range``): the graph may run on any CPU, and without VNNI onnxruntime's uint8 × int8 products add
    in 16 bits and saturate (on an AVX2 EPYC full-range graphs of a peaked model lost every best hypothesis)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = graph.with_suffix(".int8.onnx")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # it logs "consider pre-processing" through the root logger at every call
    try:
        quantize_dynamic(graph, tmp, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    finally:
        root.setLevel(level)
    os.replace(tmp, graph)
