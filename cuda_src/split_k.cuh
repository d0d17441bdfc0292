// Single-launch split-K fix-up shared by the W4A16 kernels: the last split of a tile adds every split's
// partial sums, in split order (deterministic), to finish the tile.
#pragma once
#include "common.cuh"

// at(v) (v < V: 4 floats of this thread's sums, part `own`'s on entry) = the sum of the `parts` partials in part
// order (deterministic): part s's float4 v sits at part[s * stride + v * step], in L2 (written with __stcg; own's
// too: it is read back from there unless its turn comes in the first batch of parts, before at(v) changes).
// Float4s with live(v) false are left alone (their rows do not exist). The loads of a batch of B float4s x P
// parts fly together (B = min(V, 8), P = max(1, LOADS / V)): the fix-up costs ceil(V / B) x ceil(parts / P) L2
// round trips, where one per float4 dominated the last part's time in large tiles (16 for a 4096 x 4096 x 256
// W4A16 tile) and small tiles want all their parts at once. LOADS: the float4s the caller's registers can hold
// in flight. `bound`: a launch-wide upper bound of `parts` (a kernel parameter): a loop bounded by it keeps
// register-tight kernels from spilling.
template <int V, int LOADS, class At, class Live>
GN_DEVICE void sum_parts(At at, Live live, const float4* part, i64 stride, i64 step, int parts, int own,
                         int bound) {
  constexpr int B = V < 8 ? V : 8, P = LOADS / V > 1 ? LOADS / V : 1;
#pragma unroll
  for (int v0 = 0; v0 < V; v0 += B) {
    for (int s0 = 0; s0 < bound; s0 += P) {
      if (s0 >= parts) continue;
      float4 x[P][B];
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int i = 0; i < B; ++i)
          if ((P == 1 || s0 + p < parts) && v0 + i < V && live(v0 + i)) {
            const float* r = at(v0 + i);
            x[p][i] = s0 == 0 && p == own ? make_float4(r[0], r[1], r[2], r[3])
                                          : __ldcg(part + (s0 + p) * stride + (v0 + i) * step);
          }
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int s = s0 + p;
#pragma unroll
        for (int i = 0; i < B; ++i) {
          if ((P == 1 || s < parts) && v0 + i < V && live(v0 + i)) {
            float* r = at(v0 + i);
            r[0] = s == 0 ? x[p][i].x : r[0] + x[p][i].x;
            r[1] = s == 0 ? x[p][i].y : r[1] + x[p][i].y;
            r[2] = s == 0 ? x[p][i].z : r[2] + x[p][i].z;
            r[3] = s == 0 ? x[p][i].w : r[3] + x[p][i].w;
          }
        }
      }
    }
  }
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

// The tile's first part (split 0) in stream-K usually finishes its share last: the share ends the CTA's range, while
// the other parts' shares begin theirs. So it waits for the others instead of publishing its own sums: one thread
// polls the counter (acquire) until all `parts - 1` others have arrived, re-arms it, and returns true; the CTA then
// adds the published parts to its own, in part order (the same sums, bit for bit, as when another part is last). The
// wait is bounded (`polls`): where the others are late (not yet resident, say) it returns false and the part takes
// the ticket path (publish and arrive), so no CTA ever waits for one that cannot run.
GN_DEVICE bool others_arrived(int* ticket, int parts, int polls) {
  for (int i = 0; i < polls; ++i) {
    int arrived;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(arrived) : "l"(ticket) : "memory");
    if (arrived == parts - 1) {
      *ticket = 0;  // nobody else touches it in this launch: every other part has arrived
      return true;
    }
    __nanosleep(100);
  }
  return false;
}
