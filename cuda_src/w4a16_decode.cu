// w4a16_decode: C = A @ dequant(W) (+ bias) for decode-sized M (<= 8 by default; 16 with MROWS = 16), sm_80+: the
// int4 weight streams from DRAM through per-warp shared-memory rings, is dequantised in registers and multiplied
// with mma.sync.
//
// At decode sizes a W4A16 GEMM is a weight stream: the kernel's job is to keep enough bytes in flight on every SM and
// to spend few instructions per weight. A CTA owns STRIPS 16-column strips of W and a K range (a split); each of its
// warps owns one strip and an equal share of the range in whole groups, and streams it through its own ring of DEPTH
// 64-value stages in shared memory (cp.async, DEPTH - 1 stages ahead; 16 bytes per lane and stage, in gn_mm's
// fragment-ordered packing, w4a16_formats.prepare): no CTA barrier in the main loop, and more bytes in flight than
// registers could hold; L2_AHEAD > 0 also prefetches the stage that many past the ring into L2 (more bytes in flight
// where a deeper ring would cost registers). The product is transposed, C^T[N, M] = W^T[N, K] . A^T[K, M]: the strip
// is the m16 side of m16n8k16 (word s of a lane is its A fragment for k16 step s, registers {r0, r2, r1, r3} of
// DqZeros::word) and M the n8 side (MROWS = 8: one mma per 256 weights at any M <= 8; 16: two). The CTA's activations
// (its K range, M rows) are copied to shared memory once, by cp.async, while the first weight stages fly; ldmatrix
// gives the B fragments (rows past M re-read row M - 1: they only feed columns of C^T that are never stored). Group
// scales fold in fp32 once per group, so there is no multiply per weight: fp16 feeds the tensor cores exact (q -
// zero) and folds d += e * scale (int4_dequant.cuh); bf16 feeds them (128 + q) straight from the lop3, with no
// subtraction per weight, sums the group's activations in one more mma against ones (sacc) and folds d += (e - (128 +
// zero) * sacc) * scale. (bf16's 128 costs ~4 bits of the fp32 sums, well inside what the output keeps; fp16's 1024
// would cost too many.)
// The WARPS_K partial sums of a strip meet in shared memory (summed in warp order); with gridDim.y > 1 splits
// of K the CTAs' partials meet in a workspace, where the last to arrive (an atomic ticket) adds them in split
// order: deterministic, one launch.

// Header section: editor defaults, replaced by codegen/w4a16_decode.j2.
#include "common.cuh"
#define GN_ACT_KIND 1
#define GN_HAS_ZEROS 0
#define GN_MMA_INSTR "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
constexpr int GROUP_SIZE = 128;  // 0: one group spans K (per-channel scales)
constexpr int MROWS = 8, STRIPS = 2, WARPS_K = 8, DEPTH = 4, L2_AHEAD = 0;
// ---- kernel ----
#include "int4_dequant.cuh"
#include "ptx/copy.cuh"
#include "ptx/store.cuh"
#include "ptx/tma.cuh"
#include "split_k.cuh"

namespace w4a16_dec {

constexpr int NT = MROWS / 8;                   // n8 tiles of activation rows
constexpr int THREADS = 32 * STRIPS * WARPS_K;
constexpr int COLS = 16 * STRIPS;               // output columns per CTA
constexpr int GPS = GROUP_SIZE == 32 ? 2 : 1;   // groups per 64-value stage
constexpr int SPG = GROUP_SIZE >= 64 ? GROUP_SIZE / 64 : 1;  // stages per group
// A ring slot: one stage of the strip (512 bytes of weight), then the 32-byte scale rows (and zero-point rows)
// of the groups that start there; per-channel scales (GROUP_SIZE 0) are read once instead.
constexpr int SLOT = 512 + (GROUP_SIZE != 0 ? GPS * 32 * (1 + GN_HAS_ZEROS) : 0);
constexpr bool SUM_FIX = GN_ACT_KIND == GN_ACT_BF16;  // see the top
constexpr int OUT = GN_ACT_KIND == GN_ACT_F16 ? GN_OUT_F16 : GN_OUT_BF16;

static_assert(MROWS == 8 || MROWS == 16, "MROWS: 8 or 16 activation rows");
static_assert(GROUP_SIZE == 0 || GROUP_SIZE % 32 == 0, "group size must be a multiple of 32");
static_assert(DEPTH >= 2 && DEPTH % SPG == 0, "a ring of whole groups, at least two stages");

// D = A * B + (FIRST ? 0 : D) on one m16n8k16 fragment (FIRST: a group's first step, no zeroing of d needed).
template <bool FIRST>
GN_DEVICE void mma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  if constexpr (FIRST)
    asm(GN_MMA_INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.f));
  else
    asm(GN_MMA_INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A lane's quantisation data of one group: the scales of its columns g and 8 + g (raw bits, lo | hi << 16) and
// their zero-point pair (MAGIC + zero, as DqZeros::set takes it).
struct Quant {
  u32 s, z;
};

// d += (e - c * sacc) * scale per row (rows g: the lo column, g + 8: the hi one; fp16's hi rows are 16x, DQ_HI
// undoes it; c = MAGIC + zero with SUM_FIX). The next group's first mma overwrites e and sacc.
GN_DEVICE void fold(float (&d)[NT][4], const float (&e)[NT][4], const float (&sacc)[NT][4], Quant q) {
  const float lo = to_float<OUT>((u16)q.s), hi = to_float<OUT>((u16)(q.s >> 16)) * DQ_HI;
  const float c_lo = SUM_FIX ? to_float<OUT>((u16)q.z) : 0.f, c_hi = SUM_FIX ? to_float<OUT>((u16)(q.z >> 16)) : 0.f;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float v = SUM_FIX ? e[nt][j] - (j < 2 ? c_lo : c_hi) * sacc[nt][j] : e[nt][j];
      d[nt][j] += v * (j < 2 ? lo : hi);
    }
}

}  // namespace w4a16_dec

