// int4 -> fp16 / bf16 in registers, for the W4A16 kernels (GN_ACT_KIND picks the type).
//
// The packed weight word of one lane holds 8 nibbles as 4 pairs: pair p (p = 0..3) is nibbles p and p + 4,
// i.e. bits [4p, 4p + 4) and [16 + 4p, 20 + 4p). OR-ing a nibble into the mantissa of a power of two gives
// that power plus the nibble exactly (fp16: 1024 + q, 10 mantissa bits; bf16: 128 + q, 7 bits), so one
// shift and one lop3 turn a pair into a half2 / bf16x2 of (MAGIC + q), with no integer-to-float conversion.
// Then (x - (MAGIC + zero)) is exact (an integer in -15..15) and one multiply by the scale rounds once: the
// same value a dequantised fp16/bf16 weight would hold.
#pragma once
#include "common.cuh"

#define GN_ACT_F16 0
#define GN_ACT_BF16 1

#if GN_ACT_KIND == GN_ACT_F16
#define GN_X2 "f16x2"
constexpr u32 DQ_MAGIC = 0x64006400u;  // 1024.0 in both halves
#else
#define GN_X2 "bf16x2"
constexpr u32 DQ_MAGIC = 0x43004300u;  // 128.0 in both halves
#endif
constexpr u32 DQ_ONE = GN_ACT_KIND == GN_ACT_F16 ? 0x3c003c00u : 0x3f803f80u;
constexpr u32 DQ_NEG = 0x80008000u;  // sign bits of both halves

// (MAGIC + q) of pair P of word w, both halves.
template <int P>
GN_DEVICE u32 dq_pair(u32 w) {
  u32 r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w >> (4 * P)), "n"(0x000f000f), "n"(DQ_MAGIC));
  return r;  // 0xEA: (a & b) | c
}

// (x - z) * s on both halves, where neg_z = -(MAGIC + zero). fma.rn twice (bf16x2 has no sub/mul before
// sm_90): x * 1 + neg_z is exact, then d * s + (-0) rounds once.
GN_DEVICE u32 dq_apply(u32 x, u32 neg_z, u32 s) {
  u32 d, v;
  asm("fma.rn." GN_X2 " %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(DQ_ONE), "r"(neg_z));
  asm("fma.rn." GN_X2 " %0, %1, %2, %3;" : "=r"(v) : "r"(d), "r"(s), "r"(DQ_NEG));
  return v;
}

// Both halves of a half2 set to its low (H = 0) or high (H = 1) half.
template <int H>
GN_DEVICE u32 dq_broadcast(u32 x) { return __byte_perm(x, x, H ? 0x3232 : 0x1010); }

// Per-lane dequantisation constants of one group for the lane's two columns (g and 8 + g of a 16-column
// strip): scale and -(MAGIC + zero) broadcast to both halves. s2 / z2 hold (column g, column 8 + g).
struct DqGroup {
  u32 s[2], nz[2];
  GN_DEVICE void set(u32 s2, u32 z2) {
    s[0] = dq_broadcast<0>(s2);
    s[1] = dq_broadcast<1>(s2);
    nz[0] = dq_broadcast<0>(z2) ^ DQ_NEG;
    nz[1] = dq_broadcast<1>(z2) ^ DQ_NEG;
  }
  // The 4 registers one word dequantises to: pairs 0, 1 (column g: k 2t.., 2t + 8..) use s[0], pairs 2, 3
  // (column 8 + g) use s[1]. As mma.sync B fragments: n8 tile 0 = {r[0], r[1]}, tile 1 = {r[2], r[3]}.
  GN_DEVICE void word(u32 w, u32 (&r)[4]) const {
    r[0] = dq_apply(dq_pair<0>(w), nz[0], s[0]);
    r[1] = dq_apply(dq_pair<1>(w), nz[0], s[0]);
    r[2] = dq_apply(dq_pair<2>(w), nz[1], s[1]);
    r[3] = dq_apply(dq_pair<3>(w), nz[1], s[1]);
  }
};
