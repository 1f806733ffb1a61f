"""Export a model to TorchScript: ``python -m nmt.export RUN_DIR_OR_CKPT OUT_DIR``.

OUT_DIR receives ``model.ts`` (encoder, decoder step and a greedy loop in one TorchScript
module that maps source ids to target ids without nmt's Python classes) and the sentencepiece
models. Load it anywhere with ``torch.jit.load``::

    ts = torch.jit.load("OUT_DIR/model.ts")
    out = ts(src_ids, src_lens)   # (batch, src_len) long, (batch,) long -> (batch, steps) long, EOS-padded
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from nmt.checkpoint import CheckpointError, load_model
from nmt.decoder import Source
from nmt.model import Seq2Seq
from nmt.tokenizer import BOS, EOS, PAD


class _Encode(nn.Module):
    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor):
        source, state = self.model.encode(src, src_lens, src_lens)
        h, c = state if isinstance(state, tuple) else (state, torch.zeros_like(state))
        return source.memory, source.keys, source.mask, source.lens, h, c


class _Step(nn.Module):
    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.decoder = model.decoder
        self.lstm = model.decoder.rnn.mode == "LSTM"

    def forward(self, y, feed, h, c, memory, keys, mask, lens, position):
        state = (h, c) if self.lstm else h
        logp, feed, state, _, _ = self.decoder.step(y, feed, state, Source(memory, keys, mask, lens), position)
        h, c = state if self.lstm else (state, c)
        return logp, feed, h, c


class Greedy(nn.Module):
    """Greedy decoding around traced encoder and step modules; scripted as a whole."""

    def __init__(self, encode: nn.Module, step: nn.Module, hidden: int, ratio: float = 2.0, extra: int = 10,
                 cap: int = 200):
        super().__init__()
        self.encode, self.step = encode, step
        self.hidden, self.ratio, self.extra, self.cap = hidden, ratio, extra, cap
        self.bos, self.eos, self.pad = BOS, EOS, PAD

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor) -> torch.Tensor:
        memory, keys, mask, lens, h, c = self.encode(src, src_lens)
        n = src.size(0)
        limit = (src_lens.float() * self.ratio + self.extra).long().clamp(max=self.cap)  # (batch,)
        y = torch.full([n], self.bos, dtype=torch.long, device=src.device)
        feed = memory.new_zeros([n, 1, self.hidden])
        done = torch.zeros([n], dtype=torch.bool, device=src.device)
        only_eos = torch.full([1], float("-inf"), device=src.device)
        out: list[torch.Tensor] = []
        for t in range(int(limit.max()) + 1):
            position = torch.full([1], float(t), device=src.device)
            logp, feed, h, c = self.step(y, feed, h, c, memory, keys, mask, lens, position)
            logp[:, self.pad] = float("-inf")
            over = limit <= t
            logp = torch.where(over.unsqueeze(1), only_eos.expand_as(logp), logp)
            logp[:, self.eos] = torch.where(over, torch.zeros_like(logp[:, self.eos]), logp[:, self.eos])
            y = logp.argmax(-1).masked_fill(done, self.eos)
            out.append(y)
            done = done | (y == self.eos)
            if bool(done.all()):
                break
        return torch.stack(out, 1)


def export(model: Seq2Seq) -> torch.jit.ScriptModule:
    """Trace encoder and step on a small example batch, script the loop around them."""
    model = model.eval().cpu()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
    lens = torch.tensor([4, 2])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shapes fixed by the example are not used
        encode = torch.jit.trace(_Encode(model), (src, lens), check_trace=False)
        memory, keys, mask, lens_f, h, c = encode(src, lens)
        feed = memory.new_zeros(2, 1, model.decoder.hidden)
        y = torch.full((2,), BOS, dtype=torch.long)
        step = torch.jit.trace(_Step(model), (y, feed, h, c, memory, keys, mask, lens_f, torch.zeros(1)),
                               check_trace=False)
    return torch.jit.script(Greedy(encode, step, model.decoder.hidden))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt.export", description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory (uses checkpoints/best.pt) or checkpoint file")
    p.add_argument("out", type=Path, help="output folder")
    args = p.parse_args(argv)
    try:
        model, tok, _, _ = load_model(args.model, "cpu")
        ts = export(model)
        args.out.mkdir(parents=True, exist_ok=True)
        ts.save(str(args.out / "model.ts"))
        (args.out / "spm.src.model").write_bytes(tok.src_model)
        (args.out / "spm.tgt.model").write_bytes(tok.tgt_model)
    except (CheckpointError, OSError) as e:
        print(f"nmt.export: error: {e}", file=sys.stderr)
        return 1
    print(f"exported {args.model} to {args.out}/model.ts", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