using namespace w4a16_dec;

// A: [M, K] activations (lda elements per row, rows 16-byte aligned); W: the packed weight as uint4
// [k_stages][strips][32]; scales [strips][groups][16]; zeros [strips][groups][8] pairs (GN_HAS_ZEROS); bias [N]
// (has_bias); C: [M, N] contiguous. Grid: (ceil(strips / STRIPS), splits); split y takes the 64-value stages
// [y * split_stages, (y + 1) * split_stages) (whole groups; the host makes every split non-empty); ws /
// tickets: the split-K workspace ([x][split][M][COLS] fp32) and one counter per x (zero between launches).
extern "C" __global__ void __launch_bounds__(THREADS, 1) w4a16_decode(
    const u16* __restrict__ A, const uint4* __restrict__ W, const u16* __restrict__ scales,
    const u32* __restrict__ zeros, const u16* __restrict__ bias, u16* __restrict__ C, float* __restrict__ ws,
    int* __restrict__ tickets, int M, int N, int K, int lda, int k_stages, int strips, int groups,
    int split_stages, int z_bits, int has_bias) {
  extern __shared__ __align__(16) u8 smem[];
  __shared__ int last;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int strip = blockIdx.x * STRIPS + warp % STRIPS, kw = warp / STRIPS;
  const int cs0 = blockIdx.y * split_stages, cs1 = gn_min(k_stages, cs0 + split_stages);
  // This warp's stages [s0, s0 + n): an equal share of the CTA's groups (n may be 0).
  const int units = (cs1 - cs0 + SPG - 1) / SPG;
  const int s0 = cs0 + SPG * (kw * units / WARPS_K);
  const int n = strip < strips ? gn_min(cs1, cs0 + SPG * ((kw + 1) * units / WARPS_K)) - s0 : 0;
  const uint4* wsrc = W + ((i64)s0 * strips + strip) * 32 + lane;
  const i64 w_step = (i64)strips * 32;

#if __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent (sm_90): the previous kernel may still be finishing. Only L2
  // prefetches (this warp's first stages, the CTA's activations) may run before griddepcontrol.wait (L2 is the
  // point of coherence: a prefetch cannot make anyone read stale data, even of what that kernel is writing);
  // every load waits for that kernel to complete.
  if (lane % 8 == 0)
    for (int i = 0; i < gn_min(n, DEPTH); ++i) prefetch_l2(wsrc + i * w_step);
  if (tid < M) {  // and the activation rows of this CTA's K range (every CTA along N reads them), in whole
    // 16-byte units (rows are 16-byte aligned; a ragged tail is left to the loads)
    const int k0 = cs0 * 64, bytes = (gn_min(K, cs1 * 64) - k0) * 2 / 16 * 16;
    if (bytes > 0) bulk_prefetch_l2(A + (i64)tid * lda + k0, bytes);
  }
  asm volatile("griddepcontrol.wait;\ngriddepcontrol.launch_dependents;" ::: "memory");
#endif

  // The CTA's activations: rows [0, M) x K values [64 cs0, 64 cs1), a row every `row` values (16 bytes of
  // padding: the 8 rows of an ldmatrix fall in 8 different bank groups); K past the end reads zeros.
  const int kc = (cs1 - cs0) * 8, row = kc * 8 + 8;  // 16-byte chunks per row, row stride in values
  const u32 a0 = smem_u32(smem);
  for (int i = tid; i < M * kc; i += THREADS) {
    const int m = i / kc, c = i % kc, k = cs0 * 64 + c * 8;
    const int bytes = gn_max(0, gn_min(16, (K - k) * 2));
    cp_async_16(a0 + (m * row + c * 8) * 2, bytes ? A + (i64)m * lda + k : A, bytes);
  }
  cp_async_commit();

  // This warp's ring: DEPTH slots, DEPTH - 1 stages in flight. Each lane copies (and later reads) its own 16
  // bytes of weight; lanes 0 .. QL - 1 copy the 32-byte scale (zero-point) rows of a group's first stage, which
  // every lane reads: hence a __syncwarp between landing and reading.
  const u32 ring = a0 + (M * row * 2 + 15) / 16 * 16 + warp * DEPTH * SLOT;
  constexpr int QL = GROUP_SIZE != 0 ? 2 * GPS * (1 + GN_HAS_ZEROS) : 0;
  const int qh = (lane / 2) % GPS, qzp = lane / (2 * GPS);  // copier lane: group h of the stage, zero points?
  const int qg0 = GPS == 2 ? 2 * s0 + qh : s0 / SPG;  // the group this lane copies first
  const uint4* qsrc = (const uint4*)(qzp ? (const void*)zeros : (const void*)scales) + ((i64)strip * groups + qg0) * 2 +
                      lane % 2;
  const u32 qdst = ring + 512 + (qzp * GPS + qh) * 32 + (lane % 2) * 16;
  int qg = qg0;
  // Stage i into slot `slot`, for i = 0, 1, 2, ... in order (`first`: i starts a group). Past n nothing is
  // copied, but the (empty) group is still committed: the waits count one group per stage.
  auto fetch = [&](int slot, int i, bool first) {
    const bool live = i < n;
    cp_async_16_if(ring + slot * SLOT + lane * 16, wsrc, live);
    if (L2_AHEAD > 0 && lane % 8 == 0 && i + L2_AHEAD < n)  // one 128-byte line per 8 lanes
      prefetch_l2(wsrc + L2_AHEAD * w_step);
    wsrc += w_step;
    if (QL != 0 && first) {  // G = 32 with K padded to 64: a stage's second group may lie past the last: zeros
      cp_async_16_if(qdst + slot * SLOT, qsrc, live && lane < QL, GPS == 1 || qg < groups ? 16 : 0);
      qsrc += 2 * GPS;
      qg += GPS;
    }
    cp_async_commit();
  };
#pragma unroll
  for (int j = 0; j < DEPTH - 1; ++j) fetch(j, j, j % SPG == 0);
  Quant q[GPS];
#pragma unroll
  for (int h = 0; h < GPS; ++h) q[h] = Quant{0u, (u32)z_bits};
  if (GROUP_SIZE == 0 && n > 0) {  // per-channel: one scale (and zero point) per column for all of K
    q[0].s = (u32)scales[(i64)strip * 16 + g] | (u32)scales[(i64)strip * 16 + 8 + g] << 16;
    if (GN_HAS_ZEROS) q[0].z = zeros[(i64)strip * 8 + g];
  }
  cp_async_wait<DEPTH - 1>();  // the activations (the oldest group)
  __syncthreads();

  // ldmatrix rows: MROWS = 8: matrices (step s, k 0-7), (s, 8-15), (s + 1, 0-7), (s + 1, 8-15) of rows 0-7;
  // 16: (s, rows 0-7, k 0-7), (s, 0-7, 8-15), (s, 8-15, 0-7), (s, 8-15, 8-15). Lane l addresses row l % 8 of
  // matrix l / 8.
  const int mat = lane / 8, m_lane = (NT == 2 ? 8 * (mat / 2) : 0) + lane % 8;
  const int k_lane = NT == 2 ? 8 * (mat % 2) : 16 * (mat / 2) + 8 * (mat % 2);
  const u32 a_lane = a0 + (gn_min(m_lane, M - 1) * row + (s0 - cs0) * 64 + k_lane) * 2;
  u32 ones[4] = {DQ_ONE, DQ_ONE, DQ_ONE, DQ_ONE};
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(ones[i]));  // kept in registers, not rebuilt per stage

  float d[NT][4] = {}, e[NT][4] = {}, sacc[NT][4] = {};
  DqZeros dz[GPS];
