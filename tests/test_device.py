"""Device choice and its CUDA defaults: set where CUDA is picked, untouched (and CUDA unopened) for the CPU."""

from __future__ import annotations

import pytest
import torch

from nmt.device import pick_device


@pytest.fixture
def matmul_precision():
    """The cuBLAS fp32 precision flag, restored after the test."""
    before = torch.backends.cuda.matmul.fp32_precision
    yield lambda: torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = before


def test_cpu_leaves_cuda_settings_and_cuda_alone(cuda_untouchable, matmul_precision):
    before = matmul_precision()
    assert pick_device("cpu") == torch.device("cpu")
    assert matmul_precision() == before != "tf32"


def test_picking_cuda_turns_on_tf32_matmuls(cuda_untouchable, matmul_precision):
    """fp32 on a GPU without TF32 runs its matmuls on the slow fp32 path (torch's default)."""
    assert pick_device("auto") == torch.device("cuda")
    assert matmul_precision() == "tf32"
