// int4_unpack: int4 / uint4 storage (two values per byte along K, low nibble = even k) -> one int8 per value, for
// the Hopper path, which runs int4 x int4 on the s8 / u8 wgmma (sm_90 has no int4 tensor-core instruction).
// One pass over both: a thread turns 8 packed bytes into one 16-byte store where the row allows it; a row's tail,
// or a row that does not start 8-byte aligned, goes byte by byte.

// Header section: editor defaults, replaced by codegen/int4_unpack.j2.
#include "common.cuh"
constexpr bool SIGNED = true;  // int4 (sign-extend each nibble) or uint4
// ---- kernel ----

// Four packed bytes -> eight values: the low nibbles and the high nibbles interleaved (k = 2i, 2i + 1), signed
// nibbles sign-extended bytewise as (v ^ 8) - 8.
GN_DEVICE void expand4(u32 w, u32& first, u32& second) {
  u32 lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
  if constexpr (SIGNED) {
    lo = __vsub4(lo ^ 0x08080808u, 0x08080808u);
    hi = __vsub4(hi ^ 0x08080808u, 0x08080808u);
  }
  first = __byte_perm(lo, hi, 0x5140);   // lo.b0 hi.b0 lo.b1 hi.b1
  second = __byte_perm(lo, hi, 0x7362);  // lo.b2 hi.b2 lo.b3 hi.b3
}

GN_DEVICE u8 nibble(u32 b) { return SIGNED ? (u8)((int)(b << 28) >> 28) : (u8)(b & 0xF); }

// src: [rows, half] bytes with row stride ld_src; dst: [rows, ld_dst] int8, ld_dst a multiple of 16 and dst 16-byte
// aligned (the host allocates it). blockIdx.y strides over rows, the x dimension over a row's 8-byte chunks.
extern "C" __global__ void __launch_bounds__(256) int4_unpack(const u8* __restrict__ src, u8* __restrict__ dst,
                                                              int rows, int half, int ld_src, int ld_dst) {
  const int step = gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    const u8* s = src + (i64)row * ld_src;
    u8* d = dst + (i64)row * ld_dst;
    const int chunks = ((u64)s % 8 == 0) ? half / 8 : 0;
    for (int i = first; i < chunks; i += step) {
      const uint2 w = *(const uint2*)(s + 8 * i);
      uint4 o;
      expand4(w.x, o.x, o.y);
      expand4(w.y, o.z, o.w);
      *(uint4*)(d + 16 * i) = o;
    }
    for (int b = 8 * chunks + first; b < half; b += step) {
      const u32 v = s[b];
      d[2 * b] = nibble(v);
      d[2 * b + 1] = nibble(v >> 4);
    }
  }
}
