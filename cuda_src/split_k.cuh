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

// One arrival of the `parts` that share a tile, by one thread after a barrier that follows every thread's
// partial stores: true for the last, which also re-arms the counter for the next launch. The atomic's release
// (cumulative over the stores the barrier ordered before it) publishes this CTA's partials and its acquire
// makes the earlier parts' visible to the last, whose threads read them after the next barrier: no full
// fences in every thread (membar.gl + L1 invalidation took ~4% of the decode kernel's stall samples).
GN_DEVICE bool ticket_arrive(int* ticket, int parts) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(old) : "l"(ticket) : "memory");
  if (old != parts - 1) return false;
  *ticket = 0;
  return true;
}
