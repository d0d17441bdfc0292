// The epilogue every matmul kernel shares: fp32 scales (per tensor, per row of A, per column of B), bias, and
// the masked store of two adjacent outputs of one row, for output kind OUT.
#pragma once
#include "common.cuh"
#include "ptx/store.cuh"

template <int OUT>
struct Epilogue {
  u8* C;
  const float *scale_a, *scale_b, *bias;
  int M, N, ldc, scale_a_mode, scale_b_mode, has_bias;
  bool pair_ok;  // two-column vector stores need an even row stride and a pair-aligned base (out= views)

  GN_DEVICE static bool pairs_aligned(const u8* c, int ldc) {
    return (ldc % 2) == 0 && ((u64)c % (2 * Store<OUT>::BYTES)) == 0;
  }

  // v0, v1: float, or int for integer results (kept exact for int32 outputs).
  template <class V>
  GN_DEVICE void store2(int row, int col, V v0, V v1) const {
    typedef Store<OUT> St;
    if (row >= M || col >= N) return;
    const bool two = col + 1 < N;
    u8* p = C + ((i64)row * ldc + col) * St::BYTES;
    if constexpr (OUT == GN_OUT_S32) {
      if (two && pair_ok) {
        St::two(p, (int)v0, (int)v1);
      } else {
        St::one(p, (int)v0);
        if (two) St::one(p + St::BYTES, (int)v1);
      }
    } else {
      float f0 = (float)v0, f1 = (float)v1;
      if (scale_a_mode) {
        const float sa = scale_a[scale_a_mode == 2 ? row : 0];
        f0 *= sa;
        f1 *= sa;
      }
      if (scale_b_mode == 1) {
        f0 *= scale_b[0];
        f1 *= scale_b[0];
      } else if (scale_b_mode == 2) {
        f0 *= scale_b[col];
        if (two) f1 *= scale_b[col + 1];
      }
      if (has_bias) {
        f0 += bias[col];
        if (two) f1 += bias[col + 1];
      }
      if (two && pair_ok) {
        St::two(p, f0, f1);
      } else {
        St::one(p, f0);
        if (two) St::one(p + St::BYTES, f1);
      }
    }
  }
};
