"""The w4a16_decode kernel family: W4A16 for decode-sized M (<= 8 by default, <= 16 with a pinned 16-row config)
on sm_80+, the int4 weight streamed from DRAM through per-warp cp.async rings and multiplied with mma.sync
(cuda_src/w4a16_decode.cu). Configs are data; `choose` picks a config and the K splits; `Plan` launches."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from . import runtime
from .arch import Arch
from .runtime import KernelSpec
from .sm80_w4a16 import ACT_KIND, INSTR, variant_name
from .sm90_config import FAST_DRAM_TBS
from . import sm90_w4a16
from .sm90_w4a16 import DRAM_CTAS_PER_TBS
from .split_k import tickets
from .w4a16_formats import W4A16Weight, zero_bits

STEM = "w4a16_decode"
# A, W, scales, zeros, bias, C, workspace, tickets; then M, N, K, lda, k_stages, strips, groups, split_stages,
# z_bits, has_bias.
KINDS = (runtime.TENSOR,) * 8 + (runtime.INT,) * 10
MAX_M = 8  # the largest M the heuristic sends here (M <= 16 runs with a pinned config; sm_90: WGMMA_MAX_M)


@dataclass(frozen=True)
class DecodeConfig:
    mrows: int    # activation rows the mma's n side covers: 8 (M <= 8) or 16 (M <= 16)
    strips: int   # 16-column strips of W per CTA (one per warp along N)
    warps_k: int  # warps per strip, each a share of the CTA's K range
    depth: int    # ring slots per warp (shared memory): depth - 1 stages of 64 K values in flight
    ahead: int = 0  # stages past the ring that each warp prefetches into L2 (0: none)

    @property
    def name(self) -> str:
        ahead = f"_a{self.ahead}" if self.ahead else ""
        return f"w4a16dec_m{self.mrows}_s{self.strips}x{self.warps_k}_d{self.depth}{ahead}"

    @classmethod
    def parse(cls, name: str) -> "DecodeConfig":
        m = re.fullmatch(r"w4a16dec_m(8|16)_s(\d+)x(\d+)_d(\d+)(?:_a(\d+))?", name.strip())
        if not m:
            raise ValueError(f"config: cannot parse {name!r}; expected e.g. w4a16dec_m8_s2x8_d4")
        mrows, strips, warps_k, depth, ahead = m.groups()
        return cls(int(mrows), int(strips), int(warps_k), int(depth), int(ahead or 0))

    @property
    def threads(self) -> int:
        return 32 * self.strips * self.warps_k

    def problem(self, group_size: int, k64: int = 0) -> str | None:
        """Why this config cannot be built for kernel group size `group_size` (0: per-channel), or None (the
        kernel's static_asserts, checked before NVRTC sees them)."""
        spg = max(1, group_size // 64)  # 64-value stages per group: the ring holds whole groups
        if self.strips < 1 or self.warps_k < 1 or self.threads > 1024:
            return f"{self.name}: strips x warps along K must be 1..32 warps"
        if self.depth < 2 or self.depth % spg:
            return f"{self.name}: the ring needs at least 2 slots, a multiple of {spg} for group size {group_size}"
        return None

    def smem_bytes(self, m: int, split_stages: int, group_size: int = 128, has_zeros: bool = False) -> int:
        """The CTA's activations (m rows of its K range, rows padded by 16 bytes), then each warp's ring: depth
        slots of 512 bytes of weight and the stage's 32-byte scale (and zero-point) rows; the warps' partial
        sums reuse it at the end."""
        slot = 512 + ((2 if group_size == 32 else 1) * 32 * (2 if has_zeros else 1) if group_size else 0)
        a = -(-m * (split_stages * 64 + 8) * 2 // 16) * 16
        return max(a + self.threads // 32 * self.depth * slot, self.warps_k * self.mrows * 16 * self.strips * 4)


C = DecodeConfig
# Candidates per M class (data, not branches), in order of preference. Measured on an H200 against the wgmma
# kernel (benchmarks/results/w4a16_tune_decode_h200.json): the stream of 2-strip CTAs (8 warps along K each)
# wins while the weight has at most MAX_N columns (4096 x 4096: 5.7 vs 7.6 us; 14336 x 4096: 12.5 vs 13.3);
# past that, the wgmma kernel's persistent stream-K wins (4096 x 14336: 14.2 vs 13.5; 8192 x 28672: 39.5 vs
# 36.5) and takes over. 8-strip CTAs (2 warps along K) cover N with a quarter of the CTAs, so K splits fill
# the GPU and each CTA copies a quarter of the activations: `choose` takes them where the 2-strip grid needs
# two rounds of the SMs, or its CTAs copy more activations, past ACT_BYTES (H100,
# benchmarks/results/w4a16_decode_configs_h100.json: 1 x 8192 x 8192 15.3 us against 17.4, 8 x 14336 x 4096
# 17.3 against 25.6, 1 x 14336 x 4096 13.5 against 14.1; the 2-strip CTAs stay at 1 x 4096 x 4096, 6.0 against
# 6.3, and short K, 8 x 1024 x 4096, 3.9 against 4.7). For M = 1 a CTA of 7 strips covers N = 14336 (Llama-3-8B's
# MLP) in 128 CTAs: one round of the SMs. Where a single activation row's grid takes one round, the decode
# kernel beats the wgmma kernel past MAX_N too (`wide`; H100, benchmarks/results/w4a16_decode_wide_n_h100.json:
# 1 x 4096 x 14336 13.8 against 14.4 us, 1 x 8192 x 14336 24.3 / 25.4, 1 x 4096 x 16384 14.6 / 15.4); with 4 or 8
# rows, or two rounds, it does not (4 x 4096 x 14336 15.8 / 14.5, 1 x 4096 x 12288 15.6 / 14.0). Its ring is
# 4 deep: 6 measured 1.5-3% faster but spills on sm_80 (bf16, G = 32: 14 warps cap a thread at 128 registers);
# instead each warp prefetches the weight 2 stages past its ring into L2 (1 x 4096 x 14336 13.8 -> 13.4 us, 1 x 8192
# x 14336 24.2 -> 23.7; the same prefetch slows the 2- and 8-strip CTAs by 1-3%: benchmarks/results/
# w4a16_decode_l2_ahead_h100.json). Since then the wgmma kernel's whole 8 x 128 tiles stream faster where enough of
# them take the DRAM (sm90_w4a16.DRAM_CTAS_PER_TBS: ~107 CTAs on the H100), so `wide` stops there (H100, 1 x K x N
# for K = 2048-28672, benchmarks/results/w4a16_m1_wide_probe_h100.json, w4a16_dram_floor_{,grid_}ab_h100.json: at
# N = 14336 / 16384 (112 / 128 tiles) the tiles win by 0-6%, 1 x 4096 x 14336 12.8 against 13.1-13.5 us, 1 x 14336 x
# 14336 37.9 / 39.5; at N = 13824 (108) by -1 to 4%; at N = 13312 (104) the 7-strip CTAs keep a 1-8% lead, 1 x 28672
# x 13312 71.3 against 76.8). Rows: (largest M, candidates in order of preference, wide).
CONFIGS = (
    (1, (C(8, 2, 8, 4), C(8, 8, 2, 4), C(8, 7, 2, 4, ahead=2)), True),
    (8, (C(8, 2, 8, 4), C(8, 8, 2, 4)), False),
)
HEURISTIC_CONFIGS = tuple(dict.fromkeys(c for _, cs, _ in CONFIGS for c in cs))  # every config choose can pick
ACT_BYTES = 16384  # activation bytes per CTA below which the copy's size does not decide
MAX_N = 8192
# On a GPU with the wgmma kernel, the most rows the decode kernel takes, by the GPU's peak DRAM bandwidth (TB/s, at
# least) and weight size (K x N values, up to). The decode kernel streams faster with more bandwidth, the wgmma
# kernel's 8 x 128 tile at these sizes hardly does (14336 x 4096 M = 2: 13.8 us on an H100, 13.65 on an H200), so the
# crossover moves with it. H100 (3.35 TB/s): the wgmma tile wins from 2 rows past 8 MB of int4 (14336 x 4096 M = 2 13.8
# against 15.1 us; 8192 x 8192 M = 4 15.3 / 18.1), from 4 rows at 4096 x 4096 (M = 8 7.0 / 7.8), from 5 at 4096 x 2048
# (M = 4 5.6 / 5.2, M = 8 5.6 / 5.85), nowhere on 2 MB (4096 x 1024 M = 8 5.0 / 4.5). H200 (4.8 TB/s): the decode kernel
# keeps up to 3 rows on the large weights too (14336 x 4096 M = 3 12.4 against 13.65, 8192 x 8192 13.9 / 15.05; M = 4
# 13.5 / 13.65 and 15.5 / 15.0), 4 at 4096 x 4096 (6.7 / 7.0), 6 at 4096 x 2048 (5.4 / 5.6).
# benchmarks/results/w4a16_decode_vs_wgmma_h100.json (and its h200 entries).
WGMMA_MAX_M = ((FAST_DRAM_TBS, ((1 << 22, 8), (1 << 23, 6), (1 << 24, 4), (1 << 62, 3))),
               (0.0, ((1 << 22, 8), (1 << 23, 4), (1 << 24, 3), (1 << 62, 1))))
# Where the wgmma kernel's pick splits K inside clusters (sm90_w4a16.cluster_variants: the sums added on chip), it beats
# this kernel from one row on weights of CLUSTER_MIN_VALUES K x N values or more, on GPUs under FAST_DRAM_TBS (the H100;
# not measured on an H200, whose DRAM favours this kernel: WGMMA_MAX_M): H100, us, this kernel -> the cluster plan, 1 x
# 4096 x 4096 5.99 -> 5.78, 1 x 8192 x 8192 15.3 -> 13.4, 1 x 2048 x 8192 6.39 -> 5.16, 1 x 4096 x 1024 3.77 -> 3.39, 4 x
# 2048 x 4096 5.11 -> 4.13, 3 x 2048 x 2048 3.84 -> 3.35; ties at 1 x 8192 x 4096 (9.18 / 9.24) and 8192 x 2048 (M = 1
# 6.08 / 6.20, M = 2 6.57 / 6.20); where the pick is no cluster plan this kernel stays (1 x 14336 x 4096 13.39 against
# 13.83). benchmarks/results/w4a16_decode_vs_clusters_h100.json (48 rows of M = 1..8). Since the small-M time model
# (NOTES W4A16 68) made cluster picks of shapes where this kernel is faster, only where the model's time for the
# cluster plan (sm90_w4a16.small_m_time) is below DECODE_US: us, and us per MB of int4 weight at 3.35 TB/s (scaled by
# the GPU's peak), a line fitted to pick the faster kernel over every M = 1..8 shape of a K x N grid where the choice
# arises (benchmarks/results/w4a16_decode_vs_cluster_grid_h100.json, 151 rows, both forced: 1.0013x the faster's
# time; always ceding 1.004x, with 1 x 14336 x 1024 in sixes 6.40 against 5.69 us, 1 x 11008 x 512 and 14336 x 512
# in eights 4.46 / 5.07 against 4.08 / 4.62). With the model of NOTES W4A16 70 the same line is among the best (144
# rows whose pick is the one timed, and 1 x 11008 x 4096, whose pick became a cluster plan: 1.0021x the faster's time,
# any line from (2.9, 0.44) to (3.3, 0.38); that row, 12.31 us in threes against 11.05, no line in that band keeps).
CLUSTER_MIN_VALUES, DECODE_US = 1 << 22, (3.2, 0.40)


def cedes_to_clusters(pick, m: int, n: int, k64: int, dram_tbs: float) -> bool:
    """Whether, unpinned on sm_90, this kernel leaves M rows of a K x N weight (`k64` 64-value slices of K) to the
    wgmma kernel's pick `pick` (None: none) on a GPU of `dram_tbs` TB/s peak DRAM bandwidth: a pick that splits K
    in clusters, M within MAX_M (the rows this kernel takes; the small-M time model covers them), CLUSTER_MIN_VALUES,
    FAST_DRAM_TBS, and the model's time for the pick (`sm90_w4a16.small_m_time`) under DECODE_US's line."""
    values = 64 * k64 * n
    if pick is None or pick.cluster_k == 1 or m > MAX_M or values < CLUSTER_MIN_VALUES or \
            not 0 < dram_tbs < FAST_DRAM_TBS:
        return False
    return sm90_w4a16.small_m_time(pick, m, n, k64, dram_tbs) < \
        DECODE_US[0] + DECODE_US[1] * values / 2e6 * 3.35 / dram_tbs


STATIC_SMEM = 1024  # kept free of the dynamic allocation: the kernel's static __shared__ variables
MIN_FILL = 0.9  # the fewest K splits whose CTAs cover this share of the SMs


def wgmma_max_m(values: int, dram_tbs: float) -> int:
    """WGMMA_MAX_M's row count for a weight of `values` K x N values on a GPU of `dram_tbs` TB/s."""
    table = next(t for tbs, t in WGMMA_MAX_M if dram_tbs >= tbs)
    return next(rows for limit, rows in table if values <= limit)


def smem_limit(arch: Arch) -> int:
    """Dynamic shared memory a CTA may take on this arch (its opt-in limit per block less STATIC_SMEM)."""
    return arch.smem_per_block() - STATIC_SMEM


def split_stages(k_stages: int, splits: int, group_size: int) -> int:
    """64-value stages per K split: whole groups (the kernel's warps take whole groups)."""
    per, spg = -(-k_stages // splits), max(1, group_size // 64)
    return -(-per // spg) * spg


def fits(config: DecodeConfig, m: int, per_split: int, group_size: int, has_zeros: bool, smem_limit: int) -> bool:
    """M rows within the config's, and the CTA's shared memory within the GPU's opt-in limit per block."""
    return m <= config.mrows and config.threads <= 1024 and \
        config.smem_bytes(m, per_split, group_size, has_zeros) <= smem_limit


def choose(m: int, n: int, k_stages: int, sm_count: int, group_size: int, has_zeros: bool, smem_limit: int,
           splits: int | None = None, config: DecodeConfig | None = None, wgmma: bool = True,
           dram_tbs: float = 3.35):
    """(config, splits) for M <= 16, or None when no config's activations fit in shared memory (or, unpinned,
    when the GPU has the `wgmma` kernel and either N > MAX_N, unless the M class is `wide`, the grid takes one
    round of the SMs and the wgmma kernel's 128-column tiles are too few to take the DRAM (DRAM_CTAS_PER_TBS x
    `dram_tbs`), or M is past `wgmma_max_m` for the weight and the GPU's DRAM bandwidth: there the wgmma kernel is
    faster).
    `config` / `splits` pin either.
    Per config the fewest splits that give MIN_FILL of the SMs a CTA and let the activations fit; then the
    config whose grid takes the fewest rounds of the SMs, then the one whose CTAs copy the fewest activation
    bytes (up to ACT_BYTES counting as equal), then one without K splits, then (both split) the one whose CTAs
    copy fewer activation bytes, then the earlier."""
    configs, wide = ([config], True) if config else next(((cs, w) for limit, cs, w in CONFIGS if m <= limit),
                                                         ((), False))
    if not config:
        wide = wide and -(-n // 128) < DRAM_CTAS_PER_TBS * dram_tbs
    if wgmma and ((n > MAX_N and not wide) or
                  (not config and m > wgmma_max_m(n * k_stages * 64, dram_tbs))):
        return None
    strips, best = -(-n // 16), None
    for cfg in configs:
        blocks = -(-strips // cfg.strips)
        for s in [splits] if splits else range(1, k_stages + 1):
            per = split_stages(k_stages, s, group_size)
            s = -(-k_stages // per)
            if fits(cfg, m, per, group_size, has_zeros, smem_limit) and (splits or blocks * s >= MIN_FILL * sm_count or
                                                                        per <= max(1, group_size // 64)):
                act_bytes = m * per * 64 * 2  # M rows of the CTA's K range, 2 bytes a value
                key = (-(-blocks * s // sm_count), max(act_bytes, ACT_BYTES), act_bytes if s > 1 else 0)
                if best is None or key < best[0]:
                    best = (key, cfg, s)
                break
    if best is None or (wgmma and n > MAX_N and not config and best[0][0] > 1):
        return None
    return best[1:]


def compile_matrix(all_configs: bool = False):
    """((dtype, kernel group size, has_zeros), config) for every kernel the API can build."""
    configs = HEURISTIC_CONFIGS if all_configs else tuple(dict.fromkeys((CONFIGS[0][1][0], CONFIGS[-1][1][-1])))
    return [((dtype, group, zeros), cfg) for dtype in ACT_KIND for group in (32, 64, 128, 0)
            for zeros in (False, True) for cfg in configs]


def spec(dtype: torch.dtype, group_size: int, has_zeros: bool, config: DecodeConfig, arch: Arch) -> KernelSpec:
    """group_size 0: one group spans K (per-channel scales). Shared memory depends on M and the K split: the
    kernel may take up to the arch's opt-in limit per block."""
    params = {"variant_name": variant_name("decode", dtype, group_size, has_zeros),
              "config_name": config.name, "c": config, "act_kind": ACT_KIND[dtype], "instr": INSTR[dtype],
              "has_zeros": int(has_zeros), "group_size": group_size}
    return KernelSpec.make(STEM, STEM, params, Arch(arch.cc), smem_limit(arch))


@dataclass(frozen=True)
class Plan:
    config: DecodeConfig
    splits: int
    split_stages: int
    blocks: int      # CTAs along N
    smem_bytes: int
    dependent: bool  # programmatic dependent launch (sm_90)
    main: object

    @classmethod
    def make(cls, dtype: torch.dtype, group_size: int, has_zeros: bool, m: int, n: int, k_stages: int,
             config: DecodeConfig, splits: int, arch: Arch, device) -> "Plan":
        """config / splits: from `choose` (or the caller's, checked with `fits`)."""
        main = runtime.kernel(spec(dtype, group_size, has_zeros, config, arch), device)
        per, strips = split_stages(k_stages, splits, group_size), -(-n // 16)
        return cls(config, -(-k_stages // per), per, -(-strips // config.strips),
                   config.smem_bytes(m, per, group_size, has_zeros), arch.cc >= 90, main)

    def workspace(self, a: torch.Tensor) -> tuple | None:
        """One call's K-split workspace and the stream's tickets (None without K splits)."""
        if self.splits == 1:
            return None
        return (torch.empty(self.blocks * self.splits * a.shape[0] * 16 * self.config.strips, dtype=torch.float32,
                            device=a.device), tickets(a.device, self.blocks))

    def launch(self, a: torch.Tensor, w: W4A16Weight, c: torch.Tensor, bias: torch.Tensor | None, workspace=None,
               record=None) -> None:
        """a: [M, K] with 16-byte aligned rows, c: [M, N] contiguous, bias: [N] contiguous or None.
        workspace: `workspace(a)` (else allocated here); record: see runtime.launch."""
        cfg, m = self.config, a.shape[0]
        ws, tk = workspace or self.workspace(a) or (c, c)  # (c, c): unused
        runtime.launch(self.main, (self.blocks, self.splits, 1), (cfg.threads, 1, 1),
                       [a, w.packed, w.scales, w.zeros if w.zeros is not None else w.scales,
                        bias if bias is not None else c, c, ws, tk, m, w.n, w.k, a.stride(0), w.packed.shape[0],
                        w.packed.shape[1], w.groups, self.split_stages, zero_bits(w), int(bias is not None)],
                       self.smem_bytes, KINDS, dependent=self.dependent, record=record)
