"""When the decoder step is compiled: trainer.compile's auto rule (training falls back in test_train.py)."""

from __future__ import annotations

import torch

from nmt.compiled_step import wanted

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_auto_compiles_the_input_feeding_step_on_cuda_only(make_model):
    """null (auto): on CUDA, where the step loop is launch-bound; never on the CPU (exactly as
    before), nor for a decoder without input feeding (one RNN call, no step loop in training)."""
    feeding, plain = make_model().decoder, make_model(input_feeding=False).decoder
    assert wanted(None, CUDA, feeding)
    assert not wanted(None, CPU, feeding) and not wanted(None, CUDA, plain)
    assert wanted(True, CPU, feeding) and not wanted(False, CUDA, feeding)  # an explicit setting wins