#pragma unroll
  for (int h = 0; h < GPS; ++h) dz[h].set(q[h].z);
  // Stage i, slot j of its block of DEPTH stages (a block starts a group, so j says where in its group the stage
  // is; both are compile-time after unrolling, and so is every branch on them below).
  auto stage = [&](const uint4& w, int i, int j) {
    const u32 words[4] = {w.x, w.y, w.z, w.w};
    const u32 a_st = a_lane + i * 128;
    u32 b[4];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if (NT == 2 || s % 2 == 0) ldmatrix_x4(b, a_st + s * 32);
      u32 r[4];
      if constexpr (SUM_FIX)
        dq_raw(words[s], r);
      else
        dz[GPS == 2 ? s / 2 : 0].word(words[s], r);
      const u32 a[4] = {r[0], r[2], r[1], r[3]};
      const bool first = GROUP_SIZE != 0 && (GPS == 2 ? s % 2 == 0 : s == 0 && j % SPG == 0);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const u32 bb[2] = {NT == 2 ? b[2 * nt] : b[2 * (s % 2)], NT == 2 ? b[2 * nt + 1] : b[2 * (s % 2) + 1]};
        if (first) {
          mma<true>(e[nt], a, bb);
          if (SUM_FIX) mma<true>(sacc[nt], ones, bb);
        } else {
          mma<false>(e[nt], a, bb);
          if (SUM_FIX) mma<false>(sacc[nt], ones, bb);
        }
      }
      if (GPS == 2 && s % 2 == 1) fold(d, e, sacc, q[s / 2]);
    }
    if (GPS == 1 && GROUP_SIZE != 0 && j % SPG == SPG - 1) fold(d, e, sacc, q[0]);  // the group's last stage
  };

  const u8* ring_p = smem + (ring - a0);
  auto block = [&](int i0, bool full) {  // full: no stage of the block lies past n
#pragma unroll
    for (int j = 0; j < DEPTH; ++j) {
      const int i = i0 + j;
      if (full || i < n) {
        cp_async_wait<DEPTH - 2>();  // stage i landed (this lane's copies) ...
        __syncwarp();                // ... and every lane's (the scale rows); slot j - 1 is free again
        const u8* slot = ring_p + j * SLOT;
        const uint4 w = *(const uint4*)(slot + lane * 16);
        if (GROUP_SIZE != 0 && j % SPG == 0) {  // a group starts: its scales (and zero points)
#pragma unroll
          for (int h = 0; h < GPS; ++h) {
            q[h].s = (u32)*(const u16*)(slot + 512 + h * 32 + g * 2) | (u32)*(const u16*)(slot + 528 + h * 32 + g * 2) << 16;
            if (GN_HAS_ZEROS) {
              q[h].z = *(const u32*)(slot + 512 + (GPS + h) * 32 + g * 4);
              if (!SUM_FIX) dz[h].set(q[h].z);
            }
          }
        }
        fetch((j + DEPTH - 1) % DEPTH, i + DEPTH - 1, (j + DEPTH - 1) % SPG == 0);
        stage(w, i, j);
      }
    }
  };
  int i0 = 0;
