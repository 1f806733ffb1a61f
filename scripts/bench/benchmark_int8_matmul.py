"""The decoder's matmuls in each kind of int8 beside fp32 and bf16, at decoding shapes, written as a record: why
``--precision int8`` uses PyTorch's dynamic quantization and the ONNX export onnxruntime's quantizer.

    python scripts/bench/benchmark_int8_matmul.py --json docs/results/int8_matmul.json

Kinds: ``fp32`` (``F.linear``), ``bf16`` (weights cast once, the input at each call), ``torch_int8``
(``nmt.int8.int8_linear``: torch.ao's dynamic int8 Linear, its weights packed for the default quantized engine),
``torch_int8_fbgemm`` and ``torch_int8_onednn`` (the same, packed for that engine; where torch has it),
``torchao_int8`` (torchao's ``Int8DynamicActivationInt8WeightConfig``, eager; only where torchao is installed),
``onnxruntime_fp32`` and ``onnxruntime_int8`` (one MatMul graph, quantized by
``onnxruntime.quantization.quantize_dynamic``; only where onnxruntime is installed).
Kinds alternate within each round; the figures are medians of the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import logging
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn

from nmt.device import set_threads
from nmt.int8 import int8_linear

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.timing import alternate  # noqa: E402
from scripts.records.record import record, save  # noqa: E402

# (rows, in, out): the vocabulary projection and an LSTM layer's step at a server's micro-batch (16 sentences ×
# beam 5) and at nmt.evaluate's batches (about 1,000 rows), hidden 256 and 4,000 pieces as the recipes have
SHAPES = [(80, 256, 4000), (1000, 256, 4000), (80, 512, 1024), (1000, 512, 1024)]


@contextlib.contextmanager
def quantized_engine(engine: str) -> Iterator[None]:
    """Within: weights are packed for ``engine`` (``torch.backends.quantized.engine``); a packed weight keeps its
    engine's kernels afterwards."""
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


def kinds(lin: nn.Linear, folder: Path) -> dict[str, Callable[[torch.Tensor], object]]:
    """Each kind's callable computing ``lin`` (those whose library is missing are left out)."""
    w16, b16 = lin.weight.bfloat16(), lin.bias.bfloat16()
    out: dict[str, Callable] = {"fp32": lin, "bf16": lambda x: nn.functional.linear(x.bfloat16(), w16, b16),
                                "torch_int8": int8_linear(lin.weight, lin.bias)}
    for engine in ("fbgemm", "onednn"):
        if engine in torch.backends.quantized.supported_engines:
            with quantized_engine(engine):  # the packed weight keeps its engine's kernels
                out[f"torch_int8_{engine}"] = int8_linear(lin.weight, lin.bias)
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        ao = copy.deepcopy(nn.Sequential(lin))
        quantize_(ao, Int8DynamicActivationInt8WeightConfig())
        out["torchao_int8"] = ao
    except ImportError:
        pass
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        return out
    fp32, int8 = folder / "linear.onnx", folder / "linear.int8.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(lin, (torch.zeros(2, lin.in_features),), str(fp32), dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "rows"}})
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice through the root logger
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, per_channel=True)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = torch.get_num_threads()
    for name, path in (("onnxruntime_fp32", fp32), ("onnxruntime_int8", int8)):
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        out[name] = lambda x, s=session: s.run(None, {"x": x.numpy()})
    return out


def time_ms(fn: Callable, x: torch.Tensor, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - t) / calls * 1000


@torch.no_grad()
def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=30, help="calls timed per kind and round")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (default: all cores)")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, i, o in SHAPES:
            lin, x = nn.Linear(i, o), torch.randn(n, i)
            fns = kinds(lin, Path(tmp))
            for fn in fns.values():  # warm-up: packing, oneDNN primitives, sessions
                time_ms(fn, x, 3)
            ms = alternate(list(fns), args.rounds, lambda k, fns=fns, x=x: time_ms(fns[k], x, args.calls))
            med = {k: statistics.median(v) for k, v in ms.items()}
            rows.append({"rows": n, "in": i, "out": o, "ms": med, "vs_fp32": {k: med["fp32"] / v for k, v in med.items()}})
            print(f"{n:>5} x {i:>4} -> {o:>5}: " + ", ".join(f"{k} {v:.3f} ms ({med['fp32'] / v:.2f}x)" for k, v in med.items()))
    versions = {"torch": torch.__version__}
    for lib in ("torchao", "onnxruntime"):
        try:
            versions[lib] = __import__(lib).__version__
        except ImportError:
            versions[lib] = None
    save(args.json, record({"threads": torch.get_num_threads(), "versions": versions, "rounds": args.rounds,
                            "calls": args.calls, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
