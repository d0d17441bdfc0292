// Split-K reduction shared by the matmul families: partial [splits, M, N] holds raw accumulator sums (int32
// for integer MMAs, fp32 otherwise); one kernel sums them in split order and runs the shared epilogue.
// Included at the end of each family's kernel section (it reads that family's GN_ACC_KIND / GN_OUT_KIND).
#pragma once
#include "epilogue.cuh"

// Sums the split-K partials of two adjacent outputs per thread, in split order (deterministic), and applies
// the epilogue. Integer sums are taken in 64 bits and saturated to int32, as .satfinite would.
extern "C" __global__ void __launch_bounds__(256) mm_reduce(
    const u8* __restrict__ partial, u8* __restrict__ C, const float* __restrict__ scale_a,
    const float* __restrict__ scale_b, const float* __restrict__ bias, int M, int N, int ldc, int splits,
    int scale_a_mode, int scale_b_mode, int has_bias) {
  const int pairs = (N + 1) / 2;
  const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const int row = (int)(idx / pairs), col = 2 * (int)(idx % pairs);
  if (row >= M) return;
  const bool two = col + 1 < N;
  const Epilogue<GN_OUT_KIND> ep{C, scale_a, scale_b, bias, M, N, ldc, scale_a_mode, scale_b_mode, has_bias,
                                 Epilogue<GN_OUT_KIND>::pairs_aligned(C, ldc)};
  const i64 plane = (i64)M * N, at = (i64)row * N + col;
  if constexpr (GN_ACC_KIND == GN_ACC_S32) {
    const int* p = (const int*)partial;
    i64 s0 = 0, s1 = 0;
    for (int s = 0; s < splits; ++s) {
      s0 += p[s * plane + at];
      if (two) s1 += p[s * plane + at + 1];
    }
    ep.store2(row, col, sat_s32(s0), sat_s32(s1));
  } else {
    const float* p = (const float*)partial;
    float s0 = 0.f, s1 = 0.f;
    for (int s = 0; s < splits; ++s) {
      s0 += p[s * plane + at];
      if (two) s1 += p[s * plane + at + 1];
    }
    ep.store2(row, col, s0, s1);
  }
}
