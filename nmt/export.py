"""Export a model for deployment without PyTorch: ``python -m nmt.export RUN_DIR_OR_CKPT OUT_DIR --format onnx``.

OUT_DIR receives the ONNX graphs, the sentencepiece models and ``meta.json``; decode it with
``python -m nmt.onnx_runtime OUT_DIR "你好。"`` or serve it with ``python -m nmt.serve --onnx OUT_DIR``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nmt.checkpoint import CheckpointError, load_model


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt.export", description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory (uses checkpoints/best.pt) or checkpoint file")
    p.add_argument("out", type=Path, help="output folder")
    p.add_argument("--format", choices=("onnx",), default="onnx", help="onnx (the default and only format)")
    p.add_argument("--int8", action="store_true",
                   help="int8 weights, activations quantized at each matmul (onnxruntime's dynamic quantizer)")
    args = p.parse_args(argv)
    try:
        from nmt.export_onnx import export_onnx

        model, tok, cfg, _ = load_model(args.model, "cpu")
        files = export_onnx(model, tok, cfg, args.out, int8=args.int8)
    except (ImportError, CheckpointError, OSError) as e:
        why = f"{e.name or e}: install the onnx extra (pip install 'nmt[onnx]')" if isinstance(e, ImportError) else e
        print(f"nmt.export: error: {why}", file=sys.stderr)
        return 1
    print(f"exported {args.model} to {args.out}/: {', '.join(f.name for f in files)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
