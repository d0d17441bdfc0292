"""Tile configurations of the sm90_mm (wgmma + TMA) kernel as data, and the function that picks one.

A CTA is one producer warpgroup plus BLOCK_M / 64 consumer warpgroups, persistent over the tiles. K moves
128 bytes per pipeline stage (one 128-byte swizzle row: 64 bf16, 128 fp8/int8, 32 tf32 values).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from fractions import Fraction
from dataclasses import dataclass

from .errors import LayoutError

SMEM_LIMIT = 227 * 1024  # sm_90 opt-in shared memory per block
# 192-row tiles run three consumer warpgroups, so ptxas compiles the kernel for 128 registers per thread (64 K over 512
# threads; setmaxnreg does not raise its limit): 64 x BLOCK_N sums per consumer fit up to this width (n208 needs 130).
BLOCK_N_MAX_192 = 192
ROW_BYTES = 128


@dataclass(frozen=True)
class Sm90Config:
    """One tile configuration of the sm90_mm (wgmma + TMA) kernel: a block_m x block_n output tile per CTA, `stages`
    128-byte K stages, group_m row tiles sweeping the columns together, optional clusters (cluster_m / cluster_n
    share a tile by multicast, cluster_k splits K on chip) and swap (C^T = B A^T). `name` / `parse`: its string form."""
    block_m: int    # 64, 128 or 192: one m64 wgmma row block per consumer warpgroup
    block_n: int    # wgmma N: multiple of 16, <= 256
    stages: int
    group_m: int = 8
    cluster_m: int = 1  # 2: CTA pairs along M share (multicast) their B tile
    cluster_k: int = 1  # 2, 4, 8: a cluster's CTAs split one tile's K and add their sums on chip (decode)
    cluster_n: int = 1  # 2, 4: CTAs along N share (multicast) their A tile
    swap: bool = False  # C^T = B A^T: tile rows run along N (the weight), tile columns along M (see tiles)

    @property
    def name(self) -> str:
        """The config's name (what `parse` reads back; `config=` accepts it)."""
        cn = f"_n{self.cluster_n}" if self.cluster_n > 1 else ""
        k = f"_k{self.cluster_k}" if self.cluster_k > 1 else ""
        t = "_t" if self.swap else ""
        return f"sm90_{self.block_m}x{self.block_n}_s{self.stages}_g{self.group_m}_c{self.cluster_m}{cn}{k}{t}"

    @classmethod
    def parse(cls, name: str) -> "Sm90Config":
        """The config a name from `name` stands for; ValueError naming the expected form otherwise."""
        m = re.fullmatch(r"sm90_(\d+)x(\d+)_s(\d+)(?:_g(\d+))?(?:_c(\d+))?(?:_n(\d+))?(?:_k(\d+))?(_t)?",
                         name.strip())
        if not m:
            raise ValueError(f"config: cannot parse {name!r}; expected e.g. sm90_128x256_s4_g8_c2")
        bm, bn, st, g, c, cn, k, t = m.groups()
        return cls(int(bm), int(bn), int(st), int(g or 8), cluster_m=int(c or 1), cluster_k=int(k or 1),
                   cluster_n=int(cn or 1), swap=t is not None)

    block_k_bytes = ROW_BYTES  # K bytes per stage (what the split-K heuristic counts)

    @property
    def cluster(self) -> int:
        """CTAs per cluster."""
        return self.cluster_m * self.cluster_n * self.cluster_k

    def tiles(self, m: int, n: int) -> int:
        """Output tiles of an [m, n] result, a cluster's row (column) tiles counted as one. A swapped tile covers
        block_n rows and block_m columns of the result."""
        if self.swap:
            m, n = n, m
        return -(-m // (self.block_m * self.cluster_m)) * -(-n // (self.block_n * self.cluster_n))

    def ctas(self, m: int, n: int) -> int:
        """CTAs that cover an [m, n] result with the whole K each, a cluster's idle ones (past M or N) included."""
        return self.tiles(m, n) * self.cluster_m * self.cluster_n

    # Cached (read on every launch); a frozen dataclass still takes a cached_property in its __dict__.
    @functools.cached_property
    def threads(self) -> int:
        return 128 * (1 + self.block_m // 64)

    @functools.cached_property
    def smem_bytes(self) -> int:
        # stages of A and B tiles, the epilogue's two 8 KB chunk buffers per consumer, 1 KB of alignment
        # slack, two mbarriers per stage
        return (self.stages * (self.block_m + self.block_n) * ROW_BYTES + (self.block_m // 64) * 2 * 8192 + 1024
                + 16 * self.stages)

    def check(self, smem_limit: int = SMEM_LIMIT) -> None:
        """Raise LayoutError naming the field when the config cannot be built (tile shape, stages, shared memory
        over `smem_limit`)."""
        problems = []
        if self.block_m not in (64, 128, 192):
            problems.append("block_m must be 64, 128 or 192")
        if self.block_m == 192 and (self.block_n > BLOCK_N_MAX_192 or self.cluster > 1):
            problems.append(f"192-row tiles: block_n at most {BLOCK_N_MAX_192}, no clusters")
        if self.block_n % 16 or not 16 <= self.block_n <= 256:
            problems.append("block_n must be a multiple of 16 in [16, 256]")
        if self.stages < 2:
            problems.append("stages must be >= 2")
        if self.group_m < 1:
            problems.append("group_m must be >= 1")
        if self.cluster_m not in (1, 2) or (self.block_n // self.cluster_m * ROW_BYTES) % 1024:
            problems.append("cluster_m must be 1, or 2 with block_n a multiple of 16")
        if self.cluster_n not in (1, 2, 4) or (self.cluster_n > 1 and (
                self.cluster_m > 1 or (self.block_m // self.cluster_n * ROW_BYTES) % 1024)):
            problems.append("cluster_n must be 1, or 2 or 4 without cluster_m and with 8-row multiples of A per CTA")
        if self.cluster_k not in (1, 2, 4, 8) or (self.cluster_k > 1 and (
                self.cluster_m * self.cluster_n > 1 or self.block_n % (4 * self.cluster_k)
                or self.block_m * self.block_n * 4 > self.stages * (self.block_m + self.block_n) * ROW_BYTES)):
            problems.append("cluster_k must be 1, 2, 4 or 8, without cluster_m / cluster_n, with a column slice of "
                            "a multiple of 4 per CTA and the tile's 4-byte sums fitting the ring")
        if self.swap and self.cluster > 1:
            problems.append("swap (C^T = B A^T) runs without clusters")
        if self.smem_bytes > smem_limit:
            problems.append(f"needs {self.smem_bytes} bytes of shared memory, the limit is {smem_limit}")
        if problems:
            raise LayoutError(f"config {self.name}: " + "; ".join(problems))


def deepest(block_m: int, block_n: int, cluster_m: int = 1, group_m: int = 8, smem_limit: int = SMEM_LIMIT,
            cap: int | None = None) -> Sm90Config:
    """The config with as many stages as shared memory holds (more stages hide more TMA latency), up to `cap`
    (default 8, or 16 for tiles narrower than 128 columns, whose stages carry fewer weight bytes each)."""
    stages = cap or (8 if block_n >= 128 else 16)
    while Sm90Config(block_m, block_n, stages, group_m, cluster_m).smem_bytes > smem_limit:
        stages -= 1
    return Sm90Config(block_m, block_n, stages, group_m, cluster_m)


def narrowest(cands, m: int, n: int, sm_count: int, fill: float, most_rounds: int = 1) -> Sm90Config | None:
    """The first of `cands` (narrowest first) whose CTAs for an [m, n] output fit the fewest rounds of the SMs, up to
    `most_rounds`, if they fill `fill` of those rounds; else None."""
    for rounds in range(1, most_rounds + 1):
        cfg = next((c for c in cands if c.ctas(m, n) <= rounds * sm_count), None)
        if cfg is not None:
            return cfg if cfg.ctas(m, n) >= fill * rounds * sm_count else None
    return None


# The large tiles in order of preference (the heuristic takes the first whose tile count fills the GPU), the
# decode tile, and the narrow tile for short K.
LARGE = (deepest(128, 256, 2), deepest(128, 256, 1), deepest(128, 128, 1))
DECODE = deepest(64, 128)
NARROW = deepest(64, 64)
NARROW_PAIR = deepest(64, 64, 2)  # the two 64-row tiles of M = 65..128 in a cluster, sharing each weight tile
SM90_CONFIGS = LARGE + (DECODE, NARROW, NARROW_PAIR)
# Every pipeline stage costs a round of barrier and wgmma latency, so a 64-column tile's 8 KB weight stages
# stream fewer bytes per SM than 128-column ones. It wins only while each CTA's K run is short (no split-K
# launch to pay for): on the H200, 128 x 4096 x 4096 bf16 15.0 us against 15.2 for 64 x 128 with split-K
# (fp8 9.1 against 10.8), but 128 x 4096 x 14336 bf16 44.5 against 38.0, and fp8 at 14336 bytes of K
# 28-30 us against 24.5-24.8 (three runs, `small_m_h200_cluster_k*.json`). Narrower still (64 x 32, 4 KB
# stages) lost everywhere but M = 64 (16 x 4096 x 14336: 56 us against 35).
NARROW_MAX_K_BYTES = 8192
# M = 65..128 (two row tiles) over N of ~2960-4224 columns (132 SMs): 64 x 64 tiles in 2-CTA clusters (each CTA multicasts half
# of the weight tile to both) give 0.7-1.0 CTAs per SM with the whole K in each, where 64 x 128 tiles needed a 2-way
# split, its workspace and mm_reduce. H100, CUDA-graph replay, three interleaved rounds (us, 64 x 128 + split -> pair;
# the peer): e4m3 128 x 4096 x 14336 30.0 -> 25.5 (24.6), 128 x 4096 x 28672 50.0 -> 46.9 (44.9), 72 x 4096 x 14336
# 28.0 -> 24.5 (24.2), 128 x 3072 x 14336 24.1 -> 23.0 (20.6); s8 128 x 4096 x 14336 30.3 -> 25.6 (33.5); bf16 128 x
# 4096 x 8192 32.7 -> 27.8 (27.6), 128 x 4096 x 14336 49.9 -> 45.9 (53.4); tf32 128 x 4096 x 4096 33.1 -> 28.4 (29.0),
# 128 x 4096 x 8192 56.5 -> 53.0 (59.2). Past 32 KB of K per row the split wins again (tf32 128 x 4096 x 14336: 90.4
# against 99.2), and with fewer columns (N = 2048: 64 CTAs) the pair needs a split too and gains nothing (e4m3 128 x
# 2048 x 14336 18.8 against 18.1). benchmarks/results/sm90_narrow_pair_h100.json.
# Below 8 KB of K the pairs then lost to lone 64 x 64 tiles (e4m3 128 x 4096 x 4096 8.4 us alone, 9.5 in pairs; s8 8.8 /
# 9.5). Re-measured in the twenty-fifth session, after the cluster paths' later work (NOTES sm90 63; forced pairs
# against lone tiles, graph replay, three interleaved rounds, M = 72 / 128 x N = 3072 / 3584 / 4096 x 2-8 KB of K, s8 /
# e4m3 / bf16 / tf32; `sm90_pair_short_k_probe_h100.json`): from 4 KB the pairs win or tie on an H100, 0.90-0.95x
# the time at N = 4096 for s8 / bf16 / tf32 (s8 128 x 4096 x 4096 8.92 -> 8.44 us), e4m3 0.96-1.01;
# at 2 KB they lose by 0-3%, at 3 KB e4m3 by 1.5%. On an H200 the same pairs lose 0-1.3% at 4 KB and tie at 6 KB
# (A/B of the rule, `sm90_pair_short_k_ab_h200.json`: 60 changed shapes 1.004x the time), so pairs from 4 KB are an
# H100 rule (DRAM under FAST_DRAM_TBS), like the fit tiles' widths below. A/B of that rule on an H100
# (`sm90_pair_short_k_ab_h100.json`, M = 72 / 96 / 128 x N = 3072-4096 x 4-8 KB of K, five dtypes): 120 shapes 0.962x
# the time (0.873-1.008), torch / gn_mm 1.081 -> 1.123; s8 128 x 4096 x 4096 8.76 -> 8.23 us, bf16 128 x 4096 x 2048
# 8.66 -> 8.17, bf16 128 x 4096 x 4096 15.77 -> 14.52.
PAIR_MIN_K_BYTES, PAIR_MAX_K_BYTES = 4096, 32768
PAIR_MIN_FILL = 0.7
# Wider pairs (twenty-fifth session, NOTES sm90 65): past N ~ 4224 the 64 x 64 pairs take two rounds, and the heuristic
# ran lone 64 x 128 tiles (80-96 CTAs at N = 5120 / 6144, split 3-4 ways through the workspace at long K; 128 at N =
# 8192) or 128-row fit tiles (N = 11008). 64-row pairs as wide as one round needs (64 x 80 at N = 5120, 96 at 6144, 128
# at 8192, 176 at 11008; 126-128 CTAs) forced against them (M = 72 / 96 / 128 x 4-28 KB of K, bf16 / e4m3 / s8 / tf32,
# 192 shapes each, `sm90_pair_wide_probe_{h100,h200}.json`): H100 0.917x the time (0.777-1.006), H200 0.911x
# (0.798-1.003); e.g. e4m3 128 x 5120 x 14336 38.9 -> 29.6 us (torch 29.6). N = 11008 (176 columns) 0.96-1.0; wider
# pairs were not measured (PAIR_MAX_N). On the H200 they also beat `long_k`'s one-block splits of 64-128 columns (probe
# 0.89-0.98x; in the A/B below the 44 shapes where a pair replaced such a split 0.957x, four of them slower,
# 1.011-1.152), which no longer replace them. A/B of this rule and the two-block fit pairs (`fit`) together against the
# build before (`sm90_pair_wide_ab_{h100,h200}.json`, 340 shapes of M = 72-256 x N = 4608-11008 x 4-28 KB of K, five
# dtypes, 250 changed): H100 0.917x the time (0.720-1.004), torch / gn_mm 1.073 -> 1.171; H200 0.918x (0.782-1.152; over
# 1.05 only tf32 96 x 7168 x 7168, 59.3 -> 68.3 us, against 0.92-0.98 for its neighbours), 1.100 -> 1.199.
PAIR_MAX_N = 176
PAIR_CONFIGS = tuple(deepest(64, w, 2) for w in range(64, PAIR_MAX_N + 1, 16))  # NARROW_PAIR first


def pair_tile(m: int, n: int, k_bytes: int, sm_count: int, dram_tbs: float = 3.35) -> Sm90Config | None:
    """M = 65..128 (two 64-row tiles) with PAIR_MIN_K_BYTES..PAIR_MAX_K_BYTES of K: the narrowest PAIR_CONFIGS tile
    whose pairs fit one round of the SMs and fill PAIR_MIN_FILL of it, the whole K in each CTA; NARROW_PAIR (64
    columns) up to NARROW_MAX_K_BYTES only under FAST_DRAM_TBS of DRAM (the H100). Else None."""
    if not (64 < m <= 128 and PAIR_MIN_K_BYTES <= k_bytes <= PAIR_MAX_K_BYTES):
        return None
    cfg = narrowest(PAIR_CONFIGS, m, n, sm_count, PAIR_MIN_FILL)
    if cfg is None:
        return None
    if cfg == NARROW_PAIR and k_bytes <= NARROW_MAX_K_BYTES and dram_tbs >= FAST_DRAM_TBS:
        return None
    return cfg


# M <= 256 where the tiles above leave SMs idle. M = 65..256 (one or two 128-row blocks): 128-row tiles just wide enough
# for one round of the SMs (`fit`). A CTA streams its operands at a rate of its own, so idle SMs are lost bandwidth, and
# 128 x 128 tiles at N = 9216-11008 left a third of the SMs idle or were split into a second round and a workspace as
# large as a fifth of the weight. H100, CUDA-graph replay, three interleaved rounds, HEAD's heuristic built beside the
# new one (us, before -> fit; the peer): bf16 128 x 9216 x 4096 43.7 -> 31.3 (30.6), 128 x 11008 x 4096 50.3 -> 36.8
# (37.1), 128 x 18944 x 4096 70.2 -> 59.7 (62.6), 128 x 24576 x 4096 76.6 -> 73.5 (78.1), 192 x 9216 x 4096 49.8 -> 36.3
# (33.0), 256 x 5120 x 4096 33.8 -> 24.4 (20.9), 256 x 12288 x 4096 55.3 -> 45.2 (44.1); e4m3 80 x 18944 x 4096 37.3 ->
# 31.5 (33.7), 256 x 9216 x 4096 28.0 -> 23.5 (19.2); tf32 128 x 11008 x 4096 84.9 -> 68.2 (70.9); s8 128 x 11008 x 4096
# 22.7 -> 20.8 (28.5); f16 192 x 11008 x 4096 51.4 -> 42.1 (38.3). Losses: e4m3 256 x 5120 x 4096 14.2 -> 15.0, 128 x
# 22016 x 4096 39.9 -> 40.5. Not taken: where 70% or more of the SMs were busy in one round (192 / 256 x 6144 x 4096:
# 128 x 96 pairs 4-13% slower than 96 tiles of 128 x 128, since superseded for two blocks on 128-row tiles, NOTES sm90
# 65: 0.89-0.95x in `sm90_pair_wide_ab_h100.json`; 128 x 12288 x 4096 within 3% either way), a last round more than half
# full (128 x 28672 x 4096 bf16: 224 tiles of 128 x 128 87.4 us, 128 of 128 x 224 89.0), fit tiles narrower than 80
# columns (N = 5120 / 6144 at M = 80-128: no faster than 64 x 128 tiles at the same count). Two row tiles share each
# weight tile in a 2-CTA cluster (1-4% faster than apart at N = 11008 / 14336). M <= 64 the same way with one 64-row
# block, from 48 columns (32 since, below) and up to 80% busy (90% since): the decode tile (64 x 128, with K splits, in
# clusters or through a workspace) left 28-45% of the SMs idle at N = 5120-12288. Same A/B, every changed shape faster,
# none slower: bf16 16 x 5120 x 4096 21.2 -> 16.9 (17.3), 1 x 9216 x 4096 33.7 -> 28.3 (28.3), 32 x 12288 x 14336 128.3
# -> 118.0 (130.1), 16 x 18944 x 14336 195.9 -> 179.0 (200.3), 64 x 18944 x 4096 74.0 -> 55.6 (59.6), 64 x 6144 x 14336
# 71.5 -> 62.4 (69.0); e4m3 16 x 5120 x 4096 13.3 -> 9.9 (10.3), 16 x 8192 x 4096 15.4 -> 13.3 (14.2), 64 x 18944 x 4096
# 36.5 -> 30.3 (32.1); N = 4096 unchanged (32 / 64 tiles: no fit tile reaches 80%).
# benchmarks/results/sm90_fit_tiles_h100.json.
FIT_FILL, FIT_MAX_M = 0.8, 256
# Fourteenth session (H100, same method; benchmarks/results/sm90_fit_narrow_h100.json): 64 x 32 tiles at N = 3400-4224
# (128 CTAs with the whole K, where the decode tile's 32 took a 4-way split in clusters, and 64 x 64 tiles at M = 33..64
# a 2-way one): faster at every M <= 64 and K measured (4-32 KB), e4m3 16 x 4096 x 4096 9.47 -> 8.16 us (torch 8.74),
# 64 x 4096 x 4096 10.84 -> 8.23 (9.12), s8 64 x 3072 x 4096 9.51 -> 7.16 (torch._int_mm 11.14), bf16 64 x 4096 x
# 14336 47.68 -> 42.94 (47.06); at N = 2048-3072 (48-73% of the SMs) they lose past 8 KB of K (e4m3 16 x 2048 x 16384
# 17.63 -> 22.72), which FIT_FILL keeps out. One 128-row block (M = 65..128) at 72.7% busy (96 tiles of 128 x 128 at
# N = 12288): 128 x 96 tiles, bf16 128 x 12288 x 4096 40.96 -> 39.41 (39.38), e4m3 128 x 12288 x 8192 41.18 -> 39.74
# (39.62), and bf16 128 x 12288 x 8192 94.0 -> 73.7 (73.6), where choose_splits had split the 96 tiles 4 ways through
# the workspace (clusters of 4 do not fit). Two row blocks keep 0.7 (192 / 256 x 6144, above).
# On an H200 (4.8 TB/s; fifteenth session, benchmarks/results/sm90_fit_narrow_ab_h200.json, HEAD against the build
# before, same method) the 64 x 32 tiles lost where the H100 gained: geomean 1.08-1.10x the time over the same 152
# shapes, up to 1.43x at long K (tf32 1 x 3584 x 7168 27.2 -> 38.1 us); with 4 KB of weight per stage, 16 stages keep
# too few bytes in flight for the faster memory. Only at 4 KB of K did they still win there (e4m3 64 x 4096 x 4096
# 7.7 us against 9.6 for 64 x 64 tiles split in clusters, s8 7.2 / 8.4; M = 1-16 within -7..+9%; past it, e.g. e4m3
# 16 x 3584 x 14336 20.9 / 16.4, `sm90_fit_two_rounds_ab_h200.json`). So from 4.4 TB/s of DRAM bandwidth and past 4 KB
# of K, 64-row fit tiles start at 48 columns (as before that session).
# Twenty-fifth session (NOTES sm90 64): one 64-row block at 80-90% busy, i.e. 112 decode tiles of 64 x 128 at N = 14336
# (the LLM benchmark's 16 x 14336 x 4096) and 108 at 13824, then 112 of 128 x 256 at M = 64 x N = 28672: fit tiles of
# 64 x 112 (128 CTAs) and 64 x 224 (128). Forced on an H200 (`sm90_m16_n14336_widths_h200.json`): bf16 16 x 14336 x 4096
# 32.6 -> 30.5 us (torch 30.4), e4m3 17.9 -> 17.0 (17.1), tf32 x 8192 121.6 -> 112.6. A/B against the 0.8 bound
# (`sm90_fit64_idle09_ab_{h100,h200}.json`, M = 1-64 x N = 13824 / 14336 / 28672 x 4-16 KB of K, five dtypes, 123
# shapes): H200 0.938x the time (0.905-1.015), H100 0.967x (0.935-1.010); the worst are M = 64 x N = 14336 (1.00 on
# both: 64 x 112 alone against 64 x 128 in fours sharing A, `share_a`).
FIT_IDLE = {64: 0.9, 128: 0.75, 256: 0.7}  # by the rows the fit tiles cover (64, one or two 128-row blocks)
# Two 128-row blocks on a 128-row menu tile (128 x 128, M = 129..256 x N ~ 5900-8448): the fit tile, in pairs
# sharing B, whenever an SM is idle (NOTES sm90 65; `fit`). Forced against the menu tile (M = 192 / 256 x N = 6144 /
# 7168 / 8192 x 8-28 KB of K, four dtypes, `sm90_pair_fit_two_blocks_probe_{h100,h200}.json`): H100 0.75-0.97x the
# time, H200 0.78-0.99 (bf16 256 x 6144 x 14336 97.2 -> 78.6 us on the H100, torch 72.2, where choose_splits had split
# 96 tiles 4 ways), 256 x 8192 at 28 KB 1.00; the A/B with 4 KB of K is `sm90_pair_wide_ab_{h100,h200}.json` (under
# PAIR_CONFIGS). (The 0.7 bound above came from K = 4096 elements, 8 KB of bf16 and 4 KB of e4m3, thirteenth session;
# 64-row menu tiles keep it: M = 192 x N = 5120, three rows of 64 x 128, lost 0-25% to 128 x 80 pairs.) The same where
# the menu's 128 x 128 tiles make 1.5-2 rounds (N = 13312-16384: 208-256 CTAs) and one round of pairs 208-256 wide
# holds them (`sm90_pair_fit_two_blocks_wide_probe_h100.json`, M = 160 / 192 / 256, bf16 / e4m3, 8 / 28 KB of K:
# 0.815-0.976x the time, bf16 192 x 14336 x 14336 182.4 -> 155.7 us, torch 151.3; A/B of 150 shapes,
# `sm90_pair_fit_two_blocks_wide_ab_{h100,h200}.json`: H100 0.900x, 0.785-1.009; H200 0.877x, 0.717-1.053, the worst
# bf16 192 x 16384 x 14336). So two 128-row blocks on 128-row menu tiles take one round of fit pairs unless the menu's
# CTAs fill whole rounds.
FIT_MIN_N = {64: 32, 128: 80}  # the narrowest fit tile by its rows
# Where a heuristic differs by DRAM bandwidth (here, `pair_tile` and W4A16's WGMMA_MAX_M), the H100 SXM (3.35 TB/s) and
# the H200 (4.8) were measured; the threshold sits between them, clear of the H100 NVL (~3.9-4.0, never measured), which
# keeps the H100 rules.
FAST_DRAM_TBS = 4.4
FIT_MIN_N_FAST_DRAM = (4096, 48)  # (K bytes, width): 64 rows at least `width` wide on fast DRAM past K bytes
# Two 128-row blocks whose menu tile makes a thin second round and whose one-round fit would be wider than 256 (N of
# ~16.9-25.3 K): tiles for two full rounds instead. H200, forced widths (fifteenth session,
# benchmarks/results/sm90_width_sweep_h200.json; us, 148 CTAs of 128 x 256 -> 264 of 128 x 144; torch): bf16 256 x
# 18944 x 14336 317.9 -> 210.6 (195.4), 192 x 18944 x 4096 99.3 -> 63.3 (56.8); e4m3 256 x 18944 x 14336 160.6 ->
# 113.4 (107.9), 192 x 18944 x 4096 47.2 -> 36.6 (31.2). Narrower tiles in three rounds (96 columns) were 5-10%
# slower than 144, wider ones in two rounds slower by their width. A/B against the build before (H100, 96 shapes of M =
# 129-256 x N = 17408-24576, bf16 / e4m3 / s8 / tf32, `sm90_fit_two_rounds_ab_h100.json`): geomean 0.763x the time,
# none slower (H200: 0.726x over the same 96).
FIT_ROUNDS = {64: 1, 128: 1, 256: 2}  # the most rounds of the SMs a fit tile may make, by the rows it covers
# M > 256 (`balance`): the menu picks 128 x 256 pairs or 128 x 128 tiles whatever the tile count, and a last round of a
# few tiles costs a whole round (768 x 3072: 144 tiles of 128 x 128 on 132 SMs). A survey of M = 384-1536 x N = 2048-
# 28672 (H100, graph replay, fifteenth session, `sm90_survey_h100.json`) had gn_mm at 0.75-0.87x torch (geomean per
# M; 0.57x at bf16 768 x 3072 x 14336). Tiles 144-192 wide that even out the rounds, A/B against the build before in
# one process (`sm90_balance_ab_h100.json`, 165 changed shapes of M = 320-3072, bf16 / e4m3 / tf32): geomean 0.777x
# the time, none slower; peer / ours bf16 0.72 -> 0.94, e4m3 0.74 -> 0.92, tf32 0.91 -> 1.23; e.g. bf16 768 x 3072 x
# 14336 154 -> 90 us (torch 88). Measured then and left out (since taken, see below): 96 columns (1.03-1.13x the
# time) and 208-240 (224 x 14336 at K = 4096 1.13x), which wrote their output without TMA stores at the time; 128 /
# 256-column tiles with fewer CTAs than SMs (4-9% faster with the whole K, but choose_splits splits such menu tiles:
# 640 x 5120 x 14336 5 ways, 1.13x).
# Sixteenth session (H100, NOTES sm90 41): once every width stores whole 128-byte chunks through TMA, lone tiles beat
# pairs at these M (`sm90_balance_c1_ab_h100.json`: 63 shapes 0.961x, worst +1.8%), and 80-112 columns replace 128 x
# 128 menu tiles that leave a round part-empty or were split (`sm90_balance_narrow_ab_h100.json`: 56 shapes 0.879x,
# worst +3.1%; bf16 384 x 3072 x 4096 29.3 -> 19.7 us, torch 18.0); 64-row menu tiles stay (128 x 80 lost up to 2.3x).
# Seventeenth session (H100, NOTES sm90 42): the menu's 128 x 256 tile joins the widths with fewer CTAs than SMs and the
# whole K (`whole_k`): 120 of them at 768 x 5120 x 14336 bf16 took 151.7 us against 175.8 for 240 of 128 x 128 in two
# rounds (torch 149.1); per-CTA timestamps showed the 128 x 128 / 144 consumers waiting for data 30-40% of their main
# loop, the 128 x 256 ones 9% (`sm90_mainloop_waits_h100.json`). Then 208-240 columns, which now store through TMA
# too: where they make the same rounds as wider tiles or pairs with less work per round (768 x 14336: 336 pairs of 128 x
# 256 in 2.55 rounds -> 384 of 128 x 224 in 2.9), A/B 72 changed shapes 0.911x the time, worst +1.4%
# (`sm90_balance_w208_240_ab_h100.json`; bf16 768 x 14336 x 14336 493.0 -> 429.6 us, torch 411.9). BALANCE_GAIN 0.9
# -> 0.95: 128 x 240 lone tiles for the menu's 128 x 256 pairs at the same rounds (M = 1024-3072), 128 x 112 for 128 x
# 128 (N = 2560-3584 measured; any N where both make the same rounds); 42 shapes 0.965x, worst +1.9% (e4m3 576 x 2560 x
# 4096; the 112-column ones -4.6..+1.9%, the 240-column ones -10.6..+0.5%; `sm90_balance_gain095_ab_h100.json`).
BALANCE_WIDTHS = (80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256)  # `balance`'s tiles
# 192-row tiles (three consumer warpgroups; 192 x 192 as cuBLAS runs at M = 768-1536): one round of 128 tiles where
# 128-row tiles need two. Forced against the heuristic (H100, `sm90_tall_192_h100.json`, us, heuristic -> 192 x 192;
# torch): bf16 1536 x 3072 x 4096 55.7 -> 52.8 (49.9), x 14336 184.6 -> 175.4 (166.8), e4m3 x 14336 98.3 -> 92.3
# (86.9); bf16 768 x 6144 x 14336 182.9 -> 175.2 (167.1); equal at 1536 x 6144 (two rounds either way), slower where
# they make a part-empty last round (1536 x 14336 240.6 -> 247.7, 4096^3 178.3 -> 200.7) and narrower (768 x 3072:
# 192 x 96 40.8 against 28.6), which `balance`'s work model (rows x columns per round) says too. A/B of the heuristic
# with them against the one without (`sm90_balance_tall_ab_h100.json`, 21 shapes): M = 576-3072 0.899-0.980x the time
# (bf16 576 x 8192 x 4096 60.6 -> 54.7 us, torch 50.9; f16 1536 x 3072 x 14336 188.9 -> 175.1, 167.4), M = 288-384
# 0.983-1.047x (384 x 12288 x 4096 bf16 58.8 -> 60.7): from TALL_MIN_M rows only.
TALL = (deepest(192, 192),)
BALANCE_TILES = tuple(deepest(128, w) for w in BALANCE_WIDTHS)
TALL_MIN_M = 385
# (accumulator, output) pairs whose 192 x 192 kernel spills at 128 registers: int32 sums scaled into bf16 / fp16 (8
# bytes; every other variant compiles clean, tests/test_compile_offline.py). `choose_sm90(..., tall=False)` for them,
# which keeps every 192-row tile off them (TALL and TALL_FIT; the narrower ones were not compile-checked for them).
TALL_SPILLS = frozenset({("s32", "bf16"), ("s32", "f16")})
# A tile's fixed cost in columns; the most of the menu tile's work a replacement may take (exact: 128 x 240 replaces a
# lone 128 x 256 at the same rounds exactly at the threshold, 304 = 0.95 x 320 columns).
BALANCE_COST, BALANCE_GAIN = 64, Fraction(95, 100)


# One 192-row block (M = 129..192, twenty-fifth session, NOTES sm90 66): 128-row tiles waste a quarter of their rows
# there (two blocks of 128 for 192 rows). 192-row tiles of the fit width, one round (or two full ones) of the SMs,
# forced against the heuristic's 128-row pairs (bf16 / e4m3, K = 4096 / 14336,
# `sm90_m192_tiles_probe_{h100,h200}.json`), us, N = 14336 / 28672: H200 bf16 146.0 -> 126.2 (torch 125.1) / 315.0 ->
# 249.6 (255.6), e4m3 77.7 -> 68.2 / 164.8 -> 134.5; H100 157.5 -> 154.8 / 323.5 -> 303.9, e4m3 83.6 -> 81.9 / 170.5 ->
# 161.2. Narrower ones (96 columns at N = 11008) tied or lost on the H100 (126.5 against 122.3), hence TALL_FIT_MIN_N
# (which TALL_FIT_MIN_COLS makes moot below ~137 SMs); at N = 6144-11008 the H200 preferred three rows of 64-row tiles
# (not taken: the H100 did not). A/B on an H100 against the 128-row pairs (`sm90_tall_fit_ab_h100.json`, M = 136 / 160 /
# 192 x N = 13312-32768 x 4 / 16 KB of K, five dtypes, 150 shapes): from N = 16384 0.93-0.98x the time by N
# (0.817-0.998), at N = 13312-14336 1.00 (0.977-1.047: the pairs of note 65 had closed most of the gap there), hence
# TALL_FIT_MIN_COLS, set between the two and not measured itself (N = 15360: 120 CTAs of 192 x 128, 91% of the SMs); nor
# were 192 x 176 (N ~ 21-23 K) or N past 32768. The H200's A/B was not run (the session's GPU time ran out); its probe
# gained 9-14% at N = 14336, which the bound leaves out.
TALL_FIT_MIN_N, TALL_FIT_MAX_M, TALL_FIT_FILL, TALL_FIT_MIN_COLS = 112, 192, 0.9, 15360
TALL_FIT = tuple(deepest(192, w) for w in range(TALL_FIT_MIN_N, BLOCK_N_MAX_192 + 1, 16))


def tall_fit(m: int, n: int, sm_count: int) -> Sm90Config | None:
    """M = 129..TALL_FIT_MAX_M, N of TALL_FIT_MIN_COLS or more: the narrowest TALL_FIT tile whose CTAs fit one round of
    the SMs (else two) and fill TALL_FIT_FILL of it; else None."""
    if not (128 < m <= TALL_FIT_MAX_M and n >= TALL_FIT_MIN_COLS):
        return None
    return narrowest(TALL_FIT, m, n, sm_count, TALL_FIT_FILL, most_rounds=2)


def fit_min_n(block_m: int, k_bytes: int, dram_tbs: float) -> int:
    k_max, width = FIT_MIN_N_FAST_DRAM
    return width if block_m == 64 and dram_tbs >= FAST_DRAM_TBS and k_bytes > k_max else FIT_MIN_N[block_m]


@functools.lru_cache(maxsize=4096)
def choose_sm90(m: int, n: int, k_bytes: int, sm_count: int, dram_tbs: float = 3.35, tall: bool = True) -> Sm90Config:
    """Decode (M <= 32): 64 x 128 tiles, split-K filling the GPU when they are too few. Otherwise the largest
    tile whose real tiles give every SM one (128-row tiles only for M > 64, 2-CTA clusters only over two or
    more row tiles: a cluster's CTA past the last row tile runs its whole K loop on zeros). Else (small
    batches, memory-bound) the tile whose busiest SM streams the fewest operand rows per K step, ceil(tiles / SMs)
    x (A rows that exist + block_n), on ties the wider then the shorter tile (128 x 14336: 112 tiles of 128 x 128,
    36 us on the H200, rather than 224 of 64 x 128, 40.5 us), with 64-column tiles only for short K
    (NARROW_MAX_K_BYTES). M = 65..128 takes `pair_tile` where it gives one (64-row tiles in 2-CTA clusters sharing
    each weight tile, as narrow as one round of the SMs allows). The result then becomes `tall_fit`'s 192-row tile
    (M = 129..192 at wide N) where it gives one, else for M <= 256 goes through `fit` (tiles sized to one round of
    the SMs where the menu's leave many idle, or for two 128-row blocks any: one round, or two), past it through
    `balance` (128-row tiles 80-256 wide or 192 x 192, without clusters, that do less work per SM than the menu's:
    fewer rounds, or a narrower tile in as many). dram_tbs: the GPU's peak DRAM bandwidth in TB/s
    (`runtime.dram_bandwidth`; the narrowest 64-row fit tiles and the 64 x 64 pairs depend on it). tall: whether
    192-row tiles may be offered (False for the TALL_SPILLS variants). gn_mm.mm then runs the pick in clusters
    along N sharing A where `share_a` says so."""
    def done(cfg):
        if tall and (t := tall_fit(m, n, sm_count)) is not None:
            return t
        return fit(cfg, m, n, k_bytes, sm_count, dram_tbs) if m <= FIT_MAX_M else balance(cfg, m, n, sm_count, tall)

    if m <= 32:
        return done(DECODE)
    if m > 64:
        for cfg in LARGE:
            rows = -(-m // cfg.block_m)  # a cluster needs two row tiles, else one of its CTAs only reads zeros
            if rows >= cfg.cluster_m and rows * -(-n // cfg.block_n) >= sm_count:
                return done(cfg)
    pair = pair_tile(m, n, k_bytes, sm_count, dram_tbs)
    if pair is not None:
        return done(pair)
    candidates = LARGE + (DECODE,) + ((NARROW,) if k_bytes <= NARROW_MAX_K_BYTES else ())
    return done(min(candidates, key=lambda cfg: (-(-cfg.ctas(m, n) // sm_count) * (min(cfg.block_m, m) + cfg.block_n),
                                                 -cfg.block_n, cfg.block_m)))


def leaves_idle(ctas: int, sm_count: int, busy: float) -> bool:
    """Whether `ctas` persistent CTAs keep less than `busy` of the SMs busy in one round, or make a second round that
    is less than half full (the cases where tiles sized to the SMs, or stream-K shares, measured faster)."""
    return ctas < busy * sm_count or sm_count < ctas < 1.5 * sm_count


def fit(cfg: Sm90Config, m: int, n: int, k_bytes: int, sm_count: int, dram_tbs: float = 3.35) -> Sm90Config:
    """For M <= FIT_MAX_M: when `cfg`'s CTAs keep less than FIT_IDLE of the SMs busy in a single round, or make a
    second round that is less than half full, the tile of one 64-row block (M <= 64) or of 128-row blocks (in a
    2-CTA cluster over two of them) with the fewest columns, at least `fit_min_n`, whose CTAs fit in one round (two
    rounds where FIT_ROUNDS allows and one cannot hold them) and fill at least FIT_FILL of them; else `cfg`. Two
    128-row blocks on a 128-row `cfg` also take one round of such pairs wherever `cfg` leaves an SM idle in its last
    round (NOTES sm90 65). (`cfg`'s CTAs are counted before any K split.)"""
    if m > FIT_MAX_M:
        return cfg
    ctas = cfg.ctas(m, n)
    block_m = 64 if m <= 64 else 128
    rows = -(-m // block_m)
    most_rounds = FIT_ROUNDS[block_m * rows]
    if not leaves_idle(ctas, sm_count, FIT_IDLE[block_m * rows]):
        if not (rows == 2 and cfg.block_m == 128 and ctas % sm_count):
            return cfg
        most_rounds = 1  # measured against one round only (two rounds of pairs were measured where `cfg`'s is thin)
    tiles = [deepest(block_m, w, rows) for w in range(fit_min_n(block_m, k_bytes, dram_tbs), 257, 16)]
    return narrowest(tiles, m, n, sm_count, FIT_FILL, most_rounds) or cfg


def balance(cfg: Sm90Config, m: int, n: int, sm_count: int, tall: bool = True) -> Sm90Config:
    """For M > FIT_MAX_M: the 128-row tile of BALANCE_WIDTHS columns or (from TALL_MIN_M rows) the TALL 192-row one,
    without clusters (at these M every width measured as fast alone as in pairs, or faster), whose busiest SM does the
    least work, counted as rounds of the SMs x (block_n + BALANCE_COST) x block_m, the wider then the shorter on ties;
    `cfg` unless that is at most BALANCE_GAIN of `cfg`'s work. Only a 128-row menu tile is replaced (M > 256 at small
    N can take 64 x 128 tiles, which 128 x 80 ones lost to by up to 2.3x). A tile past FIT_MAX_M runs with the whole K
    while its CTAs keep WHOLE_K_FILL of the SMs busy (`whole_k`)."""
    if cfg.block_m != 128:
        return cfg

    def work(c):
        return -(-c.ctas(m, n) // sm_count) * (c.block_n + BALANCE_COST) * c.block_m

    best = min(BALANCE_TILES + (TALL if tall and m >= TALL_MIN_M else ()),
               key=lambda c: (work(c), -c.block_n, c.block_m))
    return best if work(best) <= BALANCE_GAIN * work(cfg) else cfg


# One row tile of 64-128 rows across many columns (M <= 128, N of 14 K+): clusters of 4 CTAs along N, each loading a
# quarter of the A tile they share and multicasting it (CLUSTER_N), so that L2 -> SM traffic per CTA falls by 3/8 at
# 128 x 128. Eighteenth session (H100, CUDA-graph replay, three interleaved rounds, the heuristic's tile forced alone
# and in clusters, outputs bit-identical; `sm90_cluster_n_small_m_h100.json`), us, alone -> clusters of 4 (torch):
# bf16 128 x 14336 x 4096 46.1 -> 44.4 (45.8), 96 x 14336 x 4096 45.6 -> 44.4, 64 x 14336 x 4096 (64 x 128) 44.0 ->
# 42.8, 128 x 28672 x 4096 87.8 -> 85.2 (88.8), 64 x 28672 x 4096 (128 x 256) 85.6 -> 84.1; e4m3 128 x 14336 x 4096
# 26.0 -> 25.1 (25.8); s8 128 x 14336 x 4096 28.0 -> 26.8 (31.5). A/B of the heuristic against the one without
# (`sm90_share_a_ab_h100.json`, bf16 / e4m3 / s8 / f16 / tf32, M = 64-128, K = 4 / 14 K): 33 shapes in one round of
# clusters 0.979x the time (0.954-1.001); 15 in two rounds (224 tiles at N = 28672, 30 clusters of 4 resident against
# 132 lone CTAs) 0.991x but up to 1.013x at K = 14336, so one round only. Not taken: 16 rows (3 of the 4 quarters of A past
# M, zero-filled: +0-1%), 96 CTAs (64 x 128 at N = 6144: 5-9% slower), tiles under 128 columns (64 x 32-96: the
# cluster's 4-CTA granularity left tiles for a second round, up to 1.9x the time), and M = 384-768 (128 x 80-240
# tiles in clusters of 2 or 4: 2-20% slower, `sm90_cluster_n_h100.json`): there a cluster's CTAs wait for each
# other's releases of a slot more than the multicast saves.
SHARE_A_CLUSTER, SHARE_A_MIN_M, SHARE_A_MIN_TILES = 4, 64, 0.84


def share_a(cfg: Sm90Config, m: int, n: int, sm_count: int) -> Sm90Config:
    """`cfg` in clusters of SHARE_A_CLUSTER CTAs along N sharing their A tile, where that measured faster: a lone tile
    (no cluster) of 64 or 128 rows holding all SHARE_A_MIN_M..block_m rows, at least 128 columns wide, whose tiles make
    one round of the SMs, SHARE_A_MIN_TILES of it or more; else `cfg`. The caller keeps `cfg` unless every cluster is
    resident at once (`tma.max_active_clusters`: 30 clusters of 4 on a 132-SM H100, so 132 tiles of 64 x 144 at N =
    18944 stay alone)."""
    if (not _can_share_a(cfg) or not SHARE_A_MIN_M <= m <= cfg.block_m
            or not SHARE_A_MIN_TILES * sm_count <= cfg.tiles(m, n) <= sm_count):
        return cfg
    return dataclasses.replace(cfg, cluster_n=SHARE_A_CLUSTER)


def _can_share_a(cfg: Sm90Config) -> bool:
    """The tiles `share_a` may cluster: lone, of 64 or 128 rows, at least 128 columns wide."""
    return cfg.cluster == 1 and cfg.block_m in (64, 128) and cfg.block_n >= 128


# Every tile `fit` or `balance` can return beside the menu's (compiled and checked by the offline tests).
FIT_CONFIGS = tuple(c for bm, r in ((64, 1), (128, 1), (128, 2)) for w in range(FIT_MIN_N[bm], 257, 16)
                    if (c := deepest(bm, w, r)) not in SM90_CONFIGS) + TALL
# The clustered forms `share_a` can give the menu's and `fit`'s tiles (compiled and checked by the offline tests).
SHARE_A_CONFIGS = tuple(dataclasses.replace(c, cluster_n=SHARE_A_CLUSTER) for c in SM90_CONFIGS + FIT_CONFIGS
                        if _can_share_a(c))
# Tiles the heuristic picks (`fit`, `balance`, `pair_tile`, `tall_fit`) to fill whole rounds of the SMs with the whole
# K in each CTA: it never splits them (that is how they were measured; choose_splits' round model would split
# NARROW_PAIR at N = 3072 four ways past 22 KB of K).
WHOLE_K = FIT_CONFIGS + PAIR_CONFIGS + TALL_FIT
WHOLE_K_FILL = 0.75  # past FIT_MAX_M: the least share of the SMs a tile's CTAs must fill to keep the whole K
# 64-row tiles with short K: choose_splits' round model split them 2 or 4 ways (in clusters) wherever they leave half the
# SMs idle, but a split of 8-16 k-steps per CTA costs more than the steps it saves once the whole-K tiles are this many.
# H100, CUDA-graph replay, three interleaved rounds; forced whole K against the heuristic's split over 168 shapes of M =
# 16-128 x N = 1536-4096 x 2-4 KB of K, four dtypes (`sm90_whole_k_short_probe_h100.json`), geomean of the whole-K time
# over the split's by (K bytes, whole-K CTAs): (2048, 32) 0.85, (2048, 40) 0.77, (3072, 32) 0.93, (3072, 40-64)
# 0.85-0.88, (4096, 32) 1.02, (4096, 40-64) 0.91-0.97; 12-24 CTAs 1.06-1.53 (the split stays). The A/B of the rule
# (`sm90_whole_k_short_ab_h100.json`, M = 16-256) kept its 4 KB losers out: N of 1024-1536 (two to four row tiles,
# s8 96 x 1536 x 4096 6.66 -> 7.41 us), hence the least N. E.g. bf16 64 x 3072 x 1536 7.79 -> 6.13 us (torch 6.40),
# e4m3 64 x 3072 x 4096 9.69 -> 7.89 (torch 7.83), tf32 64 x 2560 x 512 6.58 -> 4.77, s8 64 x 2560 x 2048 6.07 -> 4.65.
WHOLE_K_SHORT = ((3072, 32, 0), (4096, 40, 2048))  # (K bytes at most, whole-K CTAs at least, N at least)
# Past one 128-row block (M = 129..256) below split_wider's K (8-20 KB): choose_splits split 64 x 128
# tiles 3 ways where their whole-K CTAs filled 55-61% of the SMs (2 rounds of the split), and the whole K measured
# faster (`sm90_mid_m_whole_k_probe_s28_h100.json`, us: bf16 192 x 3072 x 7168 29.6 -> 25.4, 256 x 2560 x 7168 28.0 ->
# 24.5, e4m3 256 x 2560 x 14336 28.5 -> 24.7); 2-way splits of fewer CTAs (36-48%) were within -3.5..+3.5%: left.
WHOLE_K_MID = (128, 20480, 0.5)  # (M above, K bytes below, the least share of the SMs the whole-K CTAs fill)


def whole_k(cfg: Sm90Config, m: int, n: int, k_bytes: int, sm_count: int) -> bool:
    """Whether the heuristic runs its pick `cfg` for an [m, n] output with the whole K in every CTA (no split). Up to
    FIT_MAX_M rows: the WHOLE_K tiles, and 64-row tiles with short K whose CTAs are many enough (WHOLE_K_SHORT). Past
    it: any tile of 128 or more rows whose CTAs keep at least WHOLE_K_FILL of the SMs busy (choose_splits' round model
    split 100 tiles of 128 x 256 at 640 x 5120 x 14336 five ways through the workspace, 1.13x the time of the whole K,
    NOTES sm90 40; the fewest CTAs measured faster whole were 100 of 132: bf16 576 x 2560 x 14336, 95.7 us split five
    ways, 74.9 whole). Fewer CTAs (tall, narrow outputs: 67 of 128 x 112 at 8449 x 112) leave the split to
    choose_splits, whose workspace pays at long K. Also the 64 x 128 tile over M = 129..256 below 20 KB of K whose
    CTAs fill half the SMs (WHOLE_K_MID)."""
    if m <= FIT_MAX_M:
        above, below, share = WHOLE_K_MID
        return cfg in WHOLE_K or (cfg.block_m == 64 and any(k_bytes <= kb and cfg.ctas(m, n) >= ctas and n >= least_n
                                                             for kb, ctas, least_n in WHOLE_K_SHORT)) \
            or (cfg == DECODE and m > above and k_bytes < below and cfg.ctas(m, n) >= share * sm_count)
    return cfg.block_m >= 128 and cfg.ctas(m, n) >= WHOLE_K_FILL * sm_count


def _valid(cfg: Sm90Config) -> bool:
    try:
        cfg.check()
        return True
    except LayoutError:
        return False


# M = 257..1024 with a long K: 128-row tiles split 4 ways in clusters, the narrowest width whose clusters fill
# one round of the SMs (LONG_K_FILL of it at least), where the heuristic's 64 x 128 tiles split through the workspace
# made two to four rounds and a second launch, or its 64 x 128 / lone 128 x 80-96 tiles made one slow round. A/B
# against the heuristic without it (M = 272-512 x N = 1024-4096, bf16 / f16 / tf32 / e4m3 / s8 at 224 and 448 k-steps,
# CUDA-graph replay, three interleaved rounds; NOTES sm90 58), new / old time. H100 (`sm90_long_k_ab_h100.json`,
# `sm90_long_k_ab2_h100.json`): clusters of 4 (128 x 160-208 at N = 1536-2048) 0.79-0.93 for every dtype (bf16 384 x
# 2048 x 14336 50.6 -> 43.3 us, torch 41.9); of 2 for 16- and 32-bit inputs at 448 steps 0.82-0.99, one 1.01 (tf32
# 384 x 3072 x 14336 150.5 -> 119.1 us, torch 123.5), at 224 steps 0.98-1.09; for 8-bit inputs of 2 at 448 steps
# 0.96-1.22, at 224 1.04-1.24 (the on-chip sums of a 128-row tile are a larger share of their faster loop). Lost, hence
# the other bounds: 128 x 112 in fours at N = 1024 (1.01-1.28: the padded 128-row tiles do 15-38% more work than
# 64 x 128 splits, counted as `balance` does, rounds x (block_n + BALANCE_COST) x block_m / splits), 128 x 256 in pairs
# at 512 x 4096 (1.02-1.09). H200 (`sm90_long_k_ab3_h200.json`, faster DRAM): fours 0.85-0.97 but tf32 320 x 2048 x
# 14336 1.045; pairs that count 1.08 of the work (64 x 128 tiles over M = 272-320, 20-29% of the 128-row tiles past M)
# 1.045-1.067 where the H100 had 0.86-0.91, those counting 0.72-1.00 0.76-0.97. M = 544-1024 (NOTES sm90 60), the 78
# shapes the rule changes: 0.862x the time on an H100 (`sm90_long_k_final3_h100.json`), 0.892 on an H200. The pairs
# were dropped in the twenty-eighth session (NOTES sm90 72): the same tiles split 2 ways through the workspace beat them
# by 0.78-0.98x (`sm90_pairs_vs_workspace_probe_h100.json`), and split_wider takes those shapes. The fours stay: against
# the same tile split 4 ways through the workspace 0.92-1.07x (`sm90_fours_vs_workspace_probe_h100.json`).
LONG_K_MAX_M, LONG_K_FILL = 1024, 0.8
# By the cluster size: the least k-steps; the widest tile; the most of the heuristic plan's counted work a candidate may
# do (the count ignores the workspace split's second launch: the fours that won counted 0.94-1.06 of it, those that
# lost 1.15+); the least workspace splits of the heuristic's plan it may replace (fours against the whole K of 64-row
# tiles: 0.99-1.05 at 128 k-steps, 1.09-1.25 at 64, `sm90_long_k_short_h100.json`; against 2 splits in one round
# 0.98-1.04 on an H200, `sm90_long_k_m1024_probe_h200.json`; against 3+ splits 0.87-0.96 at 128, 0.84-0.94 at 192).
LONG_K_SIZES = {4: (128, 208, 1.1, 3)}
# M = 65..128 (one 128-row block, where the heuristic runs two rows of 64-row tiles with the whole K): 128-row tiles
# split 2 ways in clusters, every input width, widths down to 32 columns, each from ONE_BLOCK_MIN_STEPS k-steps. Forced
# on an H200 (`sm90_m128_long_k_probe_h200.json`, NOTES sm90 62): 128 x 64 pairs against 64 x 64 tiles in clusters
# of 2, us, bf16 128 x 4096 x 14336 44.1 -> 34.7 (torch 37.2), 96 x 4096 x 14336 43.6 -> 33.6, e4m3 128 x 4096 x 14336
# 23.3 -> 20.5 (21.2), s8 23.0 -> 19.9; fours of 128 x 128 lost (54.6). A/B of 97 shapes (M = 72-128, N = 2048-8192,
# `sm90_one_block_ab_h200.json`): 32- and 48-column pairs won from 32 k-steps (0.65-0.95x the time), 64 and 80 lost
# there (1.03-1.12) and won from 64 (0.82-0.94), 96 and 128 lost at 32-112 steps (up to 1.28: e4m3 128 x 8192 x 4096)
# and won from 128 (0.81-0.97). The same 56 winners on an H100 (`sm90_one_block_final_ab_h100.json`, 3.35 TB/s of
# DRAM against 4.8): 32 columns 0.78-0.88, 48 columns 0.84-0.93 from 64 steps (0.97-1.05 at 32), 64-128 columns
# 0.93-1.075 (e4m3 128 x 4096 x 8192 15.5 -> 16.6 us): the wider pairs only where DRAM is as fast as the H200's.
ONE_BLOCK_SIZES = {2: (32, 128, 1.05, 1)}
ONE_BLOCK_MIN_STEPS = {32: 32, 48: 64}  # by width; a width not listed is not tried
ONE_BLOCK_FAST_DRAM_TBS, ONE_BLOCK_MIN_STEPS_FAST = 4.0, {32: 32, 48: 32, 64: 64, 80: 64, 96: 128, 112: 128, 128: 128}
ONE_BLOCK_WIDTHS = tuple(ONE_BLOCK_MIN_STEPS_FAST)  # every width either table may take
ONE_BLOCK_MIN_M = 65


def long_k(cfg: Sm90Config, splits: int, m: int, n: int, k_bytes: int, sm_count: int,
           dram_tbs: float = 3.35) -> tuple[Sm90Config, ...]:
    """For FIT_MAX_M < m <= LONG_K_MAX_M (and one 128-row block, ONE_BLOCK_MIN_M <= m <= 128, unless `cfg` is one of
    `pair_tile`'s pairs wider than 64 columns: pairs of ONE_BLOCK_WIDTHS from ONE_BLOCK_MIN_STEPS k-steps, or
    ONE_BLOCK_MIN_STEPS_FAST with `dram_tbs` of ONE_BLOCK_FAST_DRAM_TBS or more, every input width): 128-row tiles of
    BALANCE_WIDTHS split 4 ways inside a cluster, within LONG_K_SIZES' bounds (k-steps, width, counted work against
    `cfg` split `splits` ways, the least `splits` replaced), whose CTAs fit one round and fill LONG_K_FILL of it: the
    two narrowest of each size (the caller takes the first whose clusters are all resident at once: 30 clusters of 4
    on a 132-SM H100); else none."""
    one_block = ONE_BLOCK_MIN_M <= m <= 128
    if one_block and cfg in PAIR_CONFIGS[1:]:  # wide pairs beat these splits (H200 0.89-0.98x, NOTES sm90 65)
        return ()
    if not (one_block or FIT_MAX_M < m <= LONG_K_MAX_M):
        return ()

    def work(c, s):  # `balance`'s count: rounds of the SMs x (block_n + BALANCE_COST) x block_m, a split's share
        return -(-c.ctas(m, n) * s // sm_count) * (c.block_n + BALANCE_COST) * c.block_m / s

    rows, steps, budget, found = -(-m // 128), -(-k_bytes // ROW_BYTES), work(cfg, splits), []
    least_steps = ONE_BLOCK_MIN_STEPS_FAST if dram_tbs >= ONE_BLOCK_FAST_DRAM_TBS else ONE_BLOCK_MIN_STEPS
    for ck, (least, widest, gain, least_splits) in (ONE_BLOCK_SIZES if one_block else LONG_K_SIZES).items():
        if splits < least_splits or steps < least:
            continue
        widths = [w for w in (ONE_BLOCK_WIDTHS if one_block else BALANCE_WIDTHS) if w <= widest and w % (4 * ck) == 0
                  and LONG_K_FILL * sm_count <= ck * rows * -(-n // w) <= sm_count
                  and (not one_block or steps >= least_steps.get(w, steps + 1))]
        found += [c for w in widths[:2] if _valid(c := dataclasses.replace(deepest(128, w), cluster_k=ck))
                  and work(c, ck) <= gain * budget]
    return tuple(found)


# Past FIT_MAX_M with a long K, where the pick is a narrow lone tile with the whole K in one round (64 x 128 over M =
# 288-1024 x N = 1024-2560, 128 x 80-96 at N = 1024-4096): those stream 80-90 GB/s into each SM at a third to a half of
# the tensor rate. A tile of twice the area or more split 2 ways through the workspace (as many CTAs, half the K each)
# moves fewer bytes per flop. Forced configs (H100, `sm90_split_wider_probe_h100.json`, graph replay, 3 interleaved
# rounds, new / old time) at 28 KB of K: bf16 1024 x 1024 (64 x 128 -> 128 x 128) 0.79, 512 x 2048 0.83, 384 x 3072
# (128 x 80 -> 128 x 160) 0.86, 768 x 2048 (128 x 96 -> 128 x 192) 0.95, 512 x 3072 0.99; at 14-16 KB (e4m3 x 14336,
# bf16 x 8192) the same pairs 0.95-1.30 (the split's second launch is then a larger share); wider picks lost (128 x 144
# -> 192 x 192 at 768 x 3072: 1.21, 128 x 128 -> 128 x 256 at 1024 x 2048: 1.18). A/B of the rule against the
# heuristic without it (`sm90_split_wider_ab_h100.json`, bf16 / e4m3 / tf32 / s8, M = 288-1280 x N = 1024-3072 x
# 20-56 KB of K, 80 shapes): 64 x 128 and 128 x 80 picks 0.814x the time (0.62-0.99; bf16 1024 x 1024 x 14336 61.3 ->
# 48.5 us, 1280 x 1024 x 28672 173.6 -> 111.1, torch 102.0); 128 x 96 picks (`sm90_split_wider96_ab_h100.json`, 72
# shapes) 0.92-1.05 at 20-28 KB, 0.83-1.05 at 40 KB, 0.69-0.89 at 56 KB (their whole-K time grows faster than K there:
# s8 1024 x 1536 110.6 us at 40 KB, 171.5 at 56), hence the least K by the pick's area (up to the key).
SPLIT_WIDER_MIN_K_BYTES = {128 * 80: 20480, 128 * 96: 49152}
SPLIT_WIDER_TILES = BALANCE_TILES
# Two 128-row blocks (M = 129..256) whose 64 x 128 pick choose_splits split 3+ ways through the workspace: the 128-row
# tile whose 2-way split fills one round the most, 90% of it at least (`sm90_mid_m_long_k_probe_s28_h100.json`, bf16 at
# 28 KB: 256 x 3072 54.1 -> 47.3 us with 128 x 96, 192 x 3072 50.0 -> 44.9, 256 x 2560 46.3 -> 41.5 with 128 x 80; torch
# 45.9 / 48.6 / 40.5). A/B (`sm90_split_wider_mid_ab_h100.json`, M = 130 / 192 / 256 x N = 2048-4096 x 28 / 56 KB, four
# dtypes, 80 shapes): 128 CTAs 0.866-0.996x the time; 104 CTAs of 128 x 80 at N = 2048 1.00-1.06x, hence the fill.
SPLIT_WIDER_MIN_M, SPLIT_WIDER_MID_FILL = 128, 0.9


def split_wider(cfg: Sm90Config, splits: int, m: int, n: int, k_bytes: int, sm_count: int) -> Sm90Config | None:
    """For m > FIT_MAX_M and a lone pick `cfg` with the whole K (`splits` 1) in one round, whose area allows a split
    at `k_bytes` (SPLIT_WIDER_MIN_K_BYTES): the SPLIT_WIDER_TILES tile of at least twice its area whose CTAs, split 2
    ways, make one round that fills WHOLE_K_FILL of it (the most CTAs, then the smaller tile); the caller runs it split
    2 ways through the workspace. For SPLIT_WIDER_MIN_M < m <= FIT_MAX_M and the DECODE tile split 3+ ways through the
    workspace: the same choice over every SPLIT_WIDER_TILES tile, filling SPLIT_WIDER_MID_FILL of the round. Else
    None."""
    area = cfg.block_m * cfg.block_n
    least = next((kb for most, kb in SPLIT_WIDER_MIN_K_BYTES.items() if area <= most), None)
    if least is None or k_bytes < least or cfg.cluster > 1:
        return None
    if m > FIT_MAX_M and splits == 1 and cfg.ctas(m, n) <= sm_count:
        grown, fill = 2 * area, WHOLE_K_FILL
    elif SPLIT_WIDER_MIN_M < m <= FIT_MAX_M and cfg == DECODE and splits >= 3:
        grown, fill = 0, SPLIT_WIDER_MID_FILL  # two 128-row blocks: whichever 128-row tile has the most CTAs
    else:
        return None
    fits = [c for c in SPLIT_WIDER_TILES if c.block_m * c.block_n >= grown
            and fill * sm_count <= 2 * c.ctas(m, n) <= sm_count]
    return min(fits, key=lambda c: (-c.ctas(m, n), c.block_m * c.block_n), default=None)


# The 64-row tiles a K split inside clusters may run as instead of in_cluster's 64 x 64 / 64 x 128 split 2, 4 or 8 ways
# (see split_tiles). In a cluster of 8 each CTA adds up a block_n / 8 slice of whole 4-column groups, so those widths
# step by 32. (64 x 192 in eights never has more CTAs than 64 x 96 in fours where its clusters fit: not offered.)
DECODE_SPLITS = tuple(dataclasses.replace(deepest(64, w), cluster_k=k)
                      for k, ws in ((4, (96, 128, 144, 160, 176)), (8, (128, 160))) for w in ws)
SPLIT_TILES_MIN_STEPS = 64  # below this many K steps split_tiles only widens a 64 x 128 tile split 4 ways (see there)
# Every split-inside-a-cluster config in_cluster, half_cluster and split_tiles can return (compiled and checked by the
# offline tests).
SPLIT_CLUSTERS = tuple(c for cfg in SM90_CONFIGS if cfg.cluster_m == 1 for k in (2, 4, 8)
                       if _valid(c := dataclasses.replace(cfg, cluster_k=k))) + DECODE_SPLITS
# Every config long_k can return.
LONG_K_CONFIGS = tuple(dict.fromkeys(
    c for sizes, ws in ((LONG_K_SIZES, BALANCE_WIDTHS), (ONE_BLOCK_SIZES, ONE_BLOCK_WIDTHS))
    for k, (_, widest, _, _) in sizes.items() for w in ws
    if w <= widest and w % (4 * k) == 0 and _valid(c := dataclasses.replace(deepest(128, w), cluster_k=k))))

# Split inside a cluster only while each CTA's share of K is at most this many 128-byte steps (see in_cluster);
# decode (M <= 32, one row tile) up to twice that.
CLUSTER_K_MAX_SHARE = 32


def in_cluster(cfg: Sm90Config, splits: int, k_bytes: int, m: int) -> Sm90Config | None:
    """The config that takes a heuristic split count inside a cluster (one launch, the partial sums added
    through distributed shared memory): `splits` rounded down to 2, 4 or 8 CTAs, if each CTA's share of K is
    then at most CLUSTER_K_MAX_SHARE steps; None keeps the workspace + mm_reduce route (no smaller cluster
    is tried: two CTAs per cluster lost to four workspace splits, 16 x 4096 x 14336 bf16 38.7 us against 35.0).
    Measured on an H200 under CUDA-graph replay (`small_m_h200_cluster_k*.json`): the one launch and on-chip
    sums win for short shares (16 x 1024 x 4096 bf16 8.1 us against 9.6, 64 x 4096 x 4096 14.0 against 15.7,
    fp8 16 x 4096 x 4096 10.3 against 10.8) but lose for long ones (128 x 4096 x 14336 bf16, 112 steps per
    CTA: 46.8 against 39.4, not understood yet). The caller also requires every tile's cluster to be resident
    at once (clusters of 4 fit only 30 at a time on 132 SMs). Decode (M <= 32) shares may be twice as long: on an
    H100, 16 x 4096 x 14336 bf16 (56 steps per CTA of a widened 64 x 144 tile) took 43.3-44.4 us against 45.2-45.6
    for four workspace splits (`small_m_cfgs_h100.json`, `small_m_cluster_wide_h100.json`)."""
    if splits == 1 or cfg.cluster_m > 1:
        return None
    ck = max(c for c in (1, 2, 4, 8) if c <= splits)
    cand = dataclasses.replace(cfg, cluster_k=ck)
    k_tiles = -(-k_bytes // ROW_BYTES)
    longest = CLUSTER_K_MAX_SHARE * (2 if m <= 32 else 1)
    ok = ck > 1 and _valid(cand) and ck <= k_tiles and -(-k_tiles // ck) <= longest
    return cand if ok else None


# half_cluster's bound on a CTA's K steps. A/B on an H100 (`sm90_half_cluster_ab_h100.json`, 48 shapes of M = 1-256 x
# N = 512-2048 whose clusters of 8 (4) do not all fit, every dtype): the half-size cluster against the workspace split,
# us: shares of 8-16 steps 0.72-0.99x the time (bf16 1 x 2048 x 2048 8.29 -> 6.22, e4m3 64 x 1024 x 4096 7.64 -> 5.94,
# s8 96 x 512 x 4096 6.39 -> 4.60), of 28-32 steps 0.93-1.03x (e4m3 64 x 2048 x 14336 17.45 -> 18.00), of 56-64 steps
# 1.05-1.08x (bf16 32 x 2048 x 14336 26.9 -> 28.4).
HALF_CLUSTER_MAX_SHARE = 16


def half_cluster(cand: Sm90Config, k_bytes: int, m: int) -> Sm90Config | None:
    """in_cluster's config with half as many CTAs per cluster, for when its clusters do not all fit at once
    (clusters of 8 fit 15 at a time on a 132-SM H100, of 4 30): None below 2 CTAs, or when a CTA's share of K
    would pass HALF_CLUSTER_MAX_SHARE steps. Past that bound a 64 x 128 tile split 4 ways becomes the 64 x 64 tile
    split 2 ways (as many CTAs, clusters of 2 fit 66 at a time; the workspace split lost to it after the producer
    fix, NOTES sm90 68: e4m3 128 x 2048 x 14336 18.5 -> 16.8 us, bf16 128 x 2048 x 8192 20.0 -> 17.7), for shares of
    up to CLUSTER_K_MAX_SHARE steps, or twice that for up to two row blocks (M <= 128): at M = 192-256 shares of 56
    steps lost to 4 workspace splits (bf16 256 x 1024 x 7168 15.4 against 13.6 us, e4m3 x 14336 16.2 / 14.0, NOTES
    sm90 72)."""
    half = dataclasses.replace(cand, cluster_k=cand.cluster_k // 2)
    k_tiles = -(-k_bytes // ROW_BYTES)
    if half.cluster_k > 1 and _valid(half) and -(-k_tiles // half.cluster_k) <= HALF_CLUSTER_MAX_SHARE:
        return half
    longest = CLUSTER_K_MAX_SHARE * (2 if m <= 128 else 1)
    if (cand.block_m, cand.block_n, cand.cluster_k) == (64, 128, 4) and -(-k_tiles // 2) <= longest:
        return dataclasses.replace(NARROW, cluster_k=2)
    return None


def split_tiles(cand: Sm90Config, m: int, n: int, k_bytes: int, sm_count: int) -> tuple[Sm90Config, ...]:
    """For in_cluster's 64-row tile (64 x 64 or 64 x 128) split in clusters over one row block (M <= 64): `cand` and the
    DECODE_SPLITS tiles whose CTAs fit one round of the SMs, most CTAs first, narrower first on ties; the caller takes
    the first whose clusters are all resident at once (66 of 2, 30 of 4 and 15 of 8 on a 132-SM H100). Below
    SPLIT_TILES_MIN_STEPS K steps only a 64 x 128 tile split 4 ways is widened (64 x 144-176 in fours), as measured
    there. Else just `cand`. Why: a split in clusters that do not all fit fell back to the workspace, and one that fits
    with few CTAs left SMs idle. Measured on an H100 under CUDA-graph replay (`small_m_cluster_wide_h100.json`,
    `sm90_cluster_k_wide_n_probe_s27_h100.json`, `sm90_split_tiles*_ab_h100.json`, NOTES sm90 49, 68-70): N = 4096 (32
    tiles of 128 columns for 30 clusters of 4) runs 29 of 64 x 144, bf16 16 x 4096 x 4096 17.8 -> 16.6 us; N = 2048 (16
    for 15 clusters of 8) 13 of 64 x 160, e4m3 16 x 2048 x 14336 16.6 -> 13.2; N = 2560-2880 27-30 of 64 x 96 in fours
    (108-120 CTAs, not 80-92 of 64 x 128), 0.86-0.93x the time; N = 4352-4864 (64 x 128 in pairs, 68-76 CTAs) 27-29 of
    64 x 160-176 in fours, 0.77-0.84x. Wider tiles lose (64 x 224 / 256 in clusters of 8 at N = 3072: 0.93-1.09x /
    1.04-1.22x), and so did 64 x 160 in eights at 4 KB of K (4 K steps a CTA: e4m3 64 x 2304 x 4096 8.05 -> 8.33 us)."""
    if cand.block_m != 64 or cand.block_n not in (64, 128) or cand.cluster_k == 1 or m > 64:
        return (cand,)
    pool = DECODE_SPLITS + (cand,)
    if -(-k_bytes // ROW_BYTES) < SPLIT_TILES_MIN_STEPS:
        pool = tuple(c for c in pool if c == cand or (cand.block_n == 128 and cand.cluster_k == c.cluster_k == 4
                                                      and c.block_n > 128))
    fits = [c for c in dict.fromkeys(pool) if c.ctas(m, n) * c.cluster_k <= sm_count]
    by_ctas = sorted(fits, key=lambda c: (-c.ctas(m, n) * c.cluster_k, c.block_n))
    return tuple(by_ctas) or (cand,)


# Token counts that 128-row blocks pad (M = 320: three blocks for 2.5): swapped tiles (C^T = B A^T) put the weight's
# rows on the 64-row wgmma blocks and the tokens on wgmma N, any multiple of 16, so two 160-column tiles cover 320 rows
# exactly. Twenty-ninth session (H100, graph replay, three interleaved rounds; `sm90_swap_grid_s29_h100.json`): the
# heuristic's 128-row lone tile against 64- and 128-row swapped tiles with block_n fitted to M, bf16 / e4m3, M = 160-1536
# x N = 1024-14336 x K = 4096. Swapped tiles won by 3-13% where the 128-row blocks padded M by 6% or more (bf16 320 x 8192
# 38.2 -> 34.0 us, torch 33.2; 400 x 8192 47.0 -> 41.4, torch 39.1; e4m3 400 x 4096 14.95 -> 13.2, torch 13.5) and lost
# 5-20% where they were narrow (128 x 80 at 320 x 4096: 1.10x) or replaced 64-row tiles and decode clusters at N <= 2048
# (1.02-1.2x). The rule: the 128-row tile of a whole-K plan (alone, or in CTA pairs along M sharing B) runs swapped when
# a swapped tile of at least SWAP_MIN_N columns, in no more rounds of the SMs, gives its busiest SMs SWAP_GAIN or less of
# the padded area; past SWAP_MIN_M rows, where it was measured (below, the fit, pair and cluster tiles above take those
# shapes). A/B over the shapes it changes (NOTES sm90 75): 360 of them, 0.92-0.95x the time.
SWAP_MIN_N, SWAP_GAIN, SWAP_MIN_M = 160, 0.95, 257
SWAP_CONFIGS = tuple(dataclasses.replace(deepest(bm, w), swap=True) for bm in (128, 64)
                     for w in range(SWAP_MIN_N, 257, 16))


def swap_ab(cfg: Sm90Config, m: int, n: int, sm_count: int) -> Sm90Config | None:
    """The swapped tile (C^T = B A^T) that covers an [m, n] result with the least padded area on its busiest SMs, if it
    takes no more rounds than `cfg` (a 128-row tile with the whole K, alone or in pairs along M) and SWAP_GAIN or less of
    its area; else None."""
    if m < SWAP_MIN_M or cfg.block_m != 128 or cfg.cluster_n > 1 or cfg.cluster_k > 1 or cfg.swap:
        return None
    rounds = -(-cfg.ctas(m, n) // sm_count)

    def busiest(c):
        return -(-c.ctas(m, n) // sm_count) * c.block_m * c.block_n

    fits = [c for c in SWAP_CONFIGS if -(-c.ctas(m, n) // sm_count) <= rounds]
    if not fits:
        return None
    best = min(fits, key=lambda c: (busiest(c), -c.block_m, c.block_n))
    return best if busiest(best) <= SWAP_GAIN * busiest(cfg) else None


# Programmatic dependent launch (NOTES sm90 76). A dependent call's CTAs start on SMs in the order the previous call's
# CTAs leave them, not where the CTA scheduler puts a fresh launch's (consecutive CTAs in pairs on one TPC, the pairs
# spread over the GPCs), so the raster's neighbours, which share A or B rows, land apart. Lone 64 x 128 and 128 x 96
# tiles over more than one row tile lose more to that than the ~1 us of launch gap PDL saves once a call is longer
# than PDL_MIN_US: their main loops ran up to 40% longer (e4m3 1536 x 512 x 14336, 64 x 128: 26.2 us against 18.8; a
# forced scramble of the raster costs a fresh launch as much). Wider tiles, swapped tiles, clusters, one row tile
# (decode), grids of at most half the SMs and shorter calls measured faster as dependents, or the same
# (`sm90_pdl_tiles_ab_*_h100.json`).
PDL_OFF_TILES = ((64, 128), (128, 96))
PDL_MIN_US = 12.0
PDL_BYTES_PER_US = 6e8  # m * n * k_bytes per us: ~600 TFLOP/s for 16-bit operands, twice that for 8-bit ones


def dependent_launch(cfg: Sm90Config, m: int, n: int, k_bytes: int, grid: int, sm_count: int,
                     dram_tbs: float) -> bool:
    """Whether a call of `cfg` on an [m, n] result with K of `k_bytes` bytes, in `grid` CTAs, launches as a
    programmatic dependent of the previous kernel (`dram_tbs`: the GPU's DRAM bandwidth, for the call's estimated
    time)."""
    if cfg.cluster > 1 or cfg.swap or (cfg.block_m, cfg.block_n) not in PDL_OFF_TILES or m <= cfg.block_m:
        return True
    if 2 * grid <= sm_count:
        return True
    us = m * n * k_bytes / PDL_BYTES_PER_US + ((m + n) * k_bytes + 2 * m * n) / (dram_tbs * 1e6)
    return us < PDL_MIN_US


def heuristic_configs(acc: str, out: str) -> tuple[Sm90Config, ...]:
    """Every config the heuristic (choose_sm90, share_a, in_cluster, half_cluster, split_tiles, long_k, split_wider, swap_ab)
    can give a variant that accumulates in `acc` ("f32", "f16", "s32") into `out`: no K split in clusters for f16 sums,
    no 192-row tile (TALL, TALL_FIT) for TALL_SPILLS."""
    menus = (SM90_CONFIGS + PAIR_CONFIGS + TALL_FIT + SPLIT_CLUSTERS + FIT_CONFIGS + SHARE_A_CONFIGS + LONG_K_CONFIGS
             + SPLIT_WIDER_TILES + SWAP_CONFIGS)
    return tuple(c for c in dict.fromkeys(menus)
                 if not (acc == "f16" and c.cluster_k > 1) and not (c.block_m == 192 and (acc, out) in TALL_SPILLS))
