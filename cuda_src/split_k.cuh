// Single-launch split-K fix-up shared by the W4A16 kernels: the last split of a tile adds every split's
// partial sums, in split order (deterministic), to finish the tile.
#pragma once
#include "common.cuh"

// r[0..3] = the sum of the `splits` partials of one float4 of accumulators: split s's sits at part[s * stride]
// (in L2, written with __stcg), except this split's own (`own`), which r holds on entry. Eight loads stay in
// flight at a time: a serial chain of L2 round trips would dominate decode. `bound`: a launch-wide upper bound
// of `splits` (a kernel parameter): a loop bounded by it keeps register-tight kernels from spilling.
GN_DEVICE void sum_splits(float* r, const float4* part, i64 stride, int splits, int own, int bound) {
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = 0; s0 < bound; s0 += 8) {
    float4 p[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int s = s0 + i;
      p[i] = s == own ? make_float4(r[0], r[1], r[2], r[3])
             : s < splits ? __ldcg(part + s * stride) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      sum.x += p[i].x;
      sum.y += p[i].y;
      sum.z += p[i].z;
      sum.w += p[i].w;
    }
  }
  r[0] = sum.x;
  r[1] = sum.y;
  r[2] = sum.z;
  r[3] = sum.w;
}
