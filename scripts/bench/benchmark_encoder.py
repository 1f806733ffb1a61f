"""What the encoder's separate layers cost against one multi-layer RNN with built-in dropout.

    python scripts/bench/benchmark_encoder.py --json encoder.json          # bench-small's encoder, training steps
    python scripts/bench/benchmark_encoder.py --device cuda --batch 128    # on a GPU (cuDNN's fused stack)

``nmt.encoder.Encoder`` runs its layers as one-layer RNNs with torch-RNG dropout between them, so that
a checkpoint can restore every dropout mask (cuDNN keeps a multi-layer RNN's inter-layer dropout state
where no checkpoint reaches). The reference is ``nn.LSTM(layers, dropout=p)`` on the same weights.
Forward + backward of the encoder alone, alternating the two on the same batch so that machine drift
hits both alike; medians, and their ratio. Writes a record (date, commit, command, CPU or GPU, figures).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.device import pick_device, set_threads
from nmt.encoder import RNNS, Encoder

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.timing import alternate  # noqa: E402
from scripts.records.record import record, save  # noqa: E402


class MultiLayerEncoder(nn.Module):
    """The reference: the same embedding and weights in one ``nn.LSTM(layers, dropout)``."""

    def __init__(self, enc: Encoder, dropout: float):
        super().__init__()
        self.embed, self.dropout = enc.embed, enc.dropout
        first = enc.rnn[0]
        self.rnn = RNNS[first.mode.lower()](first.input_size, first.hidden_size, len(enc.rnn), batch_first=True,
                                            bidirectional=first.bidirectional, dropout=dropout)

    def forward(self, src: torch.Tensor, host_lens: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(self.dropout(self.embed(src)), host_lens, batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=src.size(1))[0]


def timer(module: nn.Module, src: torch.Tensor, lens: torch.Tensor, device: torch.device):
    """One forward + backward of ``module`` on the batch, as a timed callable (seconds)."""

    def step() -> float:
        t0 = time.perf_counter()
        out = module(src, lens)
        (out[0] if isinstance(out, tuple) else out).float().pow(2).mean().backward()
        module.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - t0

    return step


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--max-len", type=int, default=30, help="source lengths drawn from 5..max-len")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--steps", type=int, default=30, help="measured steps of each (after 3 warm-up steps)")
    p.add_argument("--json")
    args = p.parse_args()
    set_threads(0)
    device = pick_device(args.device)
    torch.manual_seed(0)
    stacked = Encoder(4000, args.hidden, args.hidden, args.layers, True, "lstm", args.dropout).to(device).train()
    multi = MultiLayerEncoder(stacked, args.dropout).to(device).train()
    rng = random.Random(0)
    lens = torch.tensor(sorted((rng.randint(5, args.max_len) for _ in range(args.batch)), reverse=True))
    src = torch.tensor([[rng.randrange(4, 4000) for _ in range(args.max_len)] for _ in range(args.batch)], device=device)
    steps = {"stacked": timer(stacked, src, lens, device), "multi_layer": timer(multi, src, lens, device)}
    med = {k: statistics.median(v) for k, v in alternate(list(steps), args.steps, lambda k: steps[k](), warmup=3).items()}
    rec = record({"device": str(device), "torch": torch.__version__, "batch": args.batch, "max_len": args.max_len,
                  "layers": args.layers, "hidden": args.hidden, "dropout": args.dropout, "stacked_ms": med["stacked"] * 1e3,
                  "multi_layer_ms": med["multi_layer"] * 1e3, "stacked_over_multi_layer": med["stacked"] / med["multi_layer"]})
    save(args.json, rec)
    print(f"encoder forward+backward, median of {args.steps}: stacked {rec['stacked_ms']:.2f} ms, "
          f"one multi-layer module {rec['multi_layer_ms']:.2f} ms, ratio {rec['stacked_over_multi_layer']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
