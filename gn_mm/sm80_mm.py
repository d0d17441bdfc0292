"""The sm80_mm kernel family: mma.sync GEMM for every variant on sm_80+ (cuda_src/sm80_mm.cu)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import runtime
from .arch import Arch
from .config import Sm80Config
from .dtypes import ACC_KIND, BY_NAME, OUT_KIND
from .runtime import KernelSpec
from .variant_table import Variant

STEM = "sm80_mm"


def min_blocks(variant: Variant, config: Sm80Config, arch: Arch) -> int:
    """__launch_bounds__ minimum-blocks hint (0: none). 4-warp CTAs get 1 (one CTA per SM is enough): without
    it ptxas squeezes them into few registers and spills a few bytes. Emulated instructions on larger warp
    tiles, and 8-warp CTAs, spill only with the hint. Empirical (ptxas 13.0); tests/test_compile_offline.py
    compiles every combination the heuristic can pick and fails on any spill."""
    emulated = arch.cc in variant.emulated_on
    return 1 if config.threads <= 128 and (not emulated or config.warp_tile <= 1024) else 0


def spec(variant: Variant, out: str, config: Sm80Config, arch: Arch) -> KernelSpec:
    bits = BY_NAME[variant.a].bits
    params = {
        "variant_name": f"{variant.name}->{out}",
        "config_name": config.name,
        "instr": variant.instr,
        "acc_kind": ACC_KIND[variant.acc],
        "out_kind": OUT_KIND[out],
        "elem_bits": bits,
        "block_k": config.block_k_bytes * 8 // bits,
        "c": config,
        "min_blocks": min_blocks(variant, config, arch),
    }
    # mma.sync needs no arch-specific features: plain sm_XX (sm_90, not sm_90a).
    return KernelSpec.make(STEM, STEM, params, Arch(arch.cc), config.smem_bytes)


@dataclass(frozen=True)
class Plan:
    """Everything about one call that depends only on the problem's signature, computed once."""

    config: Sm80Config
    splits: int
    acc: str
    main: object    # loaded sm80_mm
    reduce: object  # loaded sm80_mm_reduce (split-K only)

    @classmethod
    def make(cls, variant: Variant, out: str, config: Sm80Config, splits: int, arch: Arch, device) -> "Plan":
        s = spec(variant, out, config, arch)
        reduce = runtime.kernel(s, device, "sm80_mm_reduce") if splits > 1 else None
        return cls(config, splits, variant.acc, runtime.kernel(s, device), reduce)

    def launch(self, a, b, c, **kw) -> None:
        launch(self, a, b, c, **kw)


def launch(plan: Plan, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, m: int, n: int, k_bytes: int,
           lda_bytes: int, ldb_bytes: int, scale_a: torch.Tensor | None = None,
           scale_b: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> None:
    """a: A's storage, b: B's [N, K] storage (K-major), c: the [M, N] output (rows contiguous).
    With plan.splits > 1, K is split across CTAs into a [splits, M, N] fp32/int32 workspace, then reduced."""
    cfg, splits = plan.config, plan.splits
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    dummy = c  # never dereferenced when its mode/flag is 0

    def mode(s: torch.Tensor | None) -> int:
        return 0 if s is None else (1 if s.numel() == 1 else 2)

    sa = scale_a if scale_a is not None else dummy
    sb = scale_b if scale_b is not None else dummy
    bi = bias if bias is not None else dummy
    flags = [mode(scale_a), mode(scale_b), int(bias is not None)]
    partial = dummy
    if splits > 1:
        dtype = torch.int32 if plan.acc == "s32" else torch.float32  # raw accumulator sums
        partial = torch.empty((splits, m, n), dtype=dtype, device=c.device)
    runtime.launch(plan.main, (tiles, splits, 1), (cfg.threads, 1, 1),
                   [a, b, c, sa, sb, bi, partial, m, n, k_bytes, lda_bytes, ldb_bytes, c.stride(0), *flags],
                   cfg.smem_bytes)
    if splits > 1:
        pairs = m * -(-n // 2)
        runtime.launch(plan.reduce, (-(-pairs // 256), 1, 1), (256, 1, 1),
                       [partial, c, sa, sb, bi, m, n, c.stride(0), splits, *flags])
