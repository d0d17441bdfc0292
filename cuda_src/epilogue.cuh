// The epilogue every matmul kernel shares: fp32 scales (per tensor, per row of A, per column of B), bias, and
// the masked store of two adjacent outputs of one row, for output kind OUT.
#pragma once
#include "common.cuh"
#include "ptx/store.cuh"

template <int OUT>
struct Epilogue {
  static constexpr int KIND = OUT;
  u8* C;
  const float *scale_a, *scale_b, *bias;
  int M, N, ldc, scale_a_mode, scale_b_mode, has_bias;
  bool pair_ok;  // two-column vector stores need an even row stride and a pair-aligned base (out= views)

  GN_DEVICE static bool pairs_aligned(const u8* c, int ldc) {
    return (ldc % 2) == 0 && ((u64)c % (2 * Store<OUT>::BYTES)) == 0;
  }

  // The scale of one row: scale_a (per tensor or this row) times a per-tensor scale_b; 1 without scales.
  GN_DEVICE float row_scale(int row) const {
    float s = scale_a_mode ? scale_a[scale_a_mode == 2 ? gn_min(row, M - 1) : 0] : 1.f;
    return scale_b_mode == 1 ? s * scale_b[0] : s;
  }
  // has_bias: 1 = bias per column; 2 = bias per row (sm90_mm's swapped tiles, whose rows are C's columns: only their
  // epilogue reads it, through row_bias).
  // Whether column_terms can be other than (1, 1, 0, 0): a per-column scale_b or a bias. Without them an epilogue
  // may skip it (its clamped loads cost more than the rest of a value's epilogue).
  GN_DEVICE bool column_terms_needed() const { return scale_b_mode == 2 || has_bias == 1; }
  GN_DEVICE float row_bias(int row) const { return has_bias == 2 ? bias[gn_min(row, M - 1)] : 0.f; }
  // Per-column terms of columns col, col + 1: a per-column scale_b (else 1) and the bias (else 0).
  GN_DEVICE void column_terms(int col, float& s0, float& s1, float& b0, float& b1) const {
    const int c0 = gn_min(col, N - 1), c1 = gn_min(col + 1, N - 1);
    s0 = s1 = 1.f;
    b0 = b1 = 0.f;
    if (scale_b_mode == 2) {
      s0 = scale_b[c0];
      s1 = scale_b[c1];
    }
    if (has_bias == 1) {
      b0 = bias[c0];
      b1 = bias[c1];
    }
  }

  // The masked store of outputs (row, col) and (row, col + 1), already scaled. V: float, or int for
  // integer results (kept exact for int32 outputs).
  template <class V>
  GN_DEVICE void put2(int row, int col, V v0, V v1) const {
    typedef Store<OUT> St;
    if (row >= M || col >= N) return;
    const bool two = col + 1 < N;
    u8* p = C + ((i64)row * ldc + col) * St::BYTES;
    if (two && pair_ok) {
      St::two(p, v0, v1);
    } else {
      St::one(p, v0);
      if (two) St::one(p + St::BYTES, v1);
    }
  }

  // Raw sums of (row, col), (row, col + 1) -> scales, bias, store. Reads each scale where it is used: the
  // leanest form in registers (the mma.sync kernel's f16-accumulator tiles have none to spare).
  template <class V>
  GN_DEVICE void store2(int row, int col, V v0, V v1) const {
    if constexpr (OUT == GN_OUT_S32) {
      put2(row, col, (int)v0, (int)v1);
    } else {
      if (row >= M || col >= N) return;
      const bool two = col + 1 < N;
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
      put2(row, col, f0, f1);
    }
  }

  // Raw sums of (row, col .. col + 3), all inside N -> scales, bias, one vector store where the address allows
  // (else two pair stores). V as in store2.
  template <class V>
  GN_DEVICE void store4(int row, int col, const V (&v)[4]) const {
    typedef Store<OUT> St;
    if (row >= M) return;
    typedef typename Pick<OUT == GN_OUT_S32, int, float>::type O;
    O o[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) o[q] = (O)v[q];
    if constexpr (OUT != GN_OUT_S32) {
      const float rs = row_scale(row);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        o[q] *= rs;
        if (scale_b_mode == 2) o[q] *= scale_b[col + q];
        if (has_bias) o[q] += bias[col + q];
      }
    }
    u8* p = C + ((i64)row * ldc + col) * St::BYTES;
    if ((u64)p % (4 * St::BYTES) == 0) {
      St::four(p, o);
    } else {
      put2(row, col, o[0], o[1]);
      put2(row, col + 2, o[2], o[3]);
    }
  }
};

// Split-K partials hold raw accumulator sums: int32 for integer MMAs, fp32 otherwise (see mm_reduce.cuh).
constexpr int PARTIAL_KIND = GN_ACC_KIND == GN_ACC_S32 ? GN_OUT_S32 : GN_OUT_F32;
