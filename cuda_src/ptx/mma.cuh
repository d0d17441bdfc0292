// One warp-level mma.sync on an m16n8 fragment, for every TypeAB/TypeAcc pair.
// The instruction string (GN_MMA_INSTR) comes from the Python variant table, the single place that maps
// dtypes to PTX. Every variant reads A as 4 registers and B as 2 registers covering 32 bytes of K
// (k8 tf32, k16 16-bit, k32 8-bit, k64 4-bit), so one ldmatrix layout serves them all.
#pragma once
#include "../common.cuh"

template <int ACC_KIND> struct Mma;

template <> struct Mma<GN_ACC_F32> {
  static constexpr int REGS = 4;
  typedef float Reg;
  static GN_DEVICE void run(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(GN_MMA_INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  // Values of half h (0: row g, 1: row g + 8), columns 2t and 2t + 1.
  static GN_DEVICE void pair(const float (&d)[4], int h, float& v0, float& v1) { v0 = d[2 * h]; v1 = d[2 * h + 1]; }
};

template <> struct Mma<GN_ACC_S32> {
  static constexpr int REGS = 4;
  typedef int Reg;
  static GN_DEVICE void run(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(GN_MMA_INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static GN_DEVICE void pair(const int (&d)[4], int h, float& v0, float& v1) {
    v0 = (float)d[2 * h];
    v1 = (float)d[2 * h + 1];
  }
};

// f16 accumulation: each register packs two halves (half the registers of f32).
template <> struct Mma<GN_ACC_F16> {
  static constexpr int REGS = 2;
  typedef u32 Reg;
  static GN_DEVICE void run(u32 (&d)[2], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(GN_MMA_INSTR " {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                 : "+r"(d[0]), "+r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static GN_DEVICE void pair(const u32 (&d)[2], int h, float& v0, float& v1) {
    u16 lo = (u16)(d[h] & 0xffff), hi = (u16)(d[h] >> 16);
    asm("cvt.f32.f16 %0, %1;" : "=f"(v0) : "h"(lo));
    asm("cvt.f32.f16 %0, %1;" : "=f"(v1) : "h"(hi));
  }
};
