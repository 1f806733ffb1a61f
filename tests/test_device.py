"""Device choice and its CUDA defaults (set where CUDA is picked, untouched and CUDA unopened for the CPU),
and glibc keeping freed memory."""

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


FAULTS = """
import resource, sys, torch
import nmt.device
torch.set_num_threads(2)
kept = sys.argv[1] == "keep" and nmt.device.keep_freed_memory()
torch.manual_seed(0)
rnn, out = torch.nn.LSTM(64, 128, batch_first=True), torch.nn.Linear(128, 2000)
def step(T):  # a training step's pattern: blocks of other sizes every step
    h, _ = rnn(torch.randn(48, T, 64))
    torch.nn.functional.cross_entropy(out(h).flatten(0, 1), torch.randint(2000, (48 * T,))).backward()
for T in list(range(5, 15)) * 2:  # the heap grows to its peak (two passes: fragmentation settles)
    step(T)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(60):  # long enough that the one-time growth left is small beside it
    step(5 + i % 10)
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def test_freed_memory_is_reused_without_page_faults(cli_env):
    """glibc keeps freed blocks: steps of a training-like loop fault far fewer pages in (fresh processes)."""
    import subprocess
    import sys

    def faults(mode: str) -> tuple[str, int]:
        env = {k: v for k, v in cli_env.items() if not k.startswith("MALLOC_")}
        out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        kept, n = out.stdout.split()
        return kept, int(n)

    kept, with_it = faults("keep")
    if kept != "True":
        pytest.skip("not glibc: mallopt is not there")
    _, without = faults("default")
    assert with_it * 3 < without, (with_it, without)


ONEDNN = """
import os, torch
import nmt.device
nmt.device.set_threads(2)
w = torch.randn(1024, 512, dtype=torch.bfloat16)
for _ in range(2):  # 99 matmul shapes, twice, as training's changing batch sizes make them
    for m in range(1, 100):
        torch.randn(m, 512, dtype=torch.bfloat16) @ w.t()
print(os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"])
"""


def test_onednn_cache_is_bounded_unless_the_environment_says(cli_env):
    """set_threads bounds oneDNN's primitive cache at ONEDNN_CACHE (a user's ONEDNN_PRIMITIVE_CACHE_CAPACITY stays):
    99 bf16 matmul shapes seen twice all miss the bounded cache the second time, and hit oneDNN's own 1,024 (fresh
    processes; oneDNN's verbose log counts the hits). Memory: record ab_train_onednn_cache_caps.json."""
    import subprocess
    import sys

    from nmt.device import ONEDNN_CACHE

    def run(capacity: str = "") -> tuple[str, int, int]:
        env = {k: v for k, v in cli_env.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
        env["ONEDNN_VERBOSE"] = "all"
        if capacity:
            env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = capacity
        out = subprocess.run([sys.executable, "-c", ONEDNN], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()[-1], out.stdout.count("create:cache_hit"), out.stdout.count("primitive,exec")

    (cap, bounded_hits, runs), (theirs, default_hits, _) = run(), run("1024")
    assert (cap, theirs) == (str(ONEDNN_CACHE), "1024")
    if runs == 0:
        pytest.skip("this CPU's bf16 matmuls do not run through oneDNN primitives")
    assert ONEDNN_CACHE < 99 and bounded_hits == 0, bounded_hits  # evicted before the second pass comes back
    assert default_hits >= 99, default_hits
