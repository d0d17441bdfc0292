"""int4 -> int8 on the GPU (cuda_src/int4_unpack.cu): how the Hopper path feeds int4 x int4 to the s8 / u8 wgmma,
which has no int4 form. One kernel pass per operand; torch ops took six launches and strided half-writes per call
(benchmarks/NOTES.md sm90 32)."""

from __future__ import annotations

import torch

from . import runtime
from .arch import Arch
from .runtime import KernelSpec

STEM = "int4_unpack"
KINDS = (runtime.TENSOR,) * 2 + (runtime.INT,) * 4  # src, dst, rows, half, ld_src, ld_dst
THREADS = 256


def spec(signed: bool, arch: Arch) -> KernelSpec:
    return KernelSpec.make(STEM, STEM, {"signed": signed}, Arch(arch.cc))


def unpack_rows(packed: torch.Tensor, k: int, signed: bool, arch: Arch) -> tuple[torch.Tensor, int]:
    """uint8 [rows, K/2] int4 storage (K-contiguous rows, low nibble = even k) -> (int8 [rows, k] view, its row
    stride): rows padded to 16 bytes (a TMA stride); int4 nibbles sign-extended, uint4 ones zero-extended."""
    rows, half = packed.shape
    ld = -(-max(k, 2 * half) // 16) * 16
    out = torch.empty((rows, ld), dtype=torch.int8, device=packed.device)
    if rows and half:
        kernel = runtime.kernel(spec(signed, arch), packed.device)
        chunks = -(-half // 8)  # 8 packed bytes per thread
        grid = (min(-(-chunks // THREADS), 64), min(rows, 65535), 1)
        runtime.launch(kernel, grid, (THREADS, 1, 1), [packed, out, rows, half, packed.stride(0), ld], 0, KINDS)
    return out[:, :k], ld
