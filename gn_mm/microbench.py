"""Instruction ceilings: register-only mma.sync throughput (cuda_src/sm80_mma_bench.cu) and its SASS mix."""

from __future__ import annotations

import re

import torch

from . import runtime
from .arch import Arch
from .dtypes import ACC_KIND
from .timing import bench
from .variant_table import Variant

_K_OF_SHAPE = re.compile(r"m16n8k(\d+)")


# Microbenchmark kernels (cuda_src/sm80_mma_bench.cu): MMAs per warp per iteration, blocks per SM, threads.
LOOPS = {
    # register-only: 2 A x 4 B fragments, one register of each rewritten per iteration
    "registers": ("sm80_mma_bench", 8, 8, 128),
    # sm80_mm's inner loop: 64x64 warp tile reloaded by ldmatrix every k-step, 8 warps per SM
    "ldmatrix": ("sm80_ldsm_mma_bench", 32, 1, 256),
}


def spec(variant: Variant, arch: Arch, loop: str = "registers") -> runtime.KernelSpec:
    params = {"variant_name": variant.name, "instr": variant.instr, "acc_kind": ACC_KIND[variant.acc]}
    return runtime.KernelSpec.make("sm80_mma_bench", LOOPS[loop][0], params, Arch(arch.cc))


def mma_ceiling(variant: Variant, device=None, iters: int = 4096, loop: str = "registers") -> dict:
    """TFLOP/s (TOPS for integers) of the variant's mma.sync in a microbenchmark loop on this GPU."""
    device = torch.device(device or "cuda")
    arch = Arch.of_device(device)
    kern = runtime.kernel(spec(variant, arch, loop), device)
    _, mmas, per_sm, threads = LOOPS[loop]
    blocks = torch.cuda.get_device_properties(device).multi_processor_count * per_sm
    seed = torch.randint(0, 2**31 - 1, (64,), dtype=torch.int32, device=device)
    out = torch.empty(blocks * threads, dtype=torch.int32, device=device)
    t = bench(lambda i: runtime.launch(kern, (blocks, 1, 1), (threads, 1, 1), [out, seed, iters]), reps=20)
    k = int(_K_OF_SHAPE.search(variant.shape).group(1))
    flops = 2 * 16 * 8 * k * mmas * iters * (blocks * threads // 32)
    return {"variant": variant.name, "instr": variant.instr, "loop": loop,
            "tflops": flops / t["median_ms"] / 1e9, **t}
