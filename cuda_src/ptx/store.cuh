// Register -> global stores of two (four) adjacent output columns, per output kind (GN_OUT_KIND).
#pragma once
#include "../common.cuh"

GN_DEVICE u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
GN_DEVICE u32 pack_f16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

struct __align__(8) f32x2 { float x, y; };
struct __align__(8) s32x2 { int x, y; };

template <int OUT_KIND> struct Store;

template <> struct Store<GN_OUT_BF16> {
  static constexpr int BYTES = 2;
  static GN_DEVICE void four(u8* p, const float (&v)[4]) {
    *(uint2*)p = make_uint2(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]));
  }
  static GN_DEVICE void two(u8* p, float v0, float v1) { *(u32*)p = pack_bf16x2(v0, v1); }
  static GN_DEVICE void one(u8* p, float v) { *(u16*)p = (u16)pack_bf16x2(v, 0.f); }
};
template <> struct Store<GN_OUT_F16> {
  static constexpr int BYTES = 2;
  static GN_DEVICE void four(u8* p, const float (&v)[4]) {
    *(uint2*)p = make_uint2(pack_f16x2(v[0], v[1]), pack_f16x2(v[2], v[3]));
  }
  static GN_DEVICE void two(u8* p, float v0, float v1) { *(u32*)p = pack_f16x2(v0, v1); }
  static GN_DEVICE void one(u8* p, float v) { *(u16*)p = (u16)pack_f16x2(v, 0.f); }
};
template <> struct Store<GN_OUT_F32> {
  static constexpr int BYTES = 4;
  static GN_DEVICE void four(u8* p, const float (&v)[4]) { *(float4*)p = make_float4(v[0], v[1], v[2], v[3]); }
  static GN_DEVICE void two(u8* p, float v0, float v1) { *(f32x2*)p = f32x2{v0, v1}; }
  static GN_DEVICE void one(u8* p, float v) { *(float*)p = v; }
};
template <> struct Store<GN_OUT_S32> {
  static constexpr int BYTES = 4;
  static GN_DEVICE void four(u8* p, const int (&v)[4]) { *(int4*)p = make_int4(v[0], v[1], v[2], v[3]); }
  static GN_DEVICE void two(u8* p, int v0, int v1) { *(s32x2*)p = s32x2{v0, v1}; }
  static GN_DEVICE void one(u8* p, int v) { *(int*)p = v; }
};

// One fp16 / bf16 value (raw bits) as float, for OUT_KIND GN_OUT_F16 / GN_OUT_BF16.
template <int OUT_KIND> GN_DEVICE float to_float(u16 v);
template <> GN_DEVICE float to_float<GN_OUT_F16>(u16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
  return f;
}
template <> GN_DEVICE float to_float<GN_OUT_BF16>(u16 v) { return __uint_as_float((u32)v << 16); }

// sm_90: two 8x8 16-bit matrices, transposed, to shared memory. Lane l < 16 addresses row l % 8 of matrix l / 8;
// register i holds matrix i as an mma fragment (lane (g, t): row g, columns 2t, 2t + 1), and row r of the
// stored matrix receives the fragment's column r: a transposed accumulator tile becomes row-major output.
GN_DEVICE void stmatrix_x2_trans(u32 addr, u32 r0, u32 r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
               : "memory");
}
