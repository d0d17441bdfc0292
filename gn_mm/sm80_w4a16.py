"""The sm80_w4a16 kernel family: fp16/bf16 activations x int4 weights with mma.sync, the weight dequantised in
registers (cuda_src/sm80_w4a16.cu). Configs are data; `choose` is the heuristic; `Plan` launches."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from . import runtime
from .arch import Arch
from .runtime import KernelSpec
from .split_k import tickets
from .w4a16_formats import W4A16Weight, zero_bits

STEM = "sm80_w4a16"
# A, W, S, Z, bias, C, workspace, tickets; then M, N, K, lda, k_stages, groups, z_bits, has_bias.
KINDS = (runtime.TENSOR,) * 8 + (runtime.INT,) * 8
ACT_KIND = {torch.float16: 0, torch.bfloat16: 1}
INSTR = {torch.float16: "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
         torch.bfloat16: "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"}
MIN_CC = 80


@dataclass(frozen=True)
class W4A16Config:
    """One tile configuration of the sm80_w4a16 kernel: a block_m x block_n output tile per CTA, warp_m x warp_n
    warps, `stages` pipeline stages and min_blocks CTAs per SM for __launch_bounds__. `name` / `parse` give its
    string form."""
    block_m: int
    block_n: int
    warp_m: int  # warps along M
    warp_n: int  # warps along N
    stages: int
    min_blocks: int = 1  # __launch_bounds__ CTAs per SM: caps registers so more warps hide DRAM latency

    @property
    def name(self) -> str:
        """The config's name, e.g. w4a16_16x256_w1x8_s4 (what `parse` reads back; `config=` accepts it)."""
        occ = f"_o{self.min_blocks}" if self.min_blocks > 1 else ""
        return f"w4a16_{self.block_m}x{self.block_n}_w{self.warp_m}x{self.warp_n}_s{self.stages}{occ}"

    @classmethod
    def parse(cls, name: str) -> "W4A16Config":
        """The config a name from `name` stands for; ValueError naming the expected form otherwise."""
        m = re.fullmatch(r"w4a16_(\d+)x(\d+)_w(\d+)x(\d+)_s(\d+)(?:_o(\d+))?", name.strip())
        if not m:
            raise ValueError(f"config: cannot parse {name!r}; expected e.g. w4a16_16x256_w1x8_s4_o3")
        return cls(*(int(x) for x in m.groups() if x is not None))

    @property
    def threads(self) -> int:
        """Threads per CTA: 32 per warp of the warp grid."""
        return self.warp_m * self.warp_n * 32

    def problem(self, group_size: int, k64: int) -> str | None:
        """Why this config cannot be built (the kernel's static_asserts, checked before NVRTC sees them), or None."""
        if not 1 <= self.warp_m * self.warp_n <= 32 or self.block_m % (16 * self.warp_m) \
                or self.block_n % (16 * self.warp_n):
            return f"{self.name}: 1 to 32 warps, each with a warp tile a multiple of 16 x 16"
        if self.stages < 2:
            return f"{self.name}: at least 2 stages"
        return None

    def smem_bytes(self, group_size: int = 128, has_zeros: bool = False) -> int:
        """Per stage: A block_m rows x 128 bytes, W block_n / 16 strips x 512 bytes, and 32 bytes of scales
        (and of zero points) per strip and group of the stage (two groups when G = 32)."""
        groups = 2 if group_size == 32 else 1
        return self.stages * (self.block_m * 128 + self.block_n * 32 + (self.block_n // 16) * groups * 32
                              * (2 if has_zeros else 1))


C = W4A16Config
# By the largest M each serves (data, not branches): decode streams the weight with a 16-row A tile and many
# CTAs (split-K); larger M amortises each dequantised weight fragment over more MMAs.
CONFIGS = (
    (16, C(16, 256, 1, 8, 4)),
    (32, C(32, 128, 2, 4, 6)),
    (1 << 31, C(64, 128, 2, 4, 4)),
)
MIN_STAGES_PER_SPLIT = 2  # 128 K values
FIXED_STAGES = 3          # a split's prologue (pipeline fill) and split-K fix-up, in stage-times


def choose(m: int) -> W4A16Config:
    """The config for M's class."""
    return next(c for limit, c in CONFIGS if m <= limit)


def splits_for(config: W4A16Config, m: int, n: int, k_stages: int, sm_count: int, resident: int) -> int:
    """K splits for `resident` CTAs per SM (from the driver): the fewest waves x (stages per split + the
    prologue and fix-up, ~FIXED_STAGES), so a split never leaves a nearly empty last wave."""
    tiles = -(-m // config.block_m) * -(-n // config.block_n)
    slots = sm_count * resident

    def cost(s: int) -> tuple:
        return -(-tiles * s // slots) * (-(-k_stages // s) + FIXED_STAGES), s

    return nonempty_splits(min(range(1, max(1, k_stages // MIN_STAGES_PER_SPLIT) + 1), key=cost), k_stages)


def nonempty_splits(splits: int, k_stages: int) -> int:
    """The number of splits that actually get K stages when each takes ceil(k_stages / splits)."""
    per = -(-k_stages // splits)
    return -(-k_stages // per)


def compile_matrix(all_configs: bool = False):
    """((dtype, kernel group size, has_zeros), config) for every kernel the API can build: every config, or the
    decode and the largest one."""
    configs = [c for _, c in CONFIGS] if all_configs else [CONFIGS[0][1], CONFIGS[-1][1]]
    return [((dtype, group, zeros), cfg) for dtype in ACT_KIND for group in (32, 64, 128, 0)
            for zeros in (False, True) for cfg in configs]


def variant_name(kernel: str, dtype: torch.dtype, group_size: int, has_zeros: bool) -> str:
    """The label of one W4A16 kernel build (rendered header, compile listings), e.g. "w4a16 decode bfloat16 g128"."""
    return f"w4a16{' ' + kernel if kernel else ''} {str(dtype)[6:]} g{group_size or 'K'}{' zeros' if has_zeros else ''}"


def spec(dtype: torch.dtype, group_size: int, has_zeros: bool, config: W4A16Config, arch: Arch) -> KernelSpec:
    """group_size 0: one group spans K (per-channel scales)."""
    params = {"variant_name": variant_name("", dtype, group_size, has_zeros),
              "config_name": config.name, "c": config, "act_kind": ACT_KIND[dtype], "instr": INSTR[dtype],
              "has_zeros": int(has_zeros), "group_size": group_size}
    return KernelSpec.make(STEM, STEM, params, Arch(arch.cc), config.smem_bytes(group_size, has_zeros))


def kernel_group_size(w: W4A16Weight) -> int:
    """What the kernel is specialised for: the group size, or 0 when one group spans K."""
    return 0 if w.groups == 1 else w.group_size


@dataclass(frozen=True)
class Plan:
    config: W4A16Config
    splits: int
    tiles: int
    smem_bytes: int
    main: object

    @classmethod
    def make(cls, dtype: torch.dtype, group_size: int, has_zeros: bool, m: int, n: int, k_stages: int,
             config: W4A16Config, splits: int | None, arch: Arch, device) -> "Plan":
        """group_size: as the kernel is specialised (kernel_group_size); splits None: the heuristic's."""
        s = spec(dtype, group_size, has_zeros, config, arch)
        main = runtime.kernel(s, device)
        if splits is None:
            sm_count = torch.cuda.get_device_properties(device).multi_processor_count
            resident = runtime.max_active_blocks(main, config.threads, s.smem_bytes)
            splits = splits_for(config, m, n, k_stages, sm_count, resident)
        tiles = -(-m // config.block_m) * -(-n // config.block_n)
        return cls(config, splits, tiles, s.smem_bytes, main)

    def workspace(self, a: torch.Tensor) -> tuple | None:
        """One call's split-K workspace and the stream's tile tickets (None without K splits)."""
        if self.splits == 1:
            return None
        cfg = self.config
        return (torch.empty(self.tiles * self.splits * cfg.block_m * cfg.block_n, dtype=torch.float32,
                            device=a.device), tickets(a.device, self.tiles))

    def launch(self, a: torch.Tensor, w: W4A16Weight, c: torch.Tensor, bias: torch.Tensor | None, workspace=None,
               record=None) -> None:
        """a: [M, K] with 16-byte aligned rows, c: [M, N] contiguous, bias: [N] contiguous or None.
        workspace: `workspace(a)` (else allocated here); record: see runtime.launch."""
        cfg, m = self.config, a.shape[0]
        ws, tk = workspace or self.workspace(a) or (c, c)  # (c, c): unused
        runtime.launch(self.main, (self.tiles, self.splits, 1), (cfg.threads, 1, 1),
                       [a, w.packed, w.scales, w.zeros if w.zeros is not None else w.scales,
                        bias if bias is not None else c, c, ws, tk, m, w.n, w.k, a.stride(0) * 2,
                        w.packed.shape[0], w.groups, zero_bits(w), int(bias is not None)],
                       self.smem_bytes, KINDS, record=record)
