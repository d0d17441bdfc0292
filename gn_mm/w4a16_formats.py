"""W4A16 weight formats (pure torch, CPU or GPU): the GPTQ "sequential" layout the kernel reads, converters
into it, a float64 dequantisation reference and a can_implement-style check.

GPTQ layout (K input features, N output features, group size G):
  qweight [K, N // 8] int32: word (k, j) holds w[k, 8j + i] as an unsigned nibble at bits 4i (i = 0..7);
  scales  [K // G, N] in the activation dtype;
  qzeros  [K // G, N // 8] int32 packed like qweight, or None: then every zero point is `zp_bias`
          (8 for symmetric uint4b8).
  w[k, n] = (q[k, n] - zero[k // G, n]) * scale[k // G, n]
G = -1 means per-channel (G = K), GPTQ's quantize_config.json convention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import LayoutError, UnsupportedError, as_int

GROUP_SIZES = (32, 64, 128)  # and G = K (per-channel, also written -1)
_SHIFTS = tuple(range(0, 32, 4))
ACT_ORDER = ("g_idx: act-order (desc_act) checkpoints are not supported (g_idx differs from arange(K) // "
             "group_size); reorder K to sequential groups when quantizing")


def group_of(group_size, k: int) -> int | None:
    """The group size an argument stands for (-1: K, per-channel); None when it is not an int."""
    g = as_int(group_size)
    return k if g == -1 else g


def g_idx_problem(g_idx, k: int, group_size: int | None) -> str | None:
    """Why `g_idx` cannot be taken (None when it is None or GPTQ's trivial arange(K) // group_size, which every
    AutoGPTQ / GPTQModel layer carries without act-order). `group_size` None: not known to be valid yet."""
    if g_idx is None:
        return None
    if not isinstance(g_idx, torch.Tensor) or g_idx.dtype.is_floating_point or g_idx.dtype.is_complex \
            or g_idx.dtype == torch.bool or g_idx.dim() != 1 or g_idx.numel() != k:
        got = f"{g_idx.dtype} {tuple(g_idx.shape)}" if isinstance(g_idx, torch.Tensor) else type(g_idx).__name__
        return f"g_idx: expected a 1-D integer tensor of K = {k} entries (arange(K) // group_size), got {got}"
    if group_size is None:
        return None
    trivial = torch.arange(k, device=g_idx.device) // group_size   # on g_idx's device: no copy of it
    return None if bool((g_idx == trivial).all()) else ACT_ORDER


def pack_nibbles(values: torch.Tensor, dim: int) -> torch.Tensor:
    """Unsigned 4-bit values (0..15, any integer dtype) -> int32 words of 8 consecutive values along `dim`
    (value i of a word at bits 4i). The size of `dim` must be a multiple of 8."""
    v = values.movedim(dim, -1).to(torch.int64)
    if v.shape[-1] % 8:
        raise LayoutError(f"pack_nibbles: dimension {dim} has {v.shape[-1]} values, not a multiple of 8")
    if bool((v < 0).any()) or bool((v > 15).any()):
        raise ValueError("pack_nibbles: values must lie in 0..15")
    v = v.reshape(*v.shape[:-1], -1, 8)
    shifts = torch.tensor(_SHIFTS, dtype=torch.int64, device=v.device)
    words = (v << shifts).sum(-1)
    words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # two's complement int32
    return words.movedim(-1, dim).contiguous()


def unpack_nibbles(words: torch.Tensor, dim: int) -> torch.Tensor:
    """int32 words -> uint8 values (0..15), 8 per word along `dim` (inverse of pack_nibbles)."""
    w = words.movedim(dim, -1).to(torch.int64) & 0xFFFFFFFF
    shifts = torch.tensor(_SHIFTS, dtype=torch.int64, device=w.device)
    v = ((w.unsqueeze(-1) >> shifts) & 0xF).to(torch.uint8)
    return v.reshape(*w.shape[:-1], -1).movedim(-1, dim).contiguous()


def check_gptq(qweight, scales, qzeros=None, *, group_size: int, g_idx=None) -> list[str]:
    """Why the kernel cannot take these tensors (an empty list when it can), argument by argument."""
    if not isinstance(qweight, torch.Tensor) or qweight.dtype != torch.int32 or qweight.dim() != 2:
        return ["qweight: expected a 2-D torch.int32 tensor [K, N // 8]"]
    problems = []
    k, n = qweight.shape[0], qweight.shape[1] * 8
    g = group_of(group_size, k)
    if k < 1:
        problems.append(f"qweight: K must be at least 1, got shape {tuple(qweight.shape)}")
    if n < 8:
        problems.append(f"qweight: N must be at least 8 (one int32 of 8 columns), got shape {tuple(qweight.shape)}")
    if g is None:
        problems.append(f"group_size: expected an int (32, 64, 128, K or -1 for per-channel), got "
                        f"{type(group_size).__name__}")
    elif k >= 1 and g not in GROUP_SIZES and g != k:
        problems.append(f"group_size: {group_size} is not supported; use 32, 64, 128 or K ({k}); -1 means K")
    elif k >= 1 and k % g:
        problems.append(f"group_size: K = {k} is not a multiple of {g}")
    # shapes derived from K and G only when both are valid (a bad G would make nonsense of them)
    groups = k // g if not problems else None
    if (why := g_idx_problem(g_idx, k, g if groups is not None else None)) is not None:
        problems.append(why)
    if not isinstance(scales, torch.Tensor) or scales.dtype not in (torch.float16, torch.bfloat16):
        problems.append("scales: expected a float16 or bfloat16 tensor (the activation dtype)")
    elif groups is not None and tuple(scales.shape) != (groups, n):
        problems.append(f"scales: expected shape ({groups}, {n}) = (K // G, N), got {tuple(scales.shape)}")
    if qzeros is not None:
        if not isinstance(qzeros, torch.Tensor) or qzeros.dtype != torch.int32:
            problems.append("qzeros: expected a torch.int32 tensor [K // G, N // 8]")
        elif groups is not None and tuple(qzeros.shape) != (groups, n // 8):
            problems.append(f"qzeros: expected shape ({groups}, {n // 8}) = (K // G, N // 8), "
                            f"got {tuple(qzeros.shape)}")
    devices = {t.device for t in (qweight, scales, qzeros) if isinstance(t, torch.Tensor)}
    if len(devices) > 1:
        problems.append(f"qweight, scales, qzeros: on different devices {sorted(map(str, devices))}")
    return problems


def zp_bias_problem(zp_bias) -> str | None:
    """Why `zp_bias` is not a zero point the kernels take (None when it is one)."""
    z = as_int(zp_bias)
    if z is None:
        return f"zp_bias: expected an int 0..15 (8: symmetric uint4b8), got {type(zp_bias).__name__}"
    return None if 0 <= z <= 15 else f"zp_bias: {zp_bias} is not a 4-bit zero point (0..15)"


def dequantize_gptq(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor | None = None, *,
                    group_size: int, zp_bias: int = 8, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The [K, N] weight the GPTQ tensors stand for, computed in `dtype` (the reference for every test)."""
    problems = check_gptq(qweight, scales, qzeros, group_size=group_size)
    if problems:
        raise LayoutError("; ".join(problems))
    group_size = group_of(group_size, qweight.shape[0])
    q = unpack_nibbles(qweight, dim=1).to(dtype)                       # [K, N]
    zero = (unpack_nibbles(qzeros, dim=1).to(dtype) if qzeros is not None
            else torch.full_like(scales, zp_bias, dtype=dtype))        # [K // G, N]
    per_k = torch.arange(q.shape[0], device=q.device) // group_size
    return (q - zero[per_k]) * scales.to(dtype)[per_k]


