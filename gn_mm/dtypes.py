"""Element types the tensor cores take, keyed by torch dtype. Names follow PTX (bf16, e4m3, s8, ...)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Elem:
    name: str          # PTX type name
    bits: int
    dtype: torch.dtype  # what the user's tensor holds (fp32 storage for tf32; torch.int4 labels packed int4)
    is_int: bool


ELEMS = {
    e.dtype: e
    for e in (
        Elem("bf16", 16, torch.bfloat16, False),
        Elem("f16", 16, torch.float16, False),
        Elem("tf32", 32, torch.float32, False),
        Elem("e4m3", 8, torch.float8_e4m3fn, False),
        Elem("e5m2", 8, torch.float8_e5m2, False),
        Elem("s8", 8, torch.int8, True),
        Elem("u8", 8, torch.uint8, True),
        Elem("s4", 4, torch.int4, True),
        Elem("u4", 4, torch.uint4, True),
    )
}
BY_NAME = {e.name: e for e in ELEMS.values()}

# Accumulator and output names <-> torch dtypes.
ACC_DTYPES = {"f32": torch.float32, "f16": torch.float16, "s32": torch.int32}
OUT_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "s32": torch.int32}
DTYPE_NAMES = {v: k for k, v in OUT_DTYPES.items()}


def elem_of(dtype: torch.dtype) -> Elem | None:
    return ELEMS.get(dtype)

# The kernels' names for accumulator and output kinds (cuda_src/common.cuh).
ACC_KIND = {"f32": "GN_ACC_F32", "s32": "GN_ACC_S32", "f16": "GN_ACC_F16"}
OUT_KIND = {"bf16": "GN_OUT_BF16", "f16": "GN_OUT_F16", "f32": "GN_OUT_F32", "s32": "GN_OUT_S32"}
