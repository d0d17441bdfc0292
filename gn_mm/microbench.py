"""Instruction ceilings: tensor-core throughput with no global memory traffic, per MMA variant.

* mma.sync (cuda_src/sm80_mma_bench.cu): "registers" is a real GEMM's inner loop minus memory (2 A x 4 B
  fragments per warp, one register of each rewritten per iteration); "ldmatrix" is sm80_mm's own inner loop
  (64x64 warp tile reloaded from shared memory every k-step).
* wgmma (cuda_src/sm90_wgmma_bench.cu, sm_90a): two warpgroups per SM issuing m64n256 wgmmas back to back
  from shared memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import runtime
from .arch import Arch
from .dtypes import ACC_KIND
from .timing import bench
from .variant_table import Variant, require_arch


@dataclass(frozen=True)
class Loop:
    stem: str
    function: str
    per_iter: int      # instructions per warp (mma.sync) or warpgroup (wgmma) per iteration
    blocks_per_sm: int
    threads: int
    issuers: int       # threads per issuing unit: 32 (warp) or 128 (warpgroup)


LOOPS = {
    "registers": Loop("sm80_mma_bench", "sm80_mma_bench", 8, 8, 128, 32),
    "ldmatrix": Loop("sm80_mma_bench", "sm80_ldsm_mma_bench", 32, 1, 256, 32),
    "wgmma": Loop("sm90_wgmma_bench", "sm90_wgmma_bench", 4, 1, 256, 128),
}
WGMMA_N = 256  # the widest wgmma: the fewest instructions per flop


def default_loop(variant: Variant) -> str:
    return "wgmma" if variant.path == "wgmma" else "registers"


def spec(variant: Variant, arch: Arch, loop: str | None = None) -> runtime.KernelSpec:
    """The microbenchmark of `variant` compiled for `arch` (ArchError below the variant's minimum)."""
    require_arch(variant, arch)
    loop = loop or default_loop(variant)
    lp = LOOPS[loop]
    params = {"variant_name": variant.name, "acc_kind": ACC_KIND[variant.acc]}
    if variant.path == "wgmma":
        params.update(variant.wgmma_operands(WGMMA_N))
        target = Arch(arch.cc, "a")  # wgmma is an arch-specific (sm_90a) feature
    else:
        params["instr"] = variant.instr
        target = Arch(arch.cc)
    return runtime.KernelSpec.make(lp.stem, lp.function, params, target)


def instruction_flops(variant: Variant) -> int:
    m, n = variant.tile
    if variant.path == "wgmma":
        n = WGMMA_N
    return 2 * m * n * variant.k


def mma_ceiling(variant: Variant, device=None, iters: int = 4096, loop: str | None = None, reps: int = 20) -> dict:
    """TFLOP/s (TOPS for integers) of the variant's instruction in a microbenchmark loop on this GPU."""
    device = torch.device(device or "cuda")
    loop = loop or default_loop(variant)
    lp = LOOPS[loop]
    kern = runtime.kernel(spec(variant, Arch.of_device(device), loop), device)
    blocks = torch.cuda.get_device_properties(device).multi_processor_count * lp.blocks_per_sm
    seed = torch.randint(0, 2**31 - 1, (64,), dtype=torch.int32, device=device)
    out = torch.empty(blocks * lp.threads, dtype=torch.int32, device=device)
    t = bench(lambda i: runtime.launch(kern, (blocks, 1, 1), (lp.threads, 1, 1), [out, seed, iters]), reps=reps)
    flops = instruction_flops(variant) * lp.per_iter * iters * (blocks * lp.threads // lp.issuers)
    return {"variant": variant.name, "path": variant.path, "instr": variant.ptx(WGMMA_N), "loop": loop,
            "tflops": flops / t["median_ms"] / 1e9, **t}