def from_compressed_tensors(weight_packed: torch.Tensor, weight_scale: torch.Tensor,
                            weight_zero_point: torch.Tensor | None = None, *, dtype: torch.dtype | None = None):
    """compressed-tensors pack-quantized int4 -> (qweight, scales, qzeros, group_size) in the GPTQ layout.

    weight_packed [N, K // 8] int32 packed along K, weight_scale [N, K // G], weight_zero_point
    [N // 8, K // G] int32 packed along N (asymmetric only). Values are stored as offset codes
    (signed v -> v + 8), so the nibbles are already GPTQ's unsigned q and zero; without zero points the
    zero is 8 (zp_bias). `dtype` converts the scales (default: keep theirs)."""
    if weight_packed.dtype != torch.int32 or weight_packed.dim() != 2:
        raise LayoutError("weight_packed: expected a 2-D torch.int32 tensor [N, K // 8]")
    n, k = weight_packed.shape[0], weight_packed.shape[1] * 8
    _check_kn("weight_packed", k, n, tuple(weight_packed.shape))
    if weight_scale.dim() != 2 or weight_scale.shape[0] != n or weight_scale.shape[1] < 1 or k % weight_scale.shape[1]:
        raise LayoutError(f"weight_scale: expected [N, K // G] = [{n}, K // G] with K = {k}, "
                          f"got {tuple(weight_scale.shape)}")
    group_size = k // weight_scale.shape[1]
    q = unpack_nibbles(weight_packed, dim=1)                      # [N, K]
    qweight = pack_nibbles(q.t(), dim=1)                          # [K, N // 8]
    scales = weight_scale.t().contiguous()
    if dtype is not None:
        scales = scales.to(dtype)
    qzeros = None
    if weight_zero_point is not None:
        if weight_zero_point.dtype != torch.int32 or tuple(weight_zero_point.shape) != (n // 8, k // group_size):
            raise LayoutError(f"weight_zero_point: expected int32 [N // 8, K // G] = [{n // 8}, {k // group_size}], "
                              f"got {weight_zero_point.dtype} {tuple(weight_zero_point.shape)}")
        qzeros = weight_zero_point.t().contiguous()               # packed along N already
    return qweight, scales, qzeros, group_size


def _check_kn(name: str, k: int, n: int, shape: tuple) -> None:
    """A checkpoint tensor's K and N as the GPTQ layout needs them (K >= 1, N a positive multiple of 8)."""
    if k < 1:
        raise LayoutError(f"{name}: K must be at least 1, got shape {shape}")
    if n < 8:
        raise LayoutError(f"{name}: N must be at least 8, got shape {shape}")
    if n % 8:
        raise LayoutError(f"{name}: N = {n} output features is not a multiple of 8 (the GPTQ layout packs 8 "
                          f"columns per int32)")


def _checkpoint_group(group_size, k: int) -> int:
    """A checkpoint's group size (-1: K) as an int that divides K; LayoutError otherwise."""
    g = group_of(group_size, k)
    if g is None or g < 1 or k % g:
        raise LayoutError(f"group_size: expected an int that divides K = {k} (or -1 for per-channel), "
                          f"got {group_size!r}")
    return g


def _zeros_out(zero: torch.Tensor) -> torch.Tensor | None:
    """[K // G, N] zero points -> qzeros in the GPTQ layout, or None where every one is 8: symmetric
    checkpoints (stored 0x77777777 in GPTQ v1) then take the kernels' no-zero-point path (zp_bias = 8)."""
    return None if bool((zero == 8).all()) else pack_nibbles(zero, dim=1)


def from_gptq(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor, g_idx: torch.Tensor | None = None,
              *, group_size: int, zero_offset: int = 1):
    """An AutoGPTQ / GPTQModel checkpoint's tensors (its QuantLinear buffers, 4-bit) -> (qweight, scales,
    qzeros, group_size) in the GPTQ "sequential" layout the kernel reads.

    qweight [K // 8, N] int32 packed along K: word (i, n) holds q[8i + j, n] at bits 4j.
    qzeros  [K // G, N // 8] int32 packed along N: word (g, i) holds the stored zero of column 8i + j at bits 4j.
    scales  [K // G, N], passed through. group_size: quantize_config.json's (-1: per-channel).
    zero_offset: the classic "gptq" (v1) format stores zero - 1 (symmetric checkpoints hold 0x77777777, zero 8);
      the zero is (stored + 1) mod 16, as AutoGPTQ's dequantisation computes it. 0 for GPTQModel's "gptq_v2".
    g_idx: the layer's buffer; arange(K) // G (no act-order) is accepted, act-order (desc_act) is refused.
    qzeros comes back None where every zero point is 8 (see `_zeros_out`)."""
    if not isinstance(qweight, torch.Tensor) or qweight.dtype != torch.int32 or qweight.dim() != 2:
        raise LayoutError("qweight: expected a 2-D torch.int32 tensor [K // 8, N] (GPTQ packs 8 K-values per int32)")
    k, n = qweight.shape[0] * 8, qweight.shape[1]
    _check_kn("qweight", k, n, tuple(qweight.shape))
    group_size = _checkpoint_group(group_size, k)
    if isinstance(zero_offset, bool) or zero_offset not in (0, 1):
        raise LayoutError(f"zero_offset: 1 for GPTQ v1 checkpoints (stored zero - 1), 0 for GPTQModel's gptq_v2; "
                          f"got {zero_offset!r}")
    if (why := g_idx_problem(g_idx, k, group_size)) is not None:
        raise (UnsupportedError if why == ACT_ORDER else LayoutError)(why)
    _check_groups(scales, qzeros, k // group_size, n)
    q = unpack_nibbles(qweight, dim=0)                                     # [K, N]: k = 8i + j from bits 4j
    zero = (unpack_nibbles(qzeros, dim=1).to(torch.int16) + zero_offset) & 0xF
    return pack_nibbles(q, dim=1), scales.contiguous(), _zeros_out(zero), group_size


# AutoAWQ's GEMM packing: nibble i (bits 4i) of word j holds column 8j + AWQ_ORDER[i]. Reading column c of a word
# takes nibble AWQ_ORDER.index(c) = (0, 4, 1, 5, 2, 6, 3, 7)[c].
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
_AWQ_NIBBLE_OF_COLUMN = tuple(AWQ_ORDER.index(c) for c in range(8))


def _unpack_awq(words: torch.Tensor) -> torch.Tensor:
    """[rows, N // 8] AWQ words -> [rows, N] values in column order."""
    nib = unpack_nibbles(words, dim=1)                                     # [rows, N] in nibble order
    order = torch.tensor(_AWQ_NIBBLE_OF_COLUMN, device=nib.device)
    return nib.reshape(nib.shape[0], -1, 8)[:, :, order].reshape(nib.shape)


def from_awq(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor, *, group_size: int):
    """An AutoAWQ "GEMM" checkpoint's tensors (WQLinear_GEMM buffers, 4-bit) -> (qweight, scales, qzeros,
    group_size) in the GPTQ "sequential" layout the kernel reads.

    qweight [K, N // 8] int32 packed along N in AWQ's order: nibble i of word j is column 8j + AWQ_ORDER[i].
    qzeros  [K // G, N // 8] int32 packed the same way; the zero points are stored as they are (no offset).
    scales  [K // G, N], passed through. group_size: the checkpoint's q_group_size (-1: per-channel).
    w = (q - zero) * scale. qzeros comes back None where every zero point is 8 (see `_zeros_out`)."""
    if not isinstance(qweight, torch.Tensor) or qweight.dtype != torch.int32 or qweight.dim() != 2:
        raise LayoutError("qweight: expected a 2-D torch.int32 tensor [K, N // 8] (AWQ packs 8 N-values per int32)")
    k, n = qweight.shape[0], qweight.shape[1] * 8
    _check_kn("qweight", k, n, tuple(qweight.shape))
    group_size = _checkpoint_group(group_size, k)
    _check_groups(scales, qzeros, k // group_size, n)
    return pack_nibbles(_unpack_awq(qweight), dim=1), scales.contiguous(), _zeros_out(_unpack_awq(qzeros)), group_size


def _check_groups(scales, qzeros, groups: int, n: int) -> None:
    """A checkpoint's scales [K // G, N] and qzeros [K // G, N // 8] int32 (both packed-along-N formats)."""
    if not isinstance(scales, torch.Tensor) or tuple(scales.shape) != (groups, n):
        got = tuple(scales.shape) if isinstance(scales, torch.Tensor) else type(scales).__name__
        raise LayoutError(f"scales: expected shape ({groups}, {n}) = (K // G, N), got {got}")
    if not isinstance(qzeros, torch.Tensor) or qzeros.dtype != torch.int32 or tuple(qzeros.shape) != (groups, n // 8):
        got = f"{qzeros.dtype} {tuple(qzeros.shape)}" if isinstance(qzeros, torch.Tensor) else type(qzeros).__name__
        raise LayoutError(f"qzeros: expected int32 of shape ({groups}, {n // 8}) = (K // G, N // 8), got {got}")


def from_int4_k_packed(w: torch.Tensor, *, dtype: torch.dtype = torch.float16):
    """A plain signed int4 matrix packed two per byte along K ([K // 2, N] int8, low nibble = even k,
    values -8..7, no scales) -> (qweight, scales, qzeros=None, group_size=K): unit scales, zero point 8."""
    if w.dtype not in (torch.int8, torch.uint8) or w.dim() != 2:
        raise LayoutError("w: expected a 2-D int8 tensor [K // 2, N] (two int4 values per byte along K)")
    _check_kn("w", 2 * w.shape[0], w.shape[1], tuple(w.shape))
    b = w.to(torch.int16) & 0xFF
    lo, hi = b & 0xF, b >> 4
    signed = torch.stack((lo, hi), dim=1).reshape(-1, w.shape[1])  # [K, N], row 2i = low nibble of row i
    signed = torch.where(signed > 7, signed - 16, signed)
    k = signed.shape[0]
    qweight = pack_nibbles(signed + 8, dim=1)
    scales = torch.ones((1, w.shape[1]), dtype=dtype, device=w.device)
    return qweight, scales, None, k


# ---- gn_mm's kernel layout (read by cuda_src/sm80_w4a16.cu), made once at load time ------------------------
# The fp16 / bf16 bit patterns of the power of two whose mantissa takes a nibble exactly (int4_dequant.cuh).
MAGIC_BITS = {torch.float16: 0x6400, torch.bfloat16: 0x4300}


@dataclass(frozen=True)
class W4A16Weight:
    """A GPTQ weight repacked for gn_mm's W4A16 kernels (see `prepare`). Pass it to `gn_mm.w4a16_mm`.

    packed: [ceil(K/64), ceil(N/16), 32, 4] int32: word s of lane l of (stage c, strip b) holds the 8 nibbles
            lane l needs for k16 step s of mma.sync's two n8 B fragments of columns 16b..16b+15. Stage-major:
            a CTA's strips of one stage are one contiguous block of DRAM.
    scales: [ceil(N/16), groups, 16] in the activation dtype: (strip b, group, i) = scale of column 16b + i.
    zeros:  [ceil(N/16), groups, 8, 2] in the activation dtype's bits, or None (then zp_bias): (b, group, g, h)
            = MAGIC + zero of column 16b + 8h + g, the zero 16x for h = 1 with fp16 (int4_dequant.cuh)."""

    packed: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor | None
    k: int
    n: int
    group_size: int
    zp_bias: int
    layout: str = "nv_fragments"  # or "gptq": the GPTQ tensors as they are (what the ROCm twin reads)

    @property
    def dtype(self) -> torch.dtype:
        """The activation / output dtype the weight was prepared for (its scales' dtype)."""
        return self.scales.dtype

    @property
    def device(self) -> torch.device:
        """The device of the packed weight."""
        return self.packed.device

    @property
    def groups(self) -> int:
        """Scale groups along K (1 for per-channel scales)."""
        return -(-self.k // self.group_size)


# fp16 dequantises the second nibble pair of each byte as 16 q (int4_dequant.cuh): its zero point is 16x too.
HI_FACTOR = {torch.float16: 16, torch.bfloat16: 1}


def zero_bits(w: "W4A16Weight") -> int:
    """Every column's zero-point pair as the packed format encodes it (MAGIC + zp_bias, the second 16x for
    fp16), for a weight without zero points; a signed 32-bit int, as the kernels take it."""
    bits = (MAGIC_BITS[w.dtype] + w.zp_bias) | (MAGIC_BITS[w.dtype] + HI_FACTOR[w.dtype] * w.zp_bias) << 16
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def _columns_to_strips(x: torch.Tensor, n: int) -> torch.Tensor:
    """[rows, N] -> [ceil(N/16), rows, 16]: column 16b + i at (b, row, i); padded columns are 0."""
    strips = -(-n // 16)
    x = torch.nn.functional.pad(x, (0, strips * 16 - n))
    return x.reshape(x.shape[0], strips, 16).permute(1, 0, 2).contiguous()


def _zeros_to_strips(z: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    """[groups, N] zero points -> [ceil(N/16), groups, 8, 2] bits of MAGIC + zero (x16 for h = 1 with fp16)."""
    z = _columns_to_strips(z, n).reshape(-1, z.shape[0], 2, 8).permute(0, 1, 3, 2)  # (b, group, g, h)
    z = z * torch.tensor([1, HI_FACTOR[dtype]], dtype=z.dtype, device=z.device)
    return (z + MAGIC_BITS[dtype]).to(torch.int16).contiguous().view(dtype)


def prepare(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor | None = None, *, group_size: int,
            zp_bias: int = 8, g_idx=None, layout: str | None = None) -> W4A16Weight:
    """GPTQ tensors -> W4A16Weight for this machine's kernel (pure torch, on their device): the
    fragment-ordered layout below for NVIDIA ("nv_fragments"), the GPTQ tensors as they are on ROCm builds of
    torch ("gptq", what the hipRTC twin reads). `layout` overrides the choice. group_size -1 means K; g_idx
    may be GPTQ's trivial arange(K) // group_size (act-order is refused).

    Nibble i of a packed word is pair p = i % 4, half h = i // 4 (so one mask takes a pair from bits 4p and
    16 + 4p): pair p is column 16b + g + 8 (p % 2) and k = 64c + 16s + 2t + h + 8 (p // 2), for lane l = 4g + t
    of k16 step s at stage c: exactly m16n8k16's B fragment registers b0 (k 2t, 2t+1) and b1 (k 2t+8, 2t+9) of
    n8 tiles 2j (pairs 0, 2) and 2j + 1 (pairs 1, 3). K pads to 64 and N to 16 with zeros (the kernel reads
    zero activations there)."""
    problems = check_gptq(qweight, scales, qzeros, group_size=group_size, g_idx=g_idx)
    if (why := zp_bias_problem(zp_bias)) is not None:
        problems.append(why)
    layout = layout or ("gptq" if torch.version.hip else "nv_fragments")
    if layout not in ("gptq", "nv_fragments"):
        problems.append(f"layout: {layout!r} is not 'nv_fragments' or 'gptq'")
    if problems:
        raise LayoutError("; ".join(problems))
    k, n = qweight.shape[0], qweight.shape[1] * 8
    group_size, zp_bias = group_of(group_size, k), as_int(zp_bias)
    if layout == "gptq":
        return W4A16Weight(qweight.contiguous(), scales.contiguous(),
                           qzeros.contiguous() if qzeros is not None else None, k, n, group_size, zp_bias, "gptq")
    stages = -(-k // 64)
    strips = -(-n // 16)
    q = unpack_nibbles(qweight, dim=1).to(torch.int32)                          # [K, N]
    q = torch.nn.functional.pad(q, (0, strips * 16 - n, 0, stages * 64 - k))
    # k = 64c + 16s + 8kh + 2t + h, column = 16b + 8nh + g; nibble index = nh + 2 kh + 4 h.
    q = q.reshape(stages, 4, 2, 4, 2, strips, 2, 8)                             # c s kh t h b nh g
    q = q.permute(0, 5, 7, 3, 1, 4, 2, 6).reshape(stages, strips, 32, 4, 8)     # c b (g t) s (h kh nh)
    shifts = torch.arange(0, 32, 4, dtype=torch.int64, device=q.device)
    words = (q.to(torch.int64) << shifts).sum(-1)
    packed = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32).contiguous()
    s = _columns_to_strips(scales, n)
    zeros = None
    if qzeros is not None:
        zeros = _zeros_to_strips(unpack_nibbles(qzeros, dim=1).to(torch.int32), n, scales.dtype)
    return W4A16Weight(packed, s, zeros, k, n, group_size, zp_bias)


def dequantize_prepared(w: W4A16Weight, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The [K, N] weight a W4A16Weight stands for (inverse of `prepare`; tests check the round trip)."""
    if w.layout == "gptq":
        return dequantize_gptq(w.packed, w.scales, w.zeros, group_size=w.group_size, zp_bias=w.zp_bias, dtype=dtype)
    stages, strips = w.packed.shape[:2]
    shifts = torch.arange(0, 32, 4, dtype=torch.int64, device=w.device)
    nib = (w.packed.to(torch.int64).unsqueeze(-1) & 0xFFFFFFFF) >> shifts & 0xF    # c b (g t) s (h kh nh)
    q = nib.reshape(stages, strips, 8, 4, 4, 2, 2, 2).permute(0, 4, 6, 3, 5, 1, 7, 2)
    q = q.reshape(stages * 64, strips * 16)[: w.k, : w.n].to(dtype)
    per_k = torch.arange(w.k, device=w.device) // w.group_size

    def columns(x: torch.Tensor) -> torch.Tensor:   # inverse of _columns_to_strips
        return x.permute(1, 0, 2).reshape(x.shape[1], strips * 16)[:, : w.n]

    scale = columns(w.scales).to(dtype)
    if w.zeros is not None:
        z = w.zeros.view(torch.int16).to(torch.int64) - MAGIC_BITS[w.dtype]               # (b, group, g, h)
        z = z // torch.tensor([1, HI_FACTOR[w.dtype]], device=z.device)
        zero = columns(z.permute(0, 1, 3, 2).reshape(strips, -1, 16))
    else:
        zero = torch.full_like(scale, w.zp_bias, dtype=torch.int64)
    return (q - zero[per_k].to(dtype)) * scale[per_k]
