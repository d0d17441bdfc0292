"""The sm90_w4a16 kernel family: fp16/bf16 activations x int4 weights on Hopper (sm_90a), wgmma with the
dequantised weight as the register operand of the transposed product (cuda_src/sm90_w4a16.cu). Configs are
data; `choose` is the heuristic; `Plan` launches."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

import torch

from . import runtime, tma
from .arch import Arch
from .errors import LayoutError
from .runtime import KernelSpec
from .sm80_w4a16 import ACT_KIND, kernel_group_size, variant_name
from .sm90_config import SMEM_LIMIT
from .split_k import tickets
from .w4a16_formats import W4A16Weight, zero_bits

STEM = "sm90_w4a16"
# TMA maps of A (whole row tiles, then the ragged last one), scales, zero points and C; then W, bias, workspace,
# tickets; then M, N, k_stages, strips, stream, max_parts, z_bits, has_bias, pre_stages.
KINDS = (runtime.MAP,) * 5 + (runtime.TENSOR,) * 4 + (runtime.INT,) * 9
INSTR = {torch.float16: "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16",
         torch.bfloat16: "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16"}
MIN_STAGES_PER_SPLIT = 2


@dataclass(frozen=True)
class Sm90W4A16Config:
    block_m: int     # activation rows per tile = the wgmma N (8..256)
    consumers: int   # consumer warpgroups (1 or 2)
    row_blocks: int  # 64-column blocks of the weight per consumer
    stages: int
    k_sub: int = 1   # 64-value slices of K per stage (2 / 4: one barrier round trip per 128 / 256 values)
    prefetch: int = 0  # stages a CTA prefetches into L2 before its grid dependency resolves (0: `stages`)
    cluster_k: int = 1  # > 1: clusters of this many CTAs split each tile's K and add their sums on chip
    ksplit: bool = False  # the (two) consumers share the tile's columns and take alternate K stages

    @property
    def block_n(self) -> int:
        return 64 * self.row_blocks * (1 if self.ksplit else self.consumers)

    @property
    def name(self) -> str:
        return f"w4a16wg_{self.block_m}x{self.block_n}_c{self.consumers}_s{self.stages}" + \
            (f"_k{64 * self.k_sub}" if self.k_sub > 1 else "") + (f"_x{self.cluster_k}" if self.cluster_k > 1 else "") \
            + (f"_p{self.prefetch}" if self.prefetch else "")

    @classmethod
    def parse(cls, name: str) -> "Sm90W4A16Config":
        m = re.fullmatch(r"w4a16wg_(\d+)x(\d+)_c(\d+)_s(\d+)(?:_k(64|128|256))?(?:_x(\d))?(?:_p(\d+))?", name.strip())
        # consumers that split K: block_n one consumer's columns (not a multiple of 64 x consumers)
        ksplit = bool(m) and int(m[3]) > 1 and int(m[2]) % (64 * int(m[3])) != 0
        if not m or int(m[2]) % (64 * (1 if ksplit else int(m[3]))):
            raise ValueError(f"config: cannot parse {name!r}; expected e.g. w4a16wg_8x256_c2_s8, "
                             "w4a16wg_8x256_c2_s6_k128, w4a16wg_64x64_c1_s8_k128_x2 (block_n a multiple of 64 x "
                             "consumers) or w4a16wg_8x64_c2_s4_k256_x2 (two consumers splitting K, block_n 64)")
        bm, bn, cons, stages = (int(x) for x in m.groups()[:4])
        return cls(bm, cons, bn // (64 * (1 if ksplit else cons)), stages, int(m[5] or 64) // 64, int(m[7] or 0),
                   int(m[6] or 1), ksplit)

    @property
    def chunk_rows(self) -> int:
        """Rows of an output chunk (one TMA store box): the largest multiple of 8 up to 64 that divides block_m."""
        r = min(self.block_m, 64) // 8 * 8
        while r > 8 and self.block_m % r:
            r -= 8
        return r

    def fold(self, group_size: int) -> bool:
        """Whether the kernel scales each stage's sums in fp32 (exact (q - zero) on the tensor cores, no multiply
        per weight): a stage (of a 256-value stage, each half) must span one group (not G = 32), and the tile's sums
        and two stage sets (3 x 32 accumulators) must fit, i.e. at most 64 x 64 outputs per consumer thread set."""
        return group_size != 32 and self.block_m * self.row_blocks <= 64

    def problem(self, group_size: int, k64: int) -> str | None:
        """Why this config cannot run a weight of k64 64-value slices and kernel group size `group_size`
        (0: per-channel), or None (the kernel's static_asserts, checked before NVRTC sees them). Two or four slices
        per stage need the per-stage fold and a group size of K or a multiple of 128 (four slices: two groups of
        128 a stage at most)."""
        if self.block_m % 8 or not 8 <= self.block_m <= 256 or (self.block_m > 64 and self.chunk_rows < 32):
            return (f"{self.name}: block_m (the wgmma N) must be a multiple of 8 up to 256, and past 64 one with a "
                    "divisor of 32 to 64 rows, a multiple of 8 (its output chunks)")
        if not 1 <= self.consumers <= 4 or self.row_blocks < 1 or self.stages < 2:
            return f"{self.name}: 1 to 4 consumers, at least one 64-column block each, at least 2 stages"
        if not 1 <= self.cluster_k <= 8:
            return f"{self.name}: clusters of 1 to 8 CTAs"
        if self.ksplit and (self.consumers != 2 or self.block_n > 64 or self.k_sub != 4 or self.stages % 2):
            return (f"{self.name}: consumers that split K are two, on one 64-column block with 256-value stages "
                    "(the form measured and tested) and an even ring (each slot serves one of them)")
        if k64 < self.cluster_k * self.k_sub:
            return f"{self.name} splits K {self.cluster_k} ways: K needs at least {self.cluster_k * self.k_sub * 64}"
        if self.k_sub == 1:
            return None
        four_ok = self.k_sub < 4 or group_size == 128 or group_size % 256 == 0  # a group boundary mid-stage at most
        if not self.fold(group_size) or group_size % 128 or not four_ok:
            return (f"{self.name} needs M tiles x row blocks <= 64 and a group size of K or a multiple of 128 "
                    "(256-value stages: 128 or a multiple of 256)")
        if k64 % self.k_sub:
            return f"{self.name} needs K padded to a multiple of {64 * self.k_sub}"
        return None

    def groups_per_stage(self, group_size: int) -> int:
        """Scale groups a stage spans (group_size 0: per-channel, one): the kernel's GPS, rendered into its header."""
        return max(1, 64 * self.k_sub // group_size) if group_size else 1

    def tiles(self, m: int, n: int) -> int:
        return -(-m // self.block_m) * -(-n // self.block_n)

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    def stage_bytes(self, group_size: int, has_zeros: bool) -> int:
        """Per 64-value slice of K: activations (block_m rows x 128 bytes) and weight strips (512 bytes per 16
        columns); scales (and zero points): 32 bytes per strip and group of the stage; rounded up to 1 KB (the
        swizzle alignment)."""
        strips = self.block_n // 16
        gps = self.groups_per_stage(group_size)
        raw = self.k_sub * (self.block_m * 128 + strips * 512) + strips * gps * 32 * (2 if has_zeros else 1)
        return -(-raw // 1024) * 1024

    def smem_bytes(self, group_size: int = 128, has_zeros: bool = False) -> int:
        """The ring, two output chunks per consumer, the receive slots of a cluster's first CTA (fp32 sums of the
        tile per other CTA), the barriers and 1 KB of alignment slack."""
        chunk = -(-self.chunk_rows * 128 // 1024) * 1024
        recv = (self.cluster_k - 1) * self.block_m * self.block_n * 4
        return (self.stages * self.stage_bytes(group_size, has_zeros) + self.consumers * 2 * chunk + recv
                + 16 * self.stages + (8 * self.consumers if self.cluster_k > 1 else 0) + 1024)


C = Sm90W4A16Config
# Mid M: M = 129..2048. Which tile height pads M least and fills the SMs best decides (256 x 128 tiles
# alone ran M = 288 as two 256-row blocks, 0.6-0.7x fp16 torch.matmul). Each candidate's whole-tile and stream-K plans
# are costed in stage-times (`mid_m_plan`): a stage of a bm-row tile costs MID_M_STAGE[0] + MID_M_STAGE[1] x bm, a
# fix-up MID_M_FIXUP stage-times per 128 rows (its sums are the tile's). Past MID_M_STREAM_MAX rows a weight of
# WEIGHT_ONCE_BYTES or more runs whole tiles: stream-K CTAs that share a weight column block run at different K offsets,
# so past L2's reach they stream it from DRAM once per row block (8192 x 28672 M = 1536-1792 1049 / 1190 us whole
# against 1140 / 1321 stream-K; 14336 x 8192 M = 1536 497 / 598). The constants are fitted to pick the plans that
# measured fastest, not to predict times (a stage measures 0.42 / 0.53 / 0.69 us for 128 / 192 / 256 rows on an H100):
# over every candidate whole and stream-K at M = 136-1792 x 7-8 shapes (benchmarks/results/
# w4a16_{bigm,bigm2,lowm}_probe_s32_h100.json, after part 0 of a tile stopped publishing its sums) the picks take
# 1.006 / 1.011 / 1.004x the best candidate's time at M = 257-1024 / 1025-2048 / 129-192 (the constants before, fitted
# on the older fix-up with no stream-K past 1024 rows: 1.022 / 1.057 / 1.030).
# M = 129..256 only where the rounds pick is a two-consumer tile: the one-consumer 128 x 64 tile leads where it takes
# one round (4096 x 4096 M = 160 16.6 us against 19.3 for the best two-consumer plan). Up to MID_M_STREAM_MAX rows the
# candidates include FITTED tile heights (below).
MID_M, MID_M_STAGE, MID_M_FIXUP = ((128, 2048),), (0.146, 0.0012), 5
MID_M_STREAM_MAX = 1024  # past it, stream-K only for weights under WEIGHT_ONCE_BYTES (`large_weight`, below)


def mid_m(m: int) -> bool:
    """Whether M falls in a MID_M range, where tiles and plans are chosen by `mid_m_plan`."""
    return any(lo < m <= hi for lo, hi in MID_M)


# By the largest M each serves (data, not branches), candidates in order of preference (the first that `fits`
# the weight, unless a later one needs fewer rounds of the SMs: `choose`). Small M: the instruction's N is M
# rounded up to 8, a stage is two 64-value slices of K where the group size allows, and the tile 128 weight
# columns wide with an 8-deep ring: twice the tiles of a 256-wide one, so K splits only half as often (16 x 4096 x
# 14336: 112 whole tiles, no fix-up), and smaller stages. H100, benchmarks/results/w4a16_tune_n128_h100.json, three
# interleaved rounds, against the 256-wide tiles: M = 8 4096 x 14336 13.2 us against 14.5, 14336 x 4096 13.9 / 14.6;
# M = 16 13.7 / 14.6 and 14.3 / 15.4, 4096 x 4096 7.4 / 8.6; M = 32 14.4 / 16.7, 15.2 / 18.9, 7.7 / 11.3. Where 128
# columns would take two rounds (N = 28672: 224 tiles) the 256-wide tile stays (44.8 against 47.4 us at M = 8;
# M = 1 there: 5 stages 42.3 against 44.6 for 6). Large M: 256 x 128 tiles like a plain wgmma GEMM. For M = 2..64 a
# CTA prefetches only 2-3 stages into L2 before its grid dependency resolves, not its whole ring: a smaller first
# burst from every SM at once (benchmarks/results/w4a16_tune_prefetch_h100.json: 16 x 4096 x 14336 15.03 -> 14.56
# us with 256-wide tiles, 64 x 14336 x 4096 21.87 -> 21.14; M = 1 and M >= 128 tiles gain nothing or lose).
# M = 33..64: 64 x 128 tiles with the per-stage fold and 128-value stages, 7 deep (H100, benchmarks/results/
# w4a16_fold_m64_h100.json, three interleaved rounds, against 64-value stages scaling every weight: M = 64 4096 x 4096
# 10.45 us / 10.74, 14336 x 4096 19.3 / 20.8, 4096 x 14336 17.4 / 19.5, 8192 x 8192 20.5 / 22.3; the fold with
# 64-value stages was slower than either, 11.2 at 4096 x 4096). Measured on an H200 unless said:
# benchmarks/results/w4a16_tune*.json.
# Tiles fitted to M: the wgmma N takes any multiple of 8, so a row block need not be 128, 192 or 256 rows; these
# heights (output chunks of 40-56 rows: one TMA store box size per tile) cover M = 129..1024 in 1-4 row blocks with
# little padding (M = 288: 2 x 144, not 2 x 192; M = 600: 3 x 200, not 3 x 256). `mid_m_plan` costs them like the
# others. A/Bs against 128 / 192 / 256 only, CUDA-graph replay, 3 interleaved rounds, bf16, G = 128: H200, 96 changed
# picks over 7 shapes at M = 150-1792, 0.94x / 0.92x the time (M = 288 14336 x 8192 129.4 -> 107.1 us, M = 400 8192 x
# 28672 359.9 -> 305.0); H100, 84 other rows over 9 shapes 0.918x; M = 193..256, 61 rows 0.921x (8192 x 28672 M = 200
# 182.8 -> 144.0), the worst 1.025 (4096 x 11008 M = 232). 240 rows lost to 256 (1.01-1.08: dropped), and past 1024
# rows the fitted tiles won nothing overall (8192 x 28672 M = 1536 1071 -> 1123 us, 4096 x 11008 M = 1100 150 -> 169;
# padding is at most a fifth there): benchmarks/results/w4a16_fitted_*.json. Rings as deep as shared memory allows for
# tiles of 128-168 rows (8 / 7 / 7 / 7 stages, not 6; 192 and 200 rows fit no seventh, 224 no sixth): a forced probe
# found them 3-12% faster at M = 224-1400 (H100, benchmarks/results/w4a16_stages{,128}_probe_h100.json), the A/B of
# 48 such picks 0.959x (worst 1.005; w4a16_deeper_rings_ab_h100.json); the 256-row tile with a fifth stage was 5-10%
# slower than with four at M = 512-2048 (w4a16_stages256_probe_h100.json).
# How the small-M candidates below came to be (the stage times and picks quoted up to SMALL_M_STAGE_US are those of
# the stage-time costing before the time model, NOTES W4A16 68, which re-fitted every stage time to forced times).
# M = 9..64 with 128-value stages: beside the 128-column two-consumer tile, a 64-column one-consumer tile. It makes
# twice the tiles, so K splits into half as many parts, each part's sums are half as large, and it may split K
# unequally where the 128-column tile of 64 rows takes only aligned splits (11008 x 4096: 64 CTAs); but its stages
# cost more per weight (one warpgroup dequantises them). Which wins depends on the shape, so where the rounds rule
# picks the 128-column tile, `choose` takes whichever of the two has the busiest CTA (then: stage-times, fill and
# fix-ups of its `schedule`) that costs least at the tile's stage time below. The stage times (us, H100) were
# fitted to pick the faster plan, not to predict times (since NOTES W4A16 68 a time model's: SMALL_M_STAGE_US): only
# their ratio within a row mattered (narrow / wide: 0.76-0.82
# at M = 16, 0.70-0.74 at 32, 0.60-0.67 at 64), each range the one that picks the faster measured tile on every row
# but ties within 1% (benchmarks/results/w4a16_m{16,32}_probe_h100.json, 14 shapes each; w4a16_m64_c1_probe_h100.json,
# 26 rows, one miss by 0.2%). CUDA-graph replay, us, 128 columns -> the pick (fp16 torch.matmul): M = 64 4096 x 4096
# 10.3 -> 9.1 (15.2), 4096 x 1024 11.1 -> 7.0 (9.0), 2048 x 2048 8.5 -> 5.8 (6.7), 11008 x 4096 24.1 -> 17.2 (38.2);
# M = 32 4096 x 1024 7.3 -> 5.5 (8.7), 2048 x 2048 6.0 -> 4.9 (6.6); M = 16 1024 x 4096 4.7 -> 4.0 (5.8). The 128
# columns stay at 4096 x 4096 for M <= 32 (7.3 against 8.0 at M = 16), 14336 x 4096 and 8192 x 8192. (Costing the
# 256-column tiles too fitted no ratio that kept both 28672 x 8192 and 4096 x 22016 at M = 32 on their faster tile:
# they keep the rounds rule.)
# At M = 33..64 a third candidate, two 32-row blocks of 64 columns, wins where N is small (4096 x 512 M = 64 8.4 ->
# 5.5 us, fp16 7.6; 4096 x 1024 7.1 -> 6.2; 2048 x 1024 6.4 -> 4.9; w4a16_m64_32row_probe_h100.json, 28 rows: its
# ratio to the 64-row tile, 0.69-0.75, picks the fastest of the three on every row but ties within 1%). Up to N = 1024
# only (SMALL_M_MAX_N, which gives up 1024 x 4096: 4.4 against 4.3 us): the validation A/B
# (w4a16_m64_32row_val_ab_h100.json, 60 changed picks of an unlimited rule, 0.90x) had every pick at N <= 1024 faster
# (0.72-0.90x) but some at N = 1536-4096 up to 1.14x slower (3072 x 3072), where the estimate cannot tell them apart.
# At M = 9..16 the 16 x 64 one-consumer tile with 256-value stages in clusters beats the other candidates where its
# clusters fill the SMs: in pairs at N = 4096, K = 2048..8192 (H100, CUDA-graph replay, us, heuristic before -> it: 16 x
# 4096 x 4096 6.27 -> 5.88, 3072 x 4096 5.27 -> 5.07, 6144 x 4096 8.44 -> 7.59, 8192 x 4096 9.79 -> 9.40, 2048 x 4096
# 4.49 -> 4.28), in sixes and eights at N <= 1024 (16 x 8192 x 512 5.60 -> 4.18, 11008 x 1024 7.31 -> 5.89, 6144 x 256
# 5.69 -> 3.70); its pairs lose where they leave SMs idle (4096 x 2048 4.89 against 5.64, 4096 x 3072 5.59 / 5.81).
# benchmarks/results/w4a16_n64_k256_probe_h100.json, w4a16_m16_k256_small_n_probe_h100.json; A/Bs of the changed picks
# w4a16_m16_k256_ab_h100.json (15 rows, 0.925x), w4a16_m16_k256_small_n_ab_h100.json (14 rows, 0.877x, 0.65-0.99).
# 0.50 takes all of those (0.55 took the N = 4096 ones only); it misses 1024 x 4096 by 2% (3.18 against 3.11).
# M <= 8 (where the decode kernel does not take them) is costed the same way since then: the 8 x 128 tile whole or in
# stream-K, its cluster variants, and the 8 x 64 one-consumer tile with 256-value stages in clusters. Clusters win
# almost everywhere there (H100, us, the 8 x 128 tile's plan -> the pick: 8 x 4096 x 4096 6.92 -> 5.81 (8 x 64 in pairs),
# 8 x 8192 x 8192 15.4 -> 13.4 (8 x 128 in pairs), 8 x 2048 x 3072 5.18 -> 3.65 (in fours), 8 x 4096 x 2048 5.68 -> 4.49
# (in sixes), 8 x 8192 x 1024 5.92 -> 4.93 (8 x 64 in sixes); benchmarks/results/w4a16_m8_cluster_probe_h100.json, 26
# rows at M = 4 / 8: the pick within 3% of the fastest forced plan on all but 8192 x 6144, where the 8 x 128 plan stays
# (14.9 against 13.0 in pairs); 0.83x the time of the plans before over the 26). Any stage times in 0.35-0.5 with the
# 8 x 64 one 0-0.05 above the 8 x 128 one's pick the same.
# Since then the 8- and 16-row 64-column tiles with 256-value stages have two consumer warpgroups that take alternate
# stages of the tile's K (`ksplit`) and an 8-deep ring (each consumer holds two slots), at the stage times measured for
# the one-consumer tile they replace (the same picks): H100, CUDA-graph replay, 3 interleaved rounds, forced plans, us,
# one consumer -> two: M = 1 / 8 x 4096 x 4096 5.83 / 5.79 -> 5.62 / 5.57, 2048 x 4096 4.12 -> 3.94, 11008 x 1024
# (sixes) 5.65 -> 5.49, 14336 x 512 (eights) 5.21 -> 5.07; M = 16 x 4096 x 4096 5.95 -> 5.85, 2048 x 4096 4.29 -> 4.14;
# 0.956-1.006x over 30 rows at M = 1 / 8 and 0.960-1.016x over 25 at M = 12 / 16 (K = 1024-14336, N = 512 / 1024 / 4096;
# ties past K = 5120 at N = 4096; benchmarks/results/w4a16_ksplit_probe_h100.json). A 10-deep ring was slower than 8,
# and before the consumers' slot count was made warp-uniform to the compiler (scalar barrier and slot arithmetic) they
# only tied. At 32 rows (8 stages fit in pairs only) two consumers won at N = 4096, K <= 4096 and lost past it and in
# threes (w4a16_ksplit32_probe_h100.json): not used.
# The 32- and 64-row one-consumer 256-value tiles' stage times (0.52 / 0.47 from NOTES W4A16 59) lowered to 0.48 / 0.45:
# their clusters then take long-K shapes from the 128-value tiles' plans (H100, heuristic A/B, us: 32 x 14336 x 1024
# 9.3 -> 7.4 in sixes, 32 x 11008 x 1536 9.2 -> 7.9 in fours, 32 x 6144 x 256 7.1 -> 4.5 in eights, 64 x 4096 x 1536
# 7.2 -> 6.0 in threes; 33 rows at M = 17-32 0.88x, 0.63-1.003; 16 at M = 48 / 64 0.935x, 0.83-1.004;
# benchmarks/results/w4a16_m32_k256_stage0{50,48}_ab_h100.json, w4a16_m64_k256_stage043_ab_h100.json). Lower (0.46 /
# 0.43) also took shapes where those clusters lose 3-10% (32 x 8192 x 3072 in pairs, 64 x 2048 x 2048 in threes).
KSPLIT_8 = C(8, 2, 1, 8, 4, prefetch=1, ksplit=True)
KSPLIT_16 = C(16, 2, 1, 8, 4, prefetch=1, ksplit=True)
# The small-M time model (`small_m_costs`, `plan_us`; NOTES W4A16 68, 70), SMALL_M_MODEL's constants in us. A plan
# takes its kind's constant ("whole", "stream", "cluster": launch, fill, epilogue), plus the longer of its busiest CTA's
# stream and the whole weight's DRAM time ("dram_us_per_mb" at 3.35 TB/s, scaled by the GPU's peak), plus the fix-ups
# that follow the stream. A CTA's stream: its stages at the tile's stage time (SMALL_M_STAGE_US, by CONFIGS row) and
# "tile_us" per further tile it takes; its fix-ups, for each segment it shares with other CTAs in stream-K:
# "stream_fixup_us" and "stream_part_us" per other part (each: us, and us per KB of the tile's fp32 sums; the adding CTA
# reads the parts one after another); the busiest CTA's count. A cluster's first CTA takes "cluster_part_us_per_kb"
# per KB of sums per peer. Fitted (scripts/w4a16_cost_fit.py: least squares on log time) to every plan `choose` costs
# (each candidate with each of its `plain_plans` grids, and its cluster variants) at 432 (M, K, N), M = 8 / 16 / 32 /
# 64, K = 1024-14336, N = 256-14336 on an H100 (6663 forced plans, w4a16_small_m_grids_probe_h100.json in
# benchmarks/results): 4.7% rms error; its picks take 1.0020x the fastest plan's time, 1.0019x on the grid at M = 4 /
# 12 / 24 / 48, which the fit did not see (_check). (The stage-time costing before the time model: 1.019x the fastest
# candidate, each with one grid.) The 128-row tiles (M = 65..128) have their own constants (TALL_MODEL) and stage
# times, fitted the same way.
SMALL_M_STAGE_US = {
    8: {C(8, 2, 1, 8, 2, prefetch=3): 0.329, KSPLIT_8: 0.407},
    16: {C(16, 1, 1, 8, 2, prefetch=3): 0.264, C(16, 2, 1, 8, 2, prefetch=3): 0.341, KSPLIT_16: 0.435},
    32: {C(32, 1, 1, 8, 2, prefetch=2): 0.280, C(32, 2, 1, 8, 2, prefetch=2): 0.361,
         C(32, 1, 1, 4, 4, prefetch=1): 0.481},
    64: {C(64, 1, 1, 8, 2, prefetch=2): 0.320, C(64, 2, 1, 7, 2, prefetch=2): 0.478,
         C(32, 1, 1, 8, 2, prefetch=2): 0.278, C(64, 1, 1, 4, 4, prefetch=1): 0.578},
    128: {C(128, 1, 1, 8): 0.225, C(128, 2, 1, 8): 0.350}}
SMALL_M_MODEL = {"whole": 1.857, "stream": 2.358, "cluster": 1.919, "dram_us_per_mb": 0.382,
                 "stream_fixup_us": (0.816, 0.0317), "stream_part_us": (0.0156, 0.0103),
                 "cluster_part_us_per_kb": 0.0180, "tile_us": 0.224}
# The 128-row tiles' own constants (NOTES W4A16 69, 70): fitted to theirs alone (3250 plans of 216 shapes at M = 80 /
# 128 over the K x N grid above, w4a16_mid_m_grids_probe_h100.json; 6.7% rms error; picks 1.0028x the fastest, 1.0025x
# at M = 96 / 112). With the small tiles' constants their stream-K fix-ups of 64 KB of sums cost too much. At K = 11008
# / 14336 and N <= 2048 the one-consumer 128 x 64 tiles win there (in clusters of 4 or whole: MAX_K64 does not apply).
TALL_MODEL = {"whole": 2.194, "stream": 5.039, "cluster": 2.477, "dram_us_per_mb": 0.701,
              "stream_fixup_us": (0.0, 0.0), "stream_part_us": (0.413, 0.0063), "cluster_part_us_per_kb": 0.0173,
              "tile_us": 0.053}
SMALL_M_MAX_N = {64: {C(32, 1, 1, 8, 2, prefetch=2): 1024}}  # the most columns a costed candidate takes, by row
FITTED = (C(144, 2, 1, 7), C(160, 2, 1, 7), C(168, 2, 1, 7), C(200, 2, 1, 6), C(224, 2, 1, 5))
CONFIGS = (
    (8, (C(8, 2, 1, 8, 2, prefetch=3), C(8, 2, 2, 5, 2), C(8, 2, 2, 8), KSPLIT_8)),
    # M = 9..64: the narrow one-consumer tiles only where SMALL_M_STAGE_US prefers them to the first
    (16, (C(16, 2, 1, 8, 2, prefetch=3), C(16, 2, 2, 4, 2, prefetch=2), C(16, 2, 2, 8), C(16, 1, 1, 8, 2, prefetch=3),
          KSPLIT_16)),
    (32, (C(32, 2, 1, 8, 2, prefetch=2), C(32, 2, 2, 6, 2, prefetch=2), C(32, 2, 2, 8), C(32, 1, 1, 8, 2, prefetch=2),
          C(32, 1, 1, 4, 4, prefetch=1))),
    (64, (C(64, 2, 1, 7, 2, prefetch=2), C(64, 2, 2, 6), C(64, 1, 1, 8, 2, prefetch=2), C(32, 1, 1, 8, 2, prefetch=2),
          C(64, 1, 1, 4, 4, prefetch=1))),
    (128, (C(128, 1, 1, 8), C(128, 2, 1, 8))),
    (256, (C(128, 1, 1, 8), C(128, 2, 1, 8), C(256, 2, 1, 4), C(192, 2, 1, 6), *FITTED)),
    (MID_M[-1][1], (C(256, 2, 1, 4), C(192, 2, 1, 6), C(128, 2, 1, 8), *FITTED)),  # by estimated time (`mid_m_plan`)
    (1 << 31, (C(256, 2, 1, 4),)),
)


# Candidates the rounds rule (M = 129..256) takes only up to this many 64-value slices of K. 128 x 64 tiles with one
# consumer: twice the tiles of 128 x 128 ones, so K splits only half as often (4096 x 4096 M = 256: 128 whole tiles
# instead of 64 x 2 splits); one consumer warpgroup per SM costs more the longer K is (H100, benchmarks/results/
# w4a16_tune_m256_h100.json: M = 128 4096 x 4096 13.5 us against 15.5, 8192 x 4096 21.0 / 21.6, 14336 x 4096 31.7 /
# 30.6; M = 256 16.9 / 19.3, 31.7 / 32.5, 57.8 / 53.3). The time model (M <= 128) costs them at any K: at K = 11008 /
# 14336 and N <= 2048 they win, in clusters of 4 or whole (128 x 14336 x 256 17.9 us against 54.9 for the 128 x 128
# tile's stream-K; NOTES W4A16 70, benchmarks/results/w4a16_mid_m_long_k_probe_h100.json).
MAX_K64 = {C(128, 1, 1, 8): 128}


# Large weights: two 128-row blocks (M = 129..256) stream each weight column twice, once per row block, and the two
# CTAs that share a column drift apart, so past L2's reach the weight comes from DRAM twice (and the time varies call
# to call); a 256-row tile streams it once. Where the 256-row tiles fill the SMs in an aligned 2-way K
# split (N = 8192), they win from 32 MiB of int4 weight. H100, CUDA-graph replay, 3 interleaved rounds, us, 128 x 128
# whole tiles (two runs) -> 256 x 128 split 2 ways (fp16 torch.matmul): 14336 x 8192 M = 160 103.0 / 96.8 -> 85.0
# (86.5), M = 256 110.5 / 110.4 -> 96.4 (93.6); 28672 x 8192 M = 192 206.0 / 212.9 -> 174.1 (188.1); 8192 x 8192 M = 256
# 75.0 / 58.4 -> 55.0 (56.9), M = 192 54.6 / 54.3 -> 54.6; smaller weights lose (4096 x 8192 M = 256 27.9 -> 32.0, 8192
# x 4096 31.7 -> 35.4): benchmarks/results/w4a16_m256_rows_probe_h100.json. A rule took the 256-row tile there until
# M = 193..256 joined MID_M, whose estimate makes the same picks (one row block of 160-256 rows) by itself.
WEIGHT_ONCE_BYTES = 32 << 20


def large_weight(n: int, k64: int) -> bool:
    """Whether an int4 weight of N columns and k64 64-value slices of K (32 bytes per column and slice) holds
    WEIGHT_ONCE_BYTES or more: past L2's reach, where streaming it more than once costs DRAM time."""
    return n * k64 * 32 >= WEIGHT_ONCE_BYTES


# Tiles split inside a cluster (`cluster_k`): the CTAs of a cluster take equal aligned shares of one tile's K and the
# others push their sums into the first's shared memory, so a fix-up costs less than a stream-K fix-up through L2
# (costed by the small-M time model, SMALL_M_MODEL; before it, 1 against FIXUP's 5 stage-times).
# Where every tile's cluster is resident at once, `choose` costs the cluster variants of the SMALL_M_STAGE_US
# candidates beside them, with shares of at most CLUSTER_MAX_SHARE 64-value slices of K. That
# trades SMs for fix-ups: fewer, longer parts (H100, CUDA-graph replay, 3 interleaved rounds, us, heuristic before ->
# cluster variant:
# 16 x 4096 x 4096 7.36 -> 6.60 (16 x 128 in clusters of 3: 96 CTAs), 64 x 4096 x 4096 9.10 -> 8.09 (64 x 64 in pairs),
# 16 x 2048 x 2048 4.74 -> 3.71 (16 x 128 in fours: 64 CTAs), 64 x 2048 x 2048 5.94 -> 4.62 (32 x 64 in pairs); but at
# 14336 x 4096 the 128 stream-K CTAs stay ahead: 14.36 us against 16.63 for 96 in clusters of 3;
# benchmarks/results/w4a16_cluster_k_{,fix_}probe_h100.json). Clusters of 4 fit only 30 at a time on a 132-SM H100
# (of 2: 66, of 3: 39, of 8: 15), hence `cluster_capacity`. The receive slots ((P - 1) x the tile's fp32 sums) must fit
# beside the candidate's ring (SMEM_LIMIT, with zero points). Past 64 slices a CTA (32 stages of 128 values) the
# small tiles' on-chip fix-up no longer pays for the SMs it idles or, at the same split as stream-K's, gains nothing
# (64 x 11008 x 4096, 43 stages: 17.2 us in stream-K, 17.4 in pairs; 16 x 28672 x 8192, 112 stages: 44.6 / 45.1;
# 32 x 8192 x 8192, 32 stages: 16.4 / 15.5; benchmarks/results/w4a16_cluster_k_fix_probe_h100.json). Not for the
# tiles whose two consumers split K (KSPLIT_8 / 16) since each has a producer warp of its own (NOTES W4A16 74): their
# pairs at N = 4096 stream long K faster than any other plan (H100, us, M = 1 / 16, heuristic before -> pairs:
# 11008 x 4096 12.46 -> 10.30 / 13.06 -> 10.95, 14336 x 4096 13.41 -> 12.45 / 14.21 -> 13.24, 28672 x 4096 23.9 ->
# 22.4 / -; benchmarks/results/w4a16_ksplit_long_k_probe_h100.json).
CLUSTER_MAX_SHARE = 64
# Cluster sizes costed (those the validation picked; 5 and 7 rarely fit more clusters than 4 and 8: 22 and 15 of them).
CLUSTER_SIZES = (2, 3, 4, 6, 8)
# M = 65..128 (CONFIGS' 128-row tiles, 32 KB+ of sums per consumer): costed like M <= 64 (SMALL_M_STAGE_US[128]), their
# cluster variants with a ring as deep as fits beside the receive slots (CLUSTER_MIN_RING stages at least). The cluster
# variants first measured there (H100, us, the rounds rule's plain plan -> cluster variant: 128 x 4096 x 4096 12.86 ->
# 11.45 in pairs, 128 x 4096 x 1024 12.35 -> 8.55 in fours with 5 stages; w4a16_cluster_k_midm_probe_h100.json) were
# picked by stage-times until NOTES W4A16 69.
CLUSTER_MIN_RING = 4
# KSPLIT pairs whose CTA share fits the ring (every stage issued at once) and is longer than PAIR_PREFETCH stages
# prefetch that many into L2 before the grid dependency resolves, not KSPLIT's one (of 1-4, 3 ran fastest; 4: 5.75 us
# at M = 16). H100, us, two interleaved runs of 3 and 6 rounds, 1 / 2 / 3 stages (NOTES W4A16 75,
# `w4a16_ksplit_prefetch_probe_h100.json`): 4096 x 4096 M = 1 5.45 / 5.42 / 5.33, M = 16 5.72 / 5.59 / 5.53, 2048 x
# 4096 M = 1 3.85 / 3.81 / 3.76; past the ring no gain (6144 x 4096 6.77 / 6.76 / 6.69, 8192 x 4096 8.13 / 8.11 /
# 8.20), and in clusters of 3-6 with short shares a loss (4096 x 1024 in sixes 3.36 / 3.39 / 3.44): deeper prefetches
# compete with the previous kernel's last CTAs (notes 63, 73).
PAIR_PREFETCH = 3


def cluster_variants(config: Sm90W4A16Config, m: int, n: int, k_stages: int, sm_count: int,
                     clusters: dict[int, int], shrink: bool = False):
    """config's cluster-K variants (`clusters`: cluster size -> clusters resident at once) whose clusters are all
    resident at once, with MIN_STAGES_PER_SPLIT stages per CTA at least and (but KSPLIT) CLUSTER_MAX_SHARE 64-value
    slices of K at most, and shared memory for the receive slots (`shrink`: the deepest ring of at least
    CLUSTER_MIN_RING stages that leaves room for them); KSPLIT pairs with a share the ring holds: PAIR_PREFETCH."""
    tiles = config.tiles(m, n)
    for p, fit in clusters.items():
        short = config.ksplit or k_stages * config.k_sub <= CLUSTER_MAX_SHARE * p
        if p not in CLUSTER_SIZES or not (tiles <= fit and tiles * p <= sm_count and MIN_STAGES_PER_SPLIT * p <=
                                          k_stages and short):
            continue
        v = _fitted_ring(replace(config, cluster_k=p), shrink)
        if v is not None and config.ksplit and p == 2 and PAIR_PREFETCH < -(-k_stages // p) <= v.stages:
            v = replace(v, prefetch=PAIR_PREFETCH)
        if v is not None:
            yield v


def _fitted_ring(v: Sm90W4A16Config, shrink: bool) -> Sm90W4A16Config | None:
    """v, or (shrink) v with the deepest ring down to CLUSTER_MIN_RING stages, whose shared memory (with zero points)
    fits SMEM_LIMIT; None if none does."""
    for stages in range(v.stages, min(v.stages, CLUSTER_MIN_RING) - 1 if shrink else v.stages - 1, -1):
        if (w := replace(v, stages=stages)).smem_bytes(128, True) <= SMEM_LIMIT:
            return w
    return None


def choose(m: int, n: int = 0, sm_count: int = 132, group_size: int = 128, k64: int = 2,
           clusters: dict[int, int] | None = None, dram_tbs: float = 3.35) -> Sm90W4A16Config:
    """The config for M's class: of its candidates that fit the weight (`fits`: kernel group size, K in 64-value
    slices) and its K (MAX_K64), the one whose tiles need the fewest rounds of the SMs (a CTA that takes a second
    tile costs a whole second pass), the first on a tie; where that one has a SMALL_M_STAGE_US, of the candidates
    that have one and fit (at any K: MAX_K64 is the rounds rule's; N within their SMALL_M_MAX_N), with each of their
    `plain_plans` and `cluster_variants` (`clusters`: cluster size -> clusters resident at once, from
    `cluster_capacity`; None: no clusters), the one the small-M time model has fastest on a GPU of `dram_tbs` TB/s
    peak DRAM (`small_m_costs`); in the MID_M ranges, unless the pick has one consumer,
    the two-consumer candidate whose best plan `mid_m_plan` costs least (FITTED heights up to MID_M_STREAM_MAX
    rows)."""
    limit, row = next((limit, c) for limit, c in CONFIGS if m <= limit)
    fits = [c for c in row if c.problem(group_size, k64) is None]
    candidates = [c for c in fits if k64 <= MAX_K64.get(c, k64)]
    rounds = lambda c: -(-c.tiles(m, n) // sm_count)  # noqa: E731
    best = min(candidates, key=rounds)
    stage_us, max_n = SMALL_M_STAGE_US.get(limit, {}), SMALL_M_MAX_N.get(limit, {})
    if best in stage_us and n > 0:  # (n = 0: N unknown, the rounds rule's pick)
        cost = small_m_costs([c for c in fits if c in stage_us and n <= max_n.get(c, n)], stage_us, m, n, k64,
                             sm_count, clusters, dram_tbs)
        return min(cost, key=cost.get)[0]
    if mid_m(m) and best.consumers > 1:
        fitted = m <= MID_M_STREAM_MAX  # FITTED tiles: see there
        return min((c for c in candidates if c.consumers > 1 and (fitted or c not in FITTED)),
                   key=lambda c: mid_m_plan(c, m, n, k64 // c.k_sub, sm_count)[0])
    return best


def small_m_costs(pool, stage_us: dict, m: int, n: int, k64: int, sm_count: int, clusters: dict[int, int] | None,
                  dram_tbs: float, model: dict | None = None) -> dict:
    """`choose`'s costing of the SMALL_M_STAGE_US candidates `pool`: (config (plain or a `cluster_variants` one),
    (grid, stream)) -> that plan's time in us by the small-M time model (`small_m_plans`, `plan_us`). (256-value stages
    were measured in clusters only, NOTES W4A16 59: as plain tiles they are not costed.) `model`: other constants
    (`plan_us`)."""
    weight_mb = k64 * 32 * n / 1e6
    return {(v, plan): plan_us(kind, ctas, stage_us[c], v, weight_mb, dram_tbs, plan[0], model)
            for c, v, kind, ctas, plan in small_m_plans(pool, m, n, k64, sm_count, clusters)}


def small_m_time(config: Sm90W4A16Config, m: int, n: int, k64: int, dram_tbs: float) -> float:
    """The small-M time model's time (us) for a cluster-variant pick `config` of `choose` at M <= 64 (`plan_us`)."""
    limit = next(limit for limit, _ in CONFIGS if m <= limit)
    stage_us = next((us for c, us in SMALL_M_STAGE_US.get(limit, {}).items()  # (PAIR_PREFETCH: any prefetch)
                     if replace(config, cluster_k=1, prefetch=c.prefetch) == c), None)
    if stage_us is None or config.cluster_k == 1:
        raise ValueError(f"{config.name} is no small-M cluster variant of M = {m}'s candidates")
    return plan_us("cluster", cluster_ctas(config, k64), stage_us, config, k64 * 32 * n / 1e6, dram_tbs,
                   config.tiles(m, n) * config.cluster_k)


def cluster_ctas(config: Sm90W4A16Config, k64: int) -> list:
    """A cluster variant's CTAs as `small_m_plans` describes them: all alike, an equal share of the tile's stages."""
    return [(-(-(k64 // config.k_sub) // config.cluster_k), (), 1)]


def small_m_plans(pool, m: int, n: int, k64: int, sm_count: int, clusters: dict[int, int] | None):
    """(candidate, its config or cluster variant, kind, CTAs, (grid, stream)) for each plan `small_m_costs` costs: kind
    "whole" / "stream" (each of the candidate's `plain_plans`) or "cluster" (`cluster_variants`); CTAs: the distinct
    (stages, parts of each segment it shares with other CTAs, segments) of its CTAs."""
    for c in pool:
        k_stages = k64 // c.k_sub
        if c.k_sub < 4:
            tiles = c.tiles(m, n)
            for grid, stream in plain_plans(c, m, n, k_stages, sm_count):
                ctas = {(sum(k for _, _, k, _, _ in segs), tuple(p for *_, p in segs if p > 1), len(segs))
                        for segs in (list(segments(b, grid, tiles, k_stages, stream)) for b in range(grid))}
                yield c, c, "stream" if stream else "whole", sorted(ctas), (grid, stream)
        # (the 128-row tiles' receive slots need a shallower ring: CLUSTER_MIN_RING)
        for v in cluster_variants(c, m, n, k_stages, sm_count, clusters or {}, shrink=c.block_m >= 128):
            yield c, v, "cluster", cluster_ctas(v, k64), (v.tiles(m, n) * v.cluster_k, False)


# The stream-K grids the time model weighs against whole tiles (`plain_plans`): tiles x s CTAs for s up to 16, and
# every SM (equal shares, which may straddle tiles), at least MIN_STAGES_PER_SPLIT stages a CTA. The stage-time choice
# before (FILL / FIXUP, `cta_cost`) took any s but aligned splits only for tiles over STRADDLE_MAX outputs (64 x 128
# at 11008 x 4096, M = 64: 2 parts, 23.9 us, against 16.0 in 4 unequal ones). On the probes of SMALL_M_MODEL and
# TALL_MODEL (M = 4-128, every plan timed) the picks with these grids run 0.995x (864 shapes at M <= 64) and 0.960x
# (408 at M = 80-128) the time of the picks before, where those were among the plans timed (NOTES W4A16 70).
MODEL_SPLITS = tuple(range(2, 17))


def plain_plans(config: Sm90W4A16Config, m: int, n: int, k_stages: int, sm_count: int) -> list[tuple[int, bool]]:
    """(grid, stream) of the plain plans the small-M time model costs for config: whole tiles (data-parallel over
    min(tiles, SMs) persistent CTAs), then stream-K over tiles x s CTAs (MODEL_SPLITS) and over every SM where that
    is more CTAs than tiles (or, past one round of tiles, every SM), each CTA MIN_STAGES_PER_SPLIT stages at least
    (the kernel's stream-K arithmetic is 32-bit: tiles x stages x grid < 2^32). Each is `schedule`'s plan for some
    `splits` (through the API, which takes 1..K/64, all but stream-K at K = 64 on 64-value stages)."""
    tiles = config.tiles(m, n)
    total = tiles * k_stages
    plans = [(min(tiles, sm_count), False)]
    for g in [tiles * s for s in MODEL_SPLITS] + [sm_count * tiles]:
        g = min(g, sm_count, total)
        if (g > tiles or tiles > g == sm_count) and g * MIN_STAGES_PER_SPLIT <= total and total * g < 1 << 32 \
                and (g, True) not in plans:
            plans.append((g, True))
    return plans


def model_plan(config: Sm90W4A16Config, m: int, n: int, k_stages: int, sm_count: int,
               dram_tbs: float) -> tuple[int, bool] | None:
    """The (grid, stream) of config's plain plan the small-M time model has fastest, where M's CONFIGS row costs config
    (SMALL_M_STAGE_US; 128- or 64-value stages); else None."""
    limit = next(limit for limit, _ in CONFIGS if m <= limit)
    stage_us = SMALL_M_STAGE_US.get(limit, {})
    if config not in stage_us or config.k_sub == 4:
        return None
    cost = small_m_costs([config], stage_us, m, n, k_stages * config.k_sub, sm_count, None, dram_tbs)
    return min(cost, key=cost.get)[1]


def plan_us(kind: str, ctas, stage_us: float, config: Sm90W4A16Config, weight_mb: float, dram_tbs: float,
            grid: int, model: dict | None = None) -> float:
    """A small-M plan of `grid` CTAs: its time (us) by the small-M time model (SMALL_M_MODEL's comment; `small_m_plans`
    for kind and CTAs) on a GPU of `dram_tbs` TB/s peak DRAM (0: unknown, taken as an H100's). `model`: other
    constants (scripts/w4a16_cost_fit.py), by SMALL_M_MODEL's names."""
    k = model or (TALL_MODEL if config.block_m >= 128 else SMALL_M_MODEL)
    kb = config.block_m * config.block_n * 4 / 1024  # the tile's fp32 sums
    fixup, part = (a + b * kb for a, b in (k["stream_fixup_us"], k["stream_part_us"]))
    tbs = dram_tbs if dram_tbs > 0 else 3.35
    # (fewer CTAs than take the DRAM, DRAM_CTAS_PER_TBS per TB/s, draw a share of it)
    dram = k["dram_us_per_mb"] * weight_mb * 3.35 / tbs * max(1.0, DRAM_CTAS_PER_TBS * tbs / grid)
    # (the stream runs at the busiest CTA's pace or the DRAM's; the fix-ups come after it)
    stream = max(stage_us * stages + k["tile_us"] * (segs - 1) for stages, _, segs in ctas)
    fixups = max(sum(fixup + part * (p - 1) for p in parts) for _, parts, _ in ctas)
    return k[kind] + max(stream, dram) + fixups + (config.cluster_k - 1) * kb * k["cluster_part_us_per_kb"]


@functools.lru_cache(maxsize=16)
def cluster_capacity(device_index: int) -> dict[int, int]:
    """Clusters of 2..8 CTAs of one CTA per SM each that fit on this GPU at once (a GPC holds whole clusters only, so
    a 132-SM H100 fits 30 of 4, not 33), asked of the driver with the smallest-M config's kernel; none (no cluster
    variants) where the driver cannot say."""
    cfg = CONFIGS[0][1][0]
    s = spec(torch.bfloat16, 128, False, cfg)
    handle = runtime.kernel(s, torch.device("cuda", device_index))
    try:
        return {p: tma.max_active_clusters(handle, p, cfg.threads, s.smem_bytes, compiled=False) for p in range(2, 9)}
    except RuntimeError:
        return {}


def segments(b: int, grid: int, tiles: int, k_stages: int, stream: bool):
    """CTA b's work as the kernel's `Work` walks it: (tile, first K stage, K stages, part, parts) per segment.
    Data-parallel: whole tiles b, b + grid, ...; stream-K: the stage iterations [b T / grid, (b + 1) T / grid)
    of all T = tiles x k_stages, a tile's parts being the consecutive CTAs that share it."""
    total = tiles * k_stages
    owner = lambda x: ((x + 1) * grid - 1) // total  # noqa: E731 (the CTA whose range holds iteration x)
    x, end = (b * total // grid, (b + 1) * total // grid) if stream else (b * k_stages, total)
    while x < end:
        tile, kt0 = divmod(x, k_stages)
        k_tiles = min(k_stages - kt0, end - x)
        first = owner(tile * k_stages)
        yield (tile, kt0, k_tiles, b - first, owner(tile * k_stages + k_stages - 1) - first + 1) if stream \
            else (tile, kt0, k_tiles, 0, 1)
        x = x + k_tiles if stream else x + grid * k_stages


# The stage-time costing of the plans the time model does not cost (`schedule`'s last case: the configs the rounds
# rule picks outside SMALL_M_STAGE_US, e.g. the 256-column small-M tiles past N = 16896 or at G = 32 / 64, and the
# one-consumer 128 x 64 tile at M = 129..256; forced configs M's row does not cost; `mid_m_plan`): a CTA's
# pipeline fill and epilogue; one stream-K fix-up (publish or add up), in stage-times. FIXUP = 5 sent 8192 x 28672
# decode tiles with 128-value stages (112 tiles for 132 SMs) to whole tiles, which measured 2-4% faster than equal
# stream-K shares in the same run (benchmarks/results/w4a16_tune_whole_vs_streamk_h200.json).
FILL, FIXUP = 3, 5
# Tiles up to this many outputs (M <= 16 decode) may take equal stream-K shares that straddle tiles; larger ones
# measured 5-50% slower that way than with whole tiles or aligned K splits (benchmarks/results/
# w4a16_schedule_h200.json), so they split K only into equal aligned pieces.
STRADDLE_MAX = 16 * 256
# A CTA of the 8- and 16-row 128-column two-consumer tiles streams ~26 GB/s of weight (H100; 0.31 us per 8 KB stage at
# any tile count up to 112: whole tiles take 12.6 / 22.6 / 37.5 us at K = 4096 / 8192 / 14336 from 72 to 112 tiles;
# benchmarks/results/w4a16_small_m_whole_vs_stream_probe_h100.json), so ~107 of them take what the H100's DRAM gives
# (3.35 TB/s peak): 32 CTAs per TB/s. The decode kernel's `wide` rule uses it, and the small-M time model: a plan of
# fewer CTAs streams its weight at that share of the DRAM's rate (a scan of the count in the model's fit found this
# one best: picks 1.0020x the fastest plan, against 1.0024x without; 11008 x 4096 at M = 32 no longer in clusters of
# 3, 96 CTAs, 13.8 us, where 4 stream-K shares, 128 CTAs, take 12.6; NOTES W4A16 70).
DRAM_CTAS_PER_TBS = 32


def cta_cost(b: int, grid: int, tiles: int, k_stages: int, stream: bool, fixup: float = FIXUP) -> float:
    """CTA b's time in stage-times: its stages, the fill, and a fix-up (`fixup` stage-times) per segment that shares
    its tile."""
    segs = list(segments(b, grid, tiles, k_stages, stream))
    return FILL + sum(k for _, _, k, _, _ in segs) + sum(fixup for *_, parts in segs if parts > 1)


def mid_m_plan(config: Sm90W4A16Config, m: int, n: int, k_stages: int, sm_count: int) -> tuple[float, int, bool]:
    """(estimated cost, grid, stream) of the cheaper of whole tiles and stream-K over min(2 x tiles, SMs) CTAs for a
    mid-M problem (MID_M's comments; no stream-K past MID_M_STREAM_MAX rows for a weight of WEIGHT_ONCE_BYTES or more):
    stage-times of the busiest CTA (fill, stages, a fix-up per shared segment) x a stage's cost for the tile height."""
    tiles, stage = config.tiles(m, n), MID_M_STAGE[0] + MID_M_STAGE[1] * config.block_m
    best = (stage * (FILL + -(-tiles // sm_count) * k_stages), min(tiles, sm_count), False)
    grid, fixup = min(2 * tiles, sm_count, tiles * k_stages), MID_M_FIXUP * config.block_m / 128
    streams = m <= MID_M_STREAM_MAX or not large_weight(n, k_stages * config.k_sub)
    if streams and (grid > tiles or tiles > sm_count) and tiles * k_stages * grid < 1 << 32:
        busiest = max(cta_cost(b, grid, tiles, k_stages, True, fixup) for b in range(grid))
        best = min(best, (stage * busiest, grid, True))
    return best


def schedule(config: Sm90W4A16Config, m: int, n: int, k_stages: int, sm_count: int,
             splits: int | None = None, dram_tbs: float = 3.35) -> tuple[int, bool]:
    """(grid, stream). Where M's CONFIGS row costs config (SMALL_M_STAGE_US): the plain plan the small-M time model has
    fastest on a GPU of `dram_tbs` TB/s (`model_plan`, as `choose` costed it). M in the MID_M ranges on two-consumer
    tiles of 128 rows or more: `mid_m_plan`. Otherwise, enough tiles for the SMs: data-parallel persistent CTAs over
    whole tiles; fewer: of the stream-K grids, the one with the least CTA cost (`cta_cost`), if it beats whole tiles:
    tiles x s CTAs with s dividing the stages (split-K: each CTA one aligned piece of one tile) and, for small tiles,
    any tiles x s and one CTA per SM (equal shares; most CTAs then have two pieces to fix up). `splits` overrides: 1
    whole tiles, s > 1 stream-K over tiles x s CTAs (at most one per SM and per stage)."""
    tiles = config.tiles(m, n)
    total = tiles * k_stages
    whole = (min(tiles, sm_count), False)  # data-parallel over whole tiles
    if splits is None and (plan := model_plan(config, m, n, k_stages, sm_count, dram_tbs)) is not None:
        return plan
    if splits is None and mid_m(m) and config.block_m >= 128 and config.consumers > 1:
        return mid_m_plan(config, m, n, k_stages, sm_count)[1:]
    if splits is None:
        straddle = config.block_m * config.block_n <= STRADDLE_MAX
        grids = [tiles * s for s in range(2, k_stages // MIN_STAGES_PER_SPLIT + 1)
                 if tiles * s <= sm_count and (straddle or k_stages % s == 0)]
        if straddle and tiles < sm_count:
            grids.append(min(sm_count, total // MIN_STAGES_PER_SPLIT))
        best = (-(-tiles // sm_count) * (k_stages + FILL), *whole)
        for g in grids:
            if g > tiles:
                cost = max(cta_cost(b, g, tiles, k_stages, True) for b in range(g))
                best = min(best, (cost, g, True))
        return best[1], best[2]
    grid = min(tiles * splits, sm_count, total)
    if splits == 1 or total * grid >= 1 << 32:  # the kernel's stream-K arithmetic is 32-bit
        return whole
    return grid, True


# The cluster variants `choose` can pick (of the SMALL_M_STAGE_US configs, the CLUSTER_SIZES whose receive slots fit),
# and the two kernel variants each is compile-checked in (the cluster code is the epilogue's; the main loop of every
# variant is the plain config's): bf16 with zero points (the most shared memory), fp16 per-channel.
CLUSTER_CONFIGS = tuple(dict.fromkeys(
    v for c in dict.fromkeys(c for row in SMALL_M_STAGE_US.values() for c in row) for p in CLUSTER_SIZES
    if (v := _fitted_ring(replace(c, cluster_k=p), c.block_m >= 128))))  # (shrink: as `small_m_plans`)
CLUSTER_VARIANTS = ((torch.bfloat16, 128, True), (torch.float16, 0, False))


def compile_matrix(all_configs: bool = False):
    """((dtype, kernel group size, has_zeros), config) for every kernel the API can build: every config (and the
    cluster variants in CLUSTER_VARIANTS), or the decode and the largest one."""
    configs = list(dict.fromkeys(c for _, cs in CONFIGS for c in cs)) if all_configs \
        else [CONFIGS[0][1][0], CONFIGS[-1][1][0]]
    return [((dtype, group, zeros), cfg) for dtype in ACT_KIND for group in (32, 64, 128, 0)
            for zeros in (False, True) for cfg in configs if cfg.problem(group, cfg.k_sub) is None] + \
        ([(v, cfg) for cfg in CLUSTER_CONFIGS for v in CLUSTER_VARIANTS] if all_configs else [])


def spec(dtype: torch.dtype, group_size: int, has_zeros: bool, config: Sm90W4A16Config) -> KernelSpec:
    """group_size 0: one group spans K (per-channel scales). `prefetch` is a launch argument: one build serves
    every value."""
    config = replace(config, prefetch=0)
    params = {"variant_name": variant_name("wgmma", dtype, group_size, has_zeros),
              "config_name": config.name, "c": config, "act_kind": ACT_KIND[dtype],
              "instr": INSTR[dtype].format(n=config.block_m), "regs": config.block_m // 2,
              "has_zeros": int(has_zeros), "group_size": group_size, "fold": config.fold(group_size)}
    return KernelSpec.make(STEM, STEM, params, Arch(90, "a"), config.smem_bytes(group_size, has_zeros))


@dataclass(frozen=True)
class Plan:
    config: Sm90W4A16Config
    grid: int
    stream: bool
    max_parts: int   # the most CTAs that share a tile (stream-K workspace slots per tile)
    tiles: int
    smem_bytes: int
    main: object

    @classmethod
    def make(cls, dtype: torch.dtype, group_size: int, has_zeros: bool, m: int, n: int, k_stages: int,
             config: Sm90W4A16Config, splits: int | None, arch: Arch, device) -> "Plan":
        """As sm80_w4a16.Plan.make (arch: sm_90, checked by the caller); splits: see `schedule`."""
        s = spec(dtype, group_size, has_zeros, config)
        main = runtime.kernel(s, device)
        sm_count = torch.cuda.get_device_properties(device).multi_processor_count
        k_stages //= config.k_sub  # the kernel's stages (K_SUB slices of 64 values each)
        tiles = config.tiles(m, n)
        if config.cluster_k > 1:  # one tile per cluster, its K in cluster_k shares summed on chip: no workspace
            if splits not in (None, config.cluster_k):
                raise LayoutError(f"splits: {config.name} splits K {config.cluster_k} ways inside a cluster; pass "
                                  f"splits=None or {config.cluster_k}")
            return cls(config, tiles * config.cluster_k, False, 1, tiles, s.smem_bytes, main)
        dram_tbs = runtime.dram_bandwidth(device.index) / 1e12
        grid, stream = schedule(config, m, n, k_stages, sm_count, splits, dram_tbs)
        parts = max(p for b in range(grid) for *_, p in segments(b, grid, tiles, k_stages, stream))
        return cls(config, grid, stream, parts, tiles, s.smem_bytes, main)

    def workspace(self, a: torch.Tensor) -> tuple | None:
        """One call's stream-K / split workspace and the stream's tile tickets (None for whole tiles)."""
        if self.max_parts == 1:
            return None
        cfg = self.config
        return (torch.empty(self.tiles * self.max_parts * cfg.block_m * cfg.block_n, dtype=torch.float32,
                            device=a.device), tickets(a.device, self.tiles * cfg.consumers))

    def launch(self, a: torch.Tensor, w: W4A16Weight, c: torch.Tensor, bias: torch.Tensor | None, workspace=None,
               record=None) -> None:
        """a: [M, K] with 16-byte aligned rows and start, c: [M, N] contiguous and 16-byte aligned, bias: [N]
        contiguous or None. workspace: `workspace(a)` (else allocated here); record: see runtime.launch."""
        cfg, m = self.config, a.shape[0]
        strips, groups = w.packed.shape[1], w.scales.shape[1]
        gps = cfg.groups_per_stage(kernel_group_size(w))
        map_a, map_at = tma.rows_maps(a.data_ptr(), m, w.k * 2, a.stride(0) * 2, cfg.block_m, "a")
        map_s = tma.rows_map(w.scales.data_ptr(), strips, groups * 32, groups * 32, cfg.block_n // 16, "scales",
                             box_bytes=32 * gps, swizzle=0)
        map_z = map_s if w.zeros is None else tma.rows_map(
            w.zeros.data_ptr(), strips, groups * 32, groups * 32, cfg.block_n // 16, "zeros", box_bytes=32 * gps,
            swizzle=0)
        map_c = tma.rows_map(c.data_ptr(), m, w.n * 2, w.n * 2, cfg.chunk_rows, "out")
        ws, tk = workspace or self.workspace(a) or (c, c)  # (c, c): unused
        runtime.launch(self.main, (self.grid, 1, 1), (cfg.threads, 1, 1),
                       [map_a, map_at, map_s, map_z, map_c, w.packed, bias if bias is not None else c, ws, tk, m, w.n,
                        w.packed.shape[0] // cfg.k_sub, strips, int(self.stream), self.max_parts, zero_bits(w),
                        int(bias is not None), cfg.prefetch or cfg.stages],
                       self.smem_bytes, KINDS, dependent=True, record=record)
