"""The sm90_mm kernel family: wgmma + TMA GEMM for every wgmma variant on sm_90a (cuda_src/sm90_mm.cu)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import runtime, tma
from .arch import Arch
from .dtypes import ACC_KIND, OUT_KIND
from .runtime import KernelSpec
from .sm90_config import Sm90Config
from .variant_table import Variant

STEM = "sm90_mm"


def spec(variant: Variant, out: str, config: Sm90Config) -> KernelSpec:
    params = {"variant_name": f"{variant.name}->{out}", "config_name": config.name, "c": config,
              "acc_kind": ACC_KIND[variant.acc], "out_kind": OUT_KIND[out], **variant.wgmma_operands(config.block_n)}
    return KernelSpec.make(STEM, STEM, params, Arch(90, "a"), config.smem_bytes)


@dataclass(frozen=True)
class Plan:
    """Everything about one call that depends only on the problem's signature, computed once."""

    config: Sm90Config
    grid: int       # persistent CTAs
    main: object    # loaded sm90_mm
    splits: int = 1

    @classmethod
    def make(cls, variant: Variant, out: str, config: Sm90Config, m: int, n: int, sm_count: int, device) -> "Plan":
        cl = config.cluster_m
        cluster_tiles = -(-m // (config.block_m * cl)) * -(-n // config.block_n)
        main = runtime.kernel(spec(variant, out, config), device)
        # Persistent: one CTA per SM, and never more clusters than fit at once (a GPC can leave SMs idle).
        resident = sm_count if cl == 1 else tma.max_active_clusters(main, cl, config.threads, config.smem_bytes)
        return cls(config, min(cluster_tiles, resident) * cl, main)

    def launch(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, m: int, n: int, k_bytes: int,
               lda_bytes: int, ldb_bytes: int, scale_a=None, scale_b=None, bias=None) -> None:
        """a: A's storage ([M, K], K-major), b: B's [N, K] storage (K-major), c: the [M, N] output."""
        cfg = self.config
        map_a = tma.rows_map(a.data_ptr(), m, k_bytes, lda_bytes, cfg.block_m, "a")
        map_b = tma.rows_map(b.data_ptr(), n, k_bytes, ldb_bytes, cfg.block_n // cfg.cluster_m, "b")
        dummy = c  # never dereferenced when its mode/flag is 0

        def mode(s):
            return 0 if s is None else (1 if s.numel() == 1 else 2)

        args = [map_a, map_b, c, scale_a if scale_a is not None else dummy, scale_b if scale_b is not None else dummy,
                bias if bias is not None else dummy, m, n, k_bytes, c.stride(0), mode(scale_a), mode(scale_b),
                int(bias is not None)]
        runtime.launch(self.main, (self.grid, 1, 1), (cfg.threads, 1, 1), args, cfg.smem_bytes)
