"""Packed 4-bit integers for gn_mm.mm: two values per byte along K, low nibble = even k.

    a4 = gn_mm.pack_int4(a_values)            # [M, K] ints in -8..7  -> Int4Tensor, logical [M, K]
    w4 = gn_mm.pack_int4(w_values)            # [N, K] weight
    c = gn_mm.mm(a4, w4.t())                  # int32 [M, N]; B is K-major, like F.linear
"""

from __future__ import annotations

import torch


class Int4Tensor:
    """A 2-D matrix of int4 (signed, -8..7) or uint4 (0..15) values packed along K.

    `data` is a uint8 tensor [rows, ceil(K / 2)]; the logical shape is [rows, K_even] or, after .t(),
    [K_even, rows] (K_even = 2 * data.shape[1]; an odd K is padded with a zero nibble by pack_int4).
    """

    def __init__(self, data: torch.Tensor, signed: bool = True, transposed: bool = False):
        if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8 or data.dim() != 2:
            raise TypeError("Int4Tensor data must be a 2-D torch.uint8 tensor (two values per byte along K)")
        self.data = data
        self.signed = signed
        self.transposed = transposed

    @property
    def dtype(self) -> torch.dtype:
        """torch.int4 (signed) or torch.uint4: the logical element type."""
        return torch.int4 if self.signed else torch.uint4

    @property
    def shape(self) -> torch.Size:
        """The logical shape, K counted in values (twice the packed bytes), transposed if `t()` was taken."""
        rows, k = self.data.shape[0], 2 * self.data.shape[1]
        return torch.Size((k, rows) if self.transposed else (rows, k))

    @property
    def device(self) -> torch.device:
        """The device of the packed bytes."""
        return self.data.device

    def dim(self) -> int:
        """Always 2: an int4 matrix."""
        return 2

    def size(self, i: int | None = None):
        """The logical shape, or its dimension `i`."""
        return self.shape if i is None else self.shape[i]

    def t(self) -> "Int4Tensor":
        """The transposed view (same bytes): what `gn_mm.mm(a, b.t())` takes for a [N, K] weight."""
        return Int4Tensor(self.data, self.signed, not self.transposed)

    @property
    def T(self) -> "Int4Tensor":
        """Same as `t()`."""
        return self.t()

    def to(self, device) -> "Int4Tensor":
        """A copy of the packed bytes on `device`, same signedness and orientation."""
        return Int4Tensor(self.data.to(device), self.signed, self.transposed)

    def unpack(self) -> torch.Tensor:
        """The values as int8, in the logical shape."""
        x = unpack_int4(self.data, self.signed)
        return x.t() if self.transposed else x

    def __repr__(self) -> str:
        kind = "int4" if self.signed else "uint4"
        return f"Int4Tensor({kind}, shape={tuple(self.shape)}, device={self.device})"


def pack_int4(values: torch.Tensor, signed: bool | None = None) -> Int4Tensor:
    """Pack an integer tensor [rows, K] (values -8..7, or 0..15 for uint4) two per byte along the last dim.

    signed=None infers it: int4 unless some value is above 7 (then uint4).
    """
    if not isinstance(values, torch.Tensor) or values.dim() != 2 or values.dtype.is_floating_point \
            or values.dtype.is_complex:
        got = f"{values.dtype} of shape {tuple(values.shape)}" if isinstance(values, torch.Tensor) else \
            type(values).__name__
        raise TypeError(f"pack_int4: values must be a 2-D integer tensor [rows, K], got {got}")
    # Range-check the values as given (narrowing first would wrap 65539 to 3 and pack it). Unsigned types widen: a
    # uint8 compared with -8 wraps the -8; in int64 only uint64's top half wraps (to negatives, caught below).
    v = values if values.dtype.is_signed else values.to(torch.int16 if values.element_size() == 1 else torch.int64)
    wrapped = not values.dtype.is_signed and bool((v < 0).any())
    if signed is None:
        signed = not bool((v > 7).any())
    lo, hi = (-8, 7) if signed else (0, 15)
    if wrapped or bool((v < lo).any()) or bool((v > hi).any()):
        raise ValueError(f"pack_int4: values must lie in [{lo}, {hi}] for {'int4' if signed else 'uint4'}")
    if v.shape[1] % 2:
        v = torch.nn.functional.pad(v, (0, 1))
    nib = (v & 0xF).to(torch.uint8)
    return Int4Tensor((nib[:, 0::2] | (nib[:, 1::2] << 4)).contiguous(), signed)


def unpack_int4(data: torch.Tensor, signed: bool = True) -> torch.Tensor:
    """uint8 [rows, K/2] -> int8 [rows, K] (low nibble first)."""
    if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8 or data.dim() != 2:
        got = f"{data.dtype} of shape {tuple(data.shape)}" if isinstance(data, torch.Tensor) else type(data).__name__
        raise TypeError(f"unpack_int4: data must be a 2-D torch.uint8 tensor (two values per byte along K), got {got}")
    lo = (data & 0xF).to(torch.int8)
    hi = (data >> 4).to(torch.int8)
    x = torch.stack((lo, hi), dim=-1).reshape(data.shape[0], -1)
    return torch.where(x > 7, x - 16, x) if signed else x
