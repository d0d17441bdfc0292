"""Tile configurations of the sm80_mm kernel as data, and the pure function that picks one.

BLOCK_K is counted in bytes of K (block_k_bytes) so one config serves every element width:
128 bytes = 64 bf16 = 128 fp8/int8 = 256 int4 = 32 tf32 values.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .arch import Arch
from .errors import LayoutError


@dataclass(frozen=True)
class Sm80Config:
    """One tile configuration of the sm80_mm (mma.sync) kernel: a block_m x block_n output tile per CTA, K moved
    block_k_bytes per pipeline stage through `stages` stages, warp_m x warp_n warps, group_m row tiles that sweep
    the columns together (L2 reuse). `name` / `parse` give its string form, which `gn_mm.mm(config=...)` takes."""
    block_m: int
    block_n: int
    block_k_bytes: int
    warp_m: int  # warps along M
    warp_n: int  # warps along N
    stages: int
    group_m: int = 8

    @property
    def name(self) -> str:
        """The config's name, e.g. 128x256x64B_w2x4_s6_g8 (what `parse` reads back)."""
        return (f"{self.block_m}x{self.block_n}x{self.block_k_bytes}B_w{self.warp_m}x{self.warp_n}"
                f"_s{self.stages}_g{self.group_m}")

    @classmethod
    def parse(cls, name: str) -> "Sm80Config":
        """Inverse of .name: "128x256x64B_w2x4_s6_g8" (the _g part is optional)."""
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)B_w(\d+)x(\d+)_s(\d+)(?:_g(\d+))?", name.strip())
        if not m:
            raise ValueError(f"config: cannot parse {name!r}; expected e.g. 128x256x64B_w2x4_s6_g8")
        bm, bn, bk, wm, wn, st, g = m.groups()
        return cls(int(bm), int(bn), int(bk), int(wm), int(wn), int(st), int(g or 8))

    @property
    def threads(self) -> int:
        """Threads per CTA: 32 per warp of the NUM_WARP_M x NUM_WARP_N warp grid."""
        return self.warp_m * self.warp_n * 32

    @property
    def warp_tile(self) -> int:
        """C elements each warp accumulates: registers scale with it."""
        return (self.block_m // self.warp_m) * (self.block_n // self.warp_n)

    @property
    def smem_bytes(self) -> int:
        """The ring of stages (all that the cp.async pipeline needs)."""
        return self.stages * (self.block_m + self.block_n) * self.block_k_bytes

    def smem(self, arch: Arch) -> int:
        """Dynamic shared memory on `arch`: with TMA loads the ring also needs 1 KB of slack to align it for
        swizzled boxes and two mbarriers per slot."""
        return self.smem_bytes + (1024 + 16 * self.stages if tma_loads(arch) else 0)

    def check(self, arch: Arch, smem_limit: int | None = None) -> None:
        """Raise LayoutError if the kernel cannot be built or launched with this config."""
        problems = []
        wm, wn = self.block_m // max(self.warp_m, 1), self.block_n // max(self.warp_n, 1)
        if self.block_k_bytes not in (64, 128):
            problems.append("block_k_bytes must be 64 or 128")
        if wm % 16 or wn % 16 or wm * self.warp_m != self.block_m or wn * self.warp_n != self.block_n:
            problems.append("each warp's tile must be a multiple of 16x16")
        chunks = self.block_k_bytes // 16
        if (self.block_m * chunks) % self.threads or (self.block_n * chunks) % self.threads:
            problems.append("tile rows x 16-byte chunks must divide evenly among the threads")
        if self.stages < 2:
            problems.append("stages must be >= 2")
        if self.group_m < 1:
            problems.append("group_m must be >= 1")
        limit = smem_limit if smem_limit is not None else arch.smem_per_block()
        if self.smem(arch) > limit:
            problems.append(f"needs {self.smem(arch)} bytes of shared memory, {arch.name} allows {limit}")
        if problems:
            raise LayoutError(f"config {self.name}: " + "; ".join(problems))


C = Sm80Config
# Candidates in order of preference: the heuristic takes the first that fills the GPU. The order follows
# the H100 sweep in benchmarks/results/sm80_tune_h100.json (scripts/tune.py --family sm80): 64-byte K tiles with
# deeper pipelines beat 128-byte ones, and 64x128 warp tiles (f16 accumulators only) beat 64x64.
SM80_CONFIGS = (
    C(256, 256, 64, 4, 2, 6),   # 64x128 warp tiles: f16 accumulators only
    C(256, 256, 64, 4, 2, 4),   # the same for GPUs with less shared memory (sm_80)
    C(128, 256, 64, 2, 2, 4),   # 64x128 warp tiles: f16 accumulators only
    C(128, 256, 64, 2, 4, 6),
    C(128, 256, 128, 2, 4, 4),
    C(256, 128, 128, 4, 2, 4),
    C(128, 256, 128, 2, 4, 3),
    C(128, 256, 128, 2, 2, 4),  # 64x128 warp tiles: f16 accumulators only
    C(128, 128, 64, 2, 2, 4),
    C(128, 128, 128, 2, 2, 3),
    C(128, 128, 128, 2, 4, 4),
    C(128, 128, 128, 2, 2, 4),
    C(64, 128, 128, 2, 2, 4),
    C(64, 64, 128, 2, 2, 4),
    C(32, 128, 128, 1, 4, 4),
    C(16, 128, 128, 1, 4, 4),
)


# On sm_90 TMA fills the ring (tma_loads), which reorders the ranking: 1-CTA 64-byte-K configs lose most
# (H200 sweep, benchmarks/results/sm80_tune_h200_tma.json). These go first there, per accumulator kind.
TMA_FIRST = {
    "f16": ("128x256x64B_w2x2_s4_g8", "256x256x64B_w4x2_s4_g8"),
    "f32": ("128x256x128B_w2x4_s4_g8", "256x128x128B_w4x2_s4_g8"),
    "s32": ("128x128x128B_w2x2_s3_g8", "256x128x128B_w4x2_s4_g8", "128x256x128B_w2x4_s3_g8"),
}


def tma_loads(arch: Arch) -> bool:
    """Whether sm80_mm fills its ring by TMA: on sm_90 (measured there: one thread's bulk copies instead of
    every thread's cp.async chunks). sm_120 has TMA too, but it is untested hardware here and ptxas gives
    that build a stack frame: cp.async."""
    return arch.cc == 90


def max_warp_tile(acc_bits: int = 32, emulated: bool = False) -> int:
    """Largest warp tile (C elements per warp) whose accumulators and double-buffered fragments fit the
    255-register cap: 64x64 with 32-bit accumulators, twice that with f16 ones, half of it for
    instructions the hardware compiler emulates (fp8 and int4 mma.sync on sm_90 need scratch registers)."""
    return 64 * 64 * 32 // acc_bits // (2 if emulated else 1)


def sm80_candidates(arch: Arch, smem_limit: int | None = None, emulated: bool = False,
                    acc: str = "f32") -> list[Sm80Config]:
    """The configs that fit this arch's shared memory and the register budget for accumulator kind `acc`
    (f32, f16, s32), in order of preference."""
    max_tile = max_warp_tile(16 if acc == "f16" else 32, emulated)
    order = SM80_CONFIGS
    if tma_loads(arch):
        first = [c for name in TMA_FIRST.get(acc, ()) for c in SM80_CONFIGS if c.name == name]
        order = tuple(first) + tuple(c for c in SM80_CONFIGS if c not in first)
    out = []
    for c in order:
        if c.warp_tile > max_tile:
            continue
        try:
            c.check(arch, smem_limit)
        except LayoutError:
            continue
        out.append(c)
    return out


@functools.lru_cache(maxsize=4096)
def choose_sm80(m: int, n: int, arch: Arch, sm_count: int, smem_limit: int | None = None,
                emulated: bool = False, acc: str = "f32") -> Sm80Config:
    """Largest tile that still gives every SM work; smaller tiles when M or N is small."""
    fits = sm80_candidates(arch, smem_limit, emulated, acc)

    def tiles(c: Sm80Config) -> int:
        return -(-m // c.block_m) * -(-n // c.block_n)

    for c in fits:
        if c.block_m > 2 * m:  # mostly-empty rows of A: go smaller
            continue
        if tiles(c) >= sm_count:
            return c
    # Few tiles at any size: the smallest tile that covers M without waste spreads work the widest.
    small = [c for c in fits if c.block_m <= max(16, m)] or fits
    return max(small, key=lambda c: (min(tiles(c), sm_count) * c.block_m * c.block_n, -c.stages))


def choose_splits(m: int, n: int, k_bytes: int, config: Sm80Config, sm_count: int, acc: str) -> int:
    """K splits for problems with too few output tiles to fill the GPU (decode and small-batch shapes).

    Minimises waves x (K tiles per split + a fixed per-CTA cost of prologue, epilogue and partials), so a
    split is taken only when it fills idle SMs. f16 accumulation is never split: its rounding is part of
    the requested arithmetic."""
    if acc == "f16":
        return 1
    tiles = -(-m // config.block_m) * -(-n // config.block_n)
    k_tiles = -(-k_bytes // config.block_k_bytes)
    if tiles >= sm_count or k_tiles < 16:
        return 1
    per_sm = max(1, min(4, (228 * 1024) // (config.smem_bytes + 1024), 65536 // (config.threads * 168)))
    slots = sm_count * per_sm
    best, best_cost = 1, None
    for s in range(1, min(32, k_tiles // 4) + 1):
        per = -(-k_tiles // s)
        if (s - 1) * per >= k_tiles:  # an empty split
            continue
        # Per CTA: its K tiles plus pipeline fill and epilogue; splitting adds the reduce launch.
        cost = -(-tiles * s // slots) * (per + config.stages + 4) + (8 if s > 1 else 0)
        if best_cost is None or cost < best_cost:
            best, best_cost = s, cost
    return best