#pragma unroll 1
  for (; i0 + DEPTH <= n; i0 += DEPTH) block(i0, true);
  if (i0 < n) block(i0, false);
  if (GROUP_SIZE == 0) fold(d, e, sacc, q[0]);

  // The strip's WARPS_K partials -> shared memory [kw][MROWS][COLS] (the activations are no longer read).
  __syncthreads();
  float* red = (float*)smem;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      red[(kw * MROWS + 8 * nt + 2 * t + j % 2) * COLS + (warp % STRIPS) * 16 + g + 8 * (j / 2)] = d[nt][j];
  __syncthreads();

  const int col0 = blockIdx.x * COLS, splits = gridDim.y;
  float* mine = ws + ((i64)blockIdx.x * splits + blockIdx.y) * M * COLS;  // this split's [M][COLS] partial
  for (int i = tid; i < M * COLS; i += THREADS) {
    float v = 0.f;
#pragma unroll
    for (int k = 0; k < WARPS_K; ++k) v += red[(k * MROWS + i / COLS) * COLS + i % COLS];
    red[i] = v;  // each i is read above only by this thread
    if (splits > 1) __stcg(mine + i, v);
  }
  if (splits > 1) {
    __syncthreads();
    if (tid == 0) last = ticket_arrive(tickets + blockIdx.x, splits);
    __syncthreads();
    if (!last) return;
  }
  for (int i = tid; i < M * COLS; i += THREADS) {
    const int m = i / COLS, col = col0 + i % COLS;
    if (col >= N) continue;
    float v = 0.f;
    if (splits > 1) {
      const float* part = ws + (i64)blockIdx.x * splits * M * COLS + i;
      for (int s = 0; s < splits; ++s) v += __ldcg(part + (i64)s * M * COLS);
    } else {
      v = red[i];
    }
    if (has_bias) v += to_float<OUT>(bias[col]);
    Store<OUT>::one((u8*)(C + (i64)m * N + col), v);
  }
}
