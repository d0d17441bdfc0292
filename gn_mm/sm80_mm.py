"""The sm80_mm kernel family: mma.sync GEMM for every variant on sm_80+ (cuda_src/sm80_mm.cu)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import runtime, tma
from .arch import Arch
from .config import Sm80Config, tma_loads
from .dtypes import ACC_KIND, BY_NAME, OUT_KIND
from .runtime import KernelSpec
from .variant_table import Variant

STEM = "sm80_mm"
# sm80_mm's parameters: TMA maps of A and B, A, B, C, scale_a, scale_b, bias, partial, then 9 ints; mm_reduce's:
# 5 tensors, 7 ints.
KINDS = (runtime.MAP,) * 2 + (runtime.TENSOR,) * 7 + (runtime.INT,) * 9
NO_MAP = bytes(128)  # the map parameters where cp.async fills the ring (before sm_90)
REDUCE_KINDS = (runtime.TENSOR,) * 5 + (runtime.INT,) * 7


def min_blocks(variant: Variant, config: Sm80Config, arch: Arch) -> int:
    """__launch_bounds__ minimum-blocks hint (0: none). Native instructions get 1 (one CTA per SM is enough):
    without it ptxas may squeeze a CTA into 128 registers and spill a few bytes. Emulated instructions (fp8 and
    int4 on sm_90) keep it only on 4-warp CTAs with small warp tiles; elsewhere they spill only with it.
    Empirical (ptxas 13.0); tests/test_compile_offline.py compiles every combination the heuristic can pick
    and fails on any spill."""
    emulated = arch.cc in variant.emulated_on
    return 1 if not emulated or (config.threads <= 128 and config.warp_tile <= 1024) else 0


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
        "tma_loads": tma_loads(arch),
    }
    # mma.sync and TMA need no arch-specific features: plain sm_XX (sm_90, not sm_90a).
    return KernelSpec.make(STEM, STEM, params, Arch(arch.cc), config.smem(arch))


@dataclass(frozen=True)
class Plan:
    """Everything about one call that depends only on the problem's signature, computed once."""

    config: Sm80Config
    splits: int
    acc: str
    main: object    # loaded sm80_mm
    reduce: object  # loaded mm_reduce (split-K only)
    tma: bool       # the kernel reads A and B through tensor maps
    smem: int       # dynamic shared memory per CTA

    @classmethod
    def make(cls, variant: Variant, out: str, config: Sm80Config, splits: int, arch: Arch, device) -> "Plan":
        s = spec(variant, out, config, arch)
        reduce = runtime.kernel(s, device, "mm_reduce") if splits > 1 else None
        return cls(config, splits, variant.acc, runtime.kernel(s, device), reduce, tma_loads(arch), s.smem_bytes)

    def launch(self, a, b, c, **kw) -> None:
        launch(self, a, b, c, **kw)

    def workspace(self, c: torch.Tensor) -> torch.Tensor | None:
        """One call's split-K workspace (None without K splits)."""
        return partials(self.acc, self.splits, c.shape[0], c.shape[1], c) if self.splits > 1 else None


def epilogue_args(c: torch.Tensor, scale_a, scale_b, bias) -> tuple[list, list]:
    """([scale_a, scale_b, bias] pointers, [their modes / flag]) as every matmul kernel takes them. An absent
    operand passes `c` (never dereferenced: its mode is 0)."""
    if scale_a is None and scale_b is None and bias is None:  # the common call: nothing to look at
        return [c] * 3, [0, 0, 0]
    ptrs = [x if x is not None else c for x in (scale_a, scale_b, bias)]
    return ptrs, [_scale_mode(scale_a), _scale_mode(scale_b), int(bias is not None)]


def _scale_mode(s) -> int:
    return 0 if s is None else (1 if s.numel() == 1 else 2)


def partials(acc: str, splits: int, m: int, n: int, c: torch.Tensor) -> torch.Tensor:
    """The split-K workspace: raw accumulator sums, int32 for integer MMAs, fp32 otherwise."""
    if splits == 1:
        return c  # unused
    return torch.empty((splits, m, n), dtype=torch.int32 if acc == "s32" else torch.float32, device=c.device)


def reduce(kernel, partial, c, ptrs, flags, m: int, n: int, splits: int, record: list | None = None) -> None:
    """mm_reduce: sum the partials in split order and run the epilogue into c."""
    pairs = m * -(-n // 2)
    runtime.launch(kernel, (-(-pairs // 256), 1, 1), (256, 1, 1), [partial, c, *ptrs, m, n, c.stride(0), splits, *flags],
                   0, REDUCE_KINDS, record=record)


def launch(plan: Plan, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, m: int, n: int, k_bytes: int,
           lda_bytes: int, ldb_bytes: int, scale_a: torch.Tensor | None = None,
           scale_b: torch.Tensor | None = None, bias: torch.Tensor | None = None, workspace=None,
           record: list | None = None) -> None:
    """a: A's storage, b: B's [N, K] storage (K-major), c: the [M, N] output (rows contiguous).
    With plan.splits > 1, K is split across CTAs into a [splits, M, N] fp32/int32 workspace (`workspace`, or
    allocated here), then reduced. `record`: see runtime.launch."""
    cfg, splits = plan.config, plan.splits
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    ptrs, flags = epilogue_args(c, scale_a, scale_b, bias)
    partial = workspace if workspace is not None else partials(plan.acc, splits, m, n, c)
    map_a = map_b = NO_MAP
    if plan.tma:
        bk = cfg.block_k_bytes
        map_a = tma.rows_map(a.data_ptr(), m, k_bytes, lda_bytes, cfg.block_m, "a", box_bytes=bk, swizzle=bk)
        map_b = tma.rows_map(b.data_ptr(), n, k_bytes, ldb_bytes, cfg.block_n, "b", box_bytes=bk, swizzle=bk)
    runtime.launch(plan.main, (tiles, splits, 1), (cfg.threads, 1, 1),
                   [map_a, map_b, a, b, c, *ptrs, partial, m, n, k_bytes, lda_bytes, ldb_bytes, c.stride(0), *flags],
                   plan.smem, KINDS, record=record)
    if splits > 1:
        reduce(plan.reduce, partial, c, ptrs, flags, m, n, splits, record)
