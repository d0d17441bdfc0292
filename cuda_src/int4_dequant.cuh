// int4 -> fp16 / bf16 in registers, for the W4A16 kernels (GN_ACT_KIND picks the type).
//
// OR-ing a nibble into the mantissa of a power of two gives that power plus the nibble exactly (fp16: 1024 + q,
// 10 mantissa bits; bf16: 128 + q, 7 bits), so one lop3 turns two nibbles of a word (bits [0, 4) and [16, 20)
// under mask 0x000f000f) into a half2 / bf16x2 of (MAGIC + q) with no integer-to-float conversion; one add
// of -(MAGIC + zero) leaves (q - zero), an exact small integer. The tensor cores then multiply activations by
// exact integers, and each group's scale is applied in fp32 to that group's sums (gn_mm's W4A16 kernels keep a
// per-group accumulator): more accurate than rounding every (q - zero) * scale to 16 bits, and no multiply per
// weight. fp16 also takes the next nibble in place (mask 0x00f000f0 gives 1024 + 16 q; 16 (q - zero) is exact)
// and saves two shifts per word: those values are 16x, and so is their zero point; the fold divides by 16.
#pragma once
#include "common.cuh"

#define GN_ACT_F16 0
#define GN_ACT_BF16 1

#if GN_ACT_KIND == GN_ACT_F16
#define GN_X2 "f16x2"
constexpr u32 DQ_MAGIC = 0x64006400u;  // 1024.0 in both halves
constexpr u32 DQ_ONE = 0x3c003c00u;
constexpr float DQ_HI = 1.f / 16.f;    // what the second pair of each byte is scaled by, undone in the fold
#else
#define GN_X2 "bf16x2"
constexpr u32 DQ_MAGIC = 0x43004300u;  // 128.0 in both halves
constexpr u32 DQ_ONE = 0x3f803f80u;
constexpr float DQ_HI = 1.f;           // bf16's 7 mantissa bits cannot take a nibble at bits 4-7: shifted
#endif
constexpr u32 DQ_NEG = 0x80008000u;    // sign bits of both halves

GN_DEVICE u32 dq_lop(u32 w, u32 mask) {
  u32 r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w), "r"(mask), "n"(DQ_MAGIC));
  return r;  // 0xEA: (a & b) | c
}

// x + neg_z on both halves (fma.rn x * 1 + neg_z: bf16x2 has no add before sm_90); exact here.
GN_DEVICE u32 dq_sub(u32 x, u32 neg_z) {
  u32 d;
  asm("fma.rn." GN_X2 " %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(DQ_ONE), "r"(neg_z));
  return d;
}

// Both halves of a half2 set to its low (H = 0) or high (H = 1) half.
template <int H>
GN_DEVICE u32 dq_broadcast(u32 x) { return __byte_perm(x, x, H ? 0x3232 : 0x1010); }

// One packed word -> two m16n8k16 B fragments of (MAGIC + q): n8 tile 0 (column g) = {r[0], r[1]} from nibble
// pairs (bits 0/16, 8/24), tile 1 (column 8 + g) = {r[2], r[3]} from pairs (4/20, 12/28). DqZeros::word takes
// the zero point off; kernels that remove (MAGIC + zero) x the activations' sums once per group use it as is.
GN_DEVICE void dq_raw(u32 w, u32 (&r)[4]) {
  const u32 w8 = w >> 8;
#if GN_ACT_KIND == GN_ACT_F16
  r[2] = dq_lop(w, 0x00f000f0u);
  r[3] = dq_lop(w8, 0x00f000f0u);
#else
  r[2] = dq_lop(w >> 4, 0x000f000fu);
  r[3] = dq_lop(w >> 12, 0x000f000fu);
#endif
  r[0] = dq_lop(w, 0x000f000fu);
  r[1] = dq_lop(w8, 0x000f000fu);
}

// A lane's zero points for one group: z2 holds (MAGIC + zero of column g, MAGIC + zero of column 8 + g, the
// latter 16x for fp16), stored negated and broadcast.
struct DqZeros {
  u32 lo, hi;
  GN_DEVICE void set(u32 z2) {
    lo = dq_broadcast<0>(z2) ^ DQ_NEG;
    hi = dq_broadcast<1>(z2) ^ DQ_NEG;
  }
  // One packed word -> dq_raw's fragments minus the zero points: exact (q - zero).
  GN_DEVICE void word(u32 w, u32 (&r)[4]) const {
    dq_raw(w, r);
    r[0] = dq_sub(r[0], lo);
    r[1] = dq_sub(r[1], lo);
    r[2] = dq_sub(r[2], hi);
    r[3] = dq_sub(r[3], hi);
  }
};

// x * s on both halves (sm_90 has bf16x2 multiplies): the one rounding of a dequantised weight.
GN_DEVICE u32 dq_mul(u32 x, u32 s) {
  u32 d;
  asm("mul.rn." GN_X2 " %0, %1, %2;" : "=r"(d) : "r"(x), "r"(s));
  return d;
}

// Dequantised weights w = (q - zero) * scale, rounded once to 16 bits, for kernels that cannot keep a
// per-group accumulator (a wgmma accumulator is the whole tile): (q - zero) is exact as above, the multiply
// rounds. Both nibble pairs are shifted down here (fp16 too: 16 (q - zero) * scale / 16 could underflow into
// fp16's subnormals for small scales), so the fp16 second-pair zero point of the packed format (MAGIC + 16 z)
// is brought back to MAGIC + z once per group.
struct DqScaled {
  u32 zlo, zhi, slo, shi;
  // z2: as DqZeros::set; s_lo / s_hi: the scales (raw bits) of columns g and 8 + g.
  GN_DEVICE void set(u32 z2, u16 s_lo, u16 s_hi) {
    u32 hi = dq_broadcast<1>(z2);
#if GN_ACT_KIND == GN_ACT_F16
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(hi), "r"(0x2c002c00u), "r"(0x63806380u));  // h/16 + 960
#endif
    zlo = dq_broadcast<0>(z2) ^ DQ_NEG;
    zhi = hi ^ DQ_NEG;
    slo = (u32)s_lo * 0x10001u;
    shi = (u32)s_hi * 0x10001u;
  }
  // One packed word -> {column g, k pair 0-1}, {g, k 8-9}, {8 + g, k 0-1}, {8 + g, k 8-9} (DqZeros::word's order).
  GN_DEVICE void word(u32 w, u32 (&r)[4]) const {
    r[0] = dq_mul(dq_sub(dq_lop(w, 0x000f000fu), zlo), slo);
    r[1] = dq_mul(dq_sub(dq_lop(w >> 8, 0x000f000fu), zlo), slo);
    r[2] = dq_mul(dq_sub(dq_lop(w >> 4, 0x000f000fu), zhi), shi);
    r[3] = dq_mul(dq_sub(dq_lop(w >> 12, 0x000f000fu), zhi), shi);
  }
};
