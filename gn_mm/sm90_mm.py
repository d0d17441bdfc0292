"""The sm90_mm kernel family: wgmma + TMA GEMM for every wgmma variant on sm_90a (cuda_src/sm90_mm.cu)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import runtime, sm80_mm, tma
from .sm80_mm import epilogue_args, partials, reduce
from .arch import Arch
from .dtypes import ACC_KIND, OUT_DTYPES, OUT_KIND
from .runtime import KernelSpec
from .sm90_config import Sm90Config
from .variant_table import Variant, find_path

STEM = "sm90_mm"
# sm90_mm's parameters: TMA maps of A, B, A's and B's ragged last tiles and C, C, scale_a, scale_b, bias, partial,
# then 9 ints.
KINDS = (runtime.MAP,) * 5 + (runtime.TENSOR,) * 5 + (runtime.INT,) * 9
# k-tiles of a CTA's first unit prefetched into L2 while the previous kernel finishes (PDL); 1 measured best of
# 0 / 1 / 2 / 4 / 8 (`sm90_prefetch_depth_h100.json`: 16 x 4096 x 4096 bf16 16.6 -> 16.0 us, e4m3 11.2 -> 10.6).
PREFETCH = 1


# The one epilogue a build holds (GN_STORE, cuda_src/sm90_mm.cu), picked per call by `store_for`: through shared
# memory and TMA stores, without or with (_COLS) the tile's per-column terms, masked stores from registers, or a K
# split's raw sums (and mm_reduce, which finishes them). One build of them all took 3.6 s to compile on the H100
# machine; the TMA build of bf16 4096^3's tile alone ~0.5 s (NOTES sm90 79).
STORE_TMA, STORE_DIRECT, STORE_PARTIAL, STORE_TMA_COLS = 0, 1, 2, 3
STORE_NAMES = ("tma", "direct", "partial", "tma_cols")


def store_for(config: Sm90Config, splits: int, item: int, tma_rows: bool, cols: bool) -> int:
    """The build a call runs: CLUSTER_K tiles store their slices directly; K splits store partials; else TMA stores
    where C's rows suit a tensor map (`tma_rows`, see `_tma_rows`) and the tile holds a whole 128-byte chunk of
    `item`-byte outputs (a swapped tile always does), direct stores otherwise. `cols`: the kernel's epilogue has
    per-column terms (`column_terms`)."""
    if config.cluster_k > 1:
        return STORE_DIRECT
    if splits > 1:
        return STORE_PARTIAL
    if tma_rows and (config.swap or config.block_n * item >= 128):
        return STORE_TMA_COLS if cols else STORE_TMA
    return STORE_DIRECT


def column_terms(config: Sm90Config, row_scales: bool, col_terms: bool) -> bool:
    """Whether the kernel's epilogue has per-column terms of its tile, for a call with per-row scales of A
    (`row_scales`) and per-column scales of B or a bias (`col_terms`): a swapped tile's columns are C's rows (its
    bias is per tile row, read once per tile)."""
    return row_scales if config.swap else col_terms


def flag_terms(flags: list) -> tuple[bool, bool]:
    """(per-row scales of A, per-column scales of B or a bias) of a call, from its `epilogue_args` flags: the `terms`
    that `column_terms` takes."""
    return flags[0] == 2, flags[1] == 2 or flags[2] == 1


def stores(config: Sm90Config, acc: str, out: str) -> tuple[int, ...]:
    """Every build of config that a call accumulating in `acc` into `out` may run (what the compile sweeps build):
    TMA where a chunk fits (with column terms for float outputs), direct, and partials for K splits (never for
    swapped tiles or f16 sums)."""
    item = OUT_DTYPES[out].itemsize
    kinds = dict.fromkeys(store_for(config, 1, item, rows, cols) for rows in (True, False)
                          for cols in ((False, True) if out != "s32" else (False,)))
    if config.cluster_k == 1 and not config.swap and acc != "f16":
        kinds[STORE_PARTIAL] = None
    return tuple(kinds)


def spec(variant: Variant, out: str, config: Sm90Config, store: int | None = None) -> KernelSpec:
    """The build of config for variant -> out holding epilogue `store` (default: the one a contiguous output without K
    splits takes)."""
    if store is None:
        store = store_for(config, 1, OUT_DTYPES[out].itemsize, True, False)
    params = {"variant_name": f"{variant.name}->{out}", "config_name": f"{config.name} ({STORE_NAMES[store]} stores)",
              "c": config, "store": store, "acc_kind": ACC_KIND[variant.acc], "out_kind": OUT_KIND[out],
              **variant.wgmma_operands(config.block_n)}
    return KernelSpec.make(STEM, STEM, params, Arch(90, "a"), config.smem_bytes)


@dataclass(frozen=True)
class Plan:
    """Everything about one call that depends only on the problem's signature, computed once."""

    config: Sm90Config
    grid: int       # persistent CTAs
    splits: int
    acc: str
    main: object    # loaded sm90_mm: the build `store` (what a contiguous output takes)
    reduce: object  # loaded mm_reduce (split-K only)
    dependent: bool = True  # programmatic dependent launch (sm90_config.dependent_launch)
    store: int = STORE_TMA
    variant: Variant | None = field(default=None, compare=False)  # (the kernel's: swapped for a swapped config)
    out: str = ""
    device: object = None
    builds: dict = field(default_factory=dict, compare=False, repr=False)  # other stores' loaded builds (`build`)

    @classmethod
    def make(cls, variant: Variant, out: str, config: Sm90Config, m: int, n: int, splits: int, sm_count: int,
             device, terms: tuple[bool, bool] = (False, False)) -> "Plan":
        """terms: (per-row scales of A, per-column scales of B or a bias) of the calls it is made for, to build the
        epilogue they take first (`store_for`; a call that needs another builds that on its first launch)."""
        cl = config.cluster  # CTAs per cluster
        units = config.tiles(m, n) * splits
        if config.swap:  # the kernel's A is the weight: mixed operand types swap places in the instruction
            variant = find_path(variant.b, variant.a, variant.acc, "wgmma")
        # The build a fresh [m, n] output takes (another, should a call's output need it: `build`).
        item = OUT_DTYPES[out].itemsize
        store = store_for(config, splits, item, (n * item) % 16 == 0, column_terms(config, *terms))
        s = spec(variant, out, config, store)
        main = runtime.kernel(s, device)
        # Persistent: one CTA per SM, and never more clusters than fit at once (a GPC can leave SMs idle).
        resident = sm_count if cl == 1 else tma.max_active_clusters(main, cl, config.threads, config.smem_bytes)
        reduce_kernel = runtime.kernel(s, device, "mm_reduce") if splits > 1 else None
        return cls(config, min(units, resident) * cl, splits, variant.acc, main, reduce_kernel, store=store,
                   variant=variant, out=out, device=device)

    def build(self, store: int):
        """The loaded build of this plan's kernel holding epilogue `store` (`store_for`)."""
        if store == self.store:
            return self.main
        handle = self.builds.get(store)
        if handle is None:
            handle = self.builds[store] = runtime.kernel(spec(self.variant, self.out, self.config, store), self.device)
        return handle

    def launch(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, m: int, n: int, k_bytes: int,
               lda_bytes: int, ldb_bytes: int, scale_a=None, scale_b=None, bias=None, workspace=None,
               record=None) -> None:
        """a: A's storage ([M, K], K-major), b: B's [N, K] storage (K-major), c: the [M, N] output. Split-K:
        raw sums to a [splits, M, N] workspace (`workspace`, or allocated here), then mm_reduce. `record`: see
        runtime.launch. A swapped config runs the kernel on C^T = B A^T (no K splits)."""
        cfg = self.config
        c_ptr, ldc = c.data_ptr(), c.stride(0)
        item = c.element_size()
        ptrs, flags = epilogue_args(c, scale_a, scale_b, bias)
        cols = column_terms(cfg, *flag_terms(flags))
        if cfg.swap:
            return self._launch_swapped(a, b, c, m, n, k_bytes, lda_bytes, ldb_bytes, ptrs, flags, cols, record)
        if cfg.cluster_n == 1:
            map_a, map_at = tma.rows_maps(a.data_ptr(), m, k_bytes, lda_bytes, cfg.block_m, "a")
        else:  # each CTA of a cluster multicasts part of A: full boxes only (the kernel ignores map_at)
            map_a = map_at = tma.rows_map(a.data_ptr(), m, k_bytes, lda_bytes, cfg.block_m // cfg.cluster_n, "a")
        if cfg.cluster_m == 1:
            map_b, map_bt = tma.rows_maps(b.data_ptr(), n, k_bytes, ldb_bytes, cfg.block_n, "b")
        else:  # each CTA of a cluster multicasts part of B: full boxes only (the kernel ignores map_bt)
            map_b = map_bt = tma.rows_map(b.data_ptr(), n, k_bytes, ldb_bytes, cfg.block_n // cfg.cluster_m, "b")
        partial = workspace if workspace is not None else partials(self.acc, self.splits, m, n, c)
        # The epilogue stores through TMA when C suits a tensor map (16-byte aligned start and row stride, rows of
        # whole 16-byte units: the TMA unit wrote the rest of a row's last 16 bytes past N into an out= view's
        # padding, found by tests/test_fuzz_gpu.py) and the tile holds a whole 128-byte chunk (the kernel stores
        # columns past its last whole chunk directly): `store_for`.
        store = store_for(cfg, self.splits, item, _tma_rows(c, n), cols)
        map_c = tma.rows_map(c_ptr, m, n * item, ldc * item, 64, "out") if store in (STORE_TMA, STORE_TMA_COLS) \
            else map_a
        runtime.launch(self.build(store), (self.grid, 1, 1), (cfg.threads, 1, 1),
                       [map_a, map_b, map_at, map_bt, map_c, c_ptr, *ptrs, partial, m, n, k_bytes, ldc,
                        self.splits, *flags, PREFETCH],
                       cfg.smem_bytes, KINDS, dependent=self.dependent, record=record)
        if self.splits > 1:
            reduce(self.reduce, partial, c, ptrs, flags, m, n, self.splits, record)

    def _launch_swapped(self, a, b, c, m, n, k_bytes, lda_bytes, ldb_bytes, ptrs, flags, cols, record) -> None:
        """The kernel on C^T = B A^T: B's [N, K] storage as its A (tile rows along N), A's as its B, C written
        transposed from the tile (rows of C in boxes of 16). Scales trade places (a per-row scale of the kernel's
        tile is a per-column scale of C) and the bias is per tile row (has_bias = 2)."""
        cfg = self.config
        c_ptr, ldc, item = c.data_ptr(), c.stride(0), c.element_size()
        map_a, map_at = tma.rows_maps(b.data_ptr(), n, k_bytes, ldb_bytes, cfg.block_m, "b")
        map_b, map_bt = tma.rows_maps(a.data_ptr(), m, k_bytes, lda_bytes, cfg.block_n, "a")
        (sa, sb, bias), (mode_a, mode_b, has_bias) = ptrs, flags
        store = store_for(cfg, 1, item, _tma_rows(c, n), cols)
        map_c = tma.rows_map(c_ptr, m, n * item, ldc * item, 16, "out") if store != STORE_DIRECT else map_a
        runtime.launch(self.build(store), (self.grid, 1, 1), (cfg.threads, 1, 1),
                       [map_a, map_b, map_at, map_bt, map_c, c_ptr, sb, sa, bias, c, n, m, k_bytes, ldc, 1,
                        mode_b, mode_a, 2 * has_bias, PREFETCH],
                       cfg.smem_bytes, KINDS, dependent=self.dependent, record=record)

    workspace = sm80_mm.Plan.workspace  # one call's split-K workspace (None without K splits)


def _tma_rows(c: torch.Tensor, n: int) -> bool:
    """Whether C's rows suit a TMA store map: 16-byte aligned start and row stride, rows of whole 16-byte units."""
    item = c.element_size()
    return c.data_ptr() % 16 == 0 and (c.stride(0) * item) % 16 == 0 and (n * item) % 16 == 0
