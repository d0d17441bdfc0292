// sm80_w4a16: C = A @ dequant(W) (+ bias) with mma.sync, int4 weights dequantised in registers (sm_80+).
//
// A: [M, K] fp16/bf16, K contiguous. W: gn_mm's fragment-ordered int4 layout (gn_mm/w4a16_formats.py,
// `prepare`): [K/64 stages][N/16 strips][32 lanes][4 words], where word s of a lane holds exactly the 8
// nibbles that lane needs as the two m16n8k16 B fragments (n8 tiles 2j, 2j + 1) of k16 step s: one 16-byte
// load per lane per strip and stage, no shuffles, and a CTA's strips of a stage are one contiguous block.
// Scales: [N/16][groups][16] (a lane reads its columns 2t, 2t + 1 when it folds a group); zero points:
// [N/16][groups][8][2] (a lane's B-fragment columns g, 8 + g in one 32-bit load).
//
// Pipeline: NUM_STAGES-deep cp.async ring of (A tile: BLOCK_M x 64 values, XOR-swizzled) + (W tile: BLOCK_N/16
// strips x 512 bytes) + (their scales / zero points) -> ldmatrix A fragments, LDS.128 weight words -> dequant
// (int4_dequant.cuh) -> mma.sync (f32 accumulation) -> bias -> masked stores. Split-K over gridDim.y for small M: each split writes its
// accumulators to a workspace in fragment order, and the last CTA of a tile to arrive (an atomic ticket) sums
// all splits in split order (deterministic) and runs the epilogue: one launch, no reduce kernel.

// Header section: defaults so that editors can parse this file. gn_mm replaces everything above the marker
// with a header rendered from codegen/sm80_w4a16.j2.
#include "common.cuh"
#define GN_ACT_KIND 0
#define GN_MMA_INSTR "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#define GN_HAS_ZEROS 0
constexpr int GROUP_SIZE = 128;  // 0: one group spans K (per-channel scales)
constexpr int BLOCK_M = 16, BLOCK_N = 64, NUM_WARP_M = 1, NUM_WARP_N = 4, NUM_STAGES = 4, MIN_BLOCKS = 1;
// ---- kernel ----
#include "int4_dequant.cuh"
#include "ptx/copy.cuh"
#include "ptx/mma.cuh"
#include "ptx/store.cuh"
#include "split_k.cuh"

namespace w4a16 {

constexpr int NUM_THREADS = NUM_WARP_M * NUM_WARP_N * 32;
constexpr int WARP_M = BLOCK_M / NUM_WARP_M;
constexpr int WARP_N = BLOCK_N / NUM_WARP_N;
constexpr int MI = WARP_M / 16;           // m16 fragments per warp
constexpr int NS = WARP_N / 16;           // 16-column weight strips per warp
constexpr int NT = 2 * NS;                // n8 fragments per warp
constexpr int STAGE_K = 64;               // K values per stage: 128 bytes of A per row, 4 k16 steps
constexpr int GROUPS_PER_STAGE = GROUP_SIZE == 32 ? 2 : 1;  // G = 32: k16 steps 0-1 and 2-3 differ
constexpr int CTA_STRIPS = BLOCK_N / 16;
constexpr int A_TILE = BLOCK_M * 128;
constexpr int W_TILE = CTA_STRIPS * 512;
constexpr int S_TILE = CTA_STRIPS * GROUPS_PER_STAGE * 32;  // per strip and group: 16 scales (or zero pairs)
constexpr int STAGE_BYTES = A_TILE + W_TILE + S_TILE * (GN_HAS_ZEROS ? 2 : 1);
constexpr int OUT = GN_ACT_KIND == GN_ACT_F16 ? GN_OUT_F16 : GN_OUT_BF16;

static_assert(WARP_M % 16 == 0 && WARP_N % 16 == 0, "warp tile must be a multiple of 16x16");
static_assert(GROUP_SIZE == 0 || GROUP_SIZE % 32 == 0, "group size must be a multiple of 32");
static_assert(NUM_STAGES >= 2, "need at least two stages");

typedef Mma<GN_ACC_F32> MmaOp;

// 128-byte A rows: chunk c of row r sits at chunk c ^ (r % 8), so the 8 rows of one ldmatrix hit 8 bank groups.
GN_DEVICE u32 a_offset(int row, int chunk) { return row * 128 + ((chunk ^ (row % 8)) << 4); }

// One stage: A rows [m0, m0 + BLOCK_M) x K values [64 kt, 64 kt + 64) and the CTA's weight strips at stage kt.
// Rows past M, K past the end and strips past N arrive as zeros (cp.async src-size 0 or short).
// Zeros in the A rows of every stage slot that lie past M (the MMAs read them; no load ever writes them).
GN_DEVICE void zero_dead_rows(u8* smem, int M, int m0, int tid) {
  const int rows = gn_max(0, gn_min(BLOCK_M, M - m0));
  for (int i = rows * 8 + tid; i < BLOCK_M * 8; i += NUM_THREADS)
#pragma unroll
    for (int s = 0; s < NUM_STAGES; ++s) *(uint4*)(smem + s * STAGE_BYTES + i * 16) = make_uint4(0, 0, 0, 0);
}

// The group of k16 step `step` of stage kt (clamped: the K padding past the last group reads zeros of A).
GN_DEVICE int group_of(int kt, int step, int groups) {
  if constexpr (GROUP_SIZE == 0) return 0;
  return gn_min((kt * STAGE_K + step * 16) / GROUP_SIZE, groups - 1);
}

// One stage: A rows [m0, m0 + BLOCK_M) x K values [64 kt, 64 kt + 64), the CTA's weight strips at stage kt,
// and their scales (and zero points) of the stage's groups: every operand a stage needs arrives through the
// same cp.async ring, NUM_STAGES - 1 stages ahead (a scale read from global at use would stall on DRAM).
GN_DEVICE void load_stage(u32 dst, const u8* A, const uint4* W, const uint4* S, const uint4* Z, int lda, int M,
                          int m0, int k_bytes, int strip0, int strips, int k_stages, int groups, int kt, int tid) {
  // Rows past M were zeroed once (zero_dead_rows) and are never copied: decode (M = 1) copies one row.
  const int rows = gn_min(BLOCK_M, M - m0);
  for (int i = tid; i < rows * 8; i += NUM_THREADS) {
    const int row = i / 8, chunk = i % 8, k = kt * 128 + chunk * 16;
    const int bytes = gn_max(0, gn_min(16, k_bytes - k));
    const u8* src = bytes ? A + (i64)(m0 + row) * lda + k : A;
    cp_async_16(dst + a_offset(row, chunk), src, bytes);
  }
#pragma unroll
  for (int i = tid; i < (BLOCK_N / 16) * 32; i += NUM_THREADS) {
    const int strip = strip0 + i / 32;
    const bool ok = strip < strips;
    const uint4* src = ok ? W + ((i64)kt * strips + strip) * 32 + i % 32 : W;
    cp_async_16(dst + A_TILE + i * 16, src, ok ? 16 : 0);
  }
  // Scales (then zero points): 2 chunks per (strip, group); chunk i -> strip i / (2 GPS), group slot (i / 2) % GPS.
#pragma unroll
  for (int i = tid; i < (GN_HAS_ZEROS ? 2 : 1) * CTA_STRIPS * GROUPS_PER_STAGE * 2; i += NUM_THREADS) {
    const int part = i / (CTA_STRIPS * GROUPS_PER_STAGE * 2), c = i % (CTA_STRIPS * GROUPS_PER_STAGE * 2);
    const int strip = gn_min(strip0 + c / (2 * GROUPS_PER_STAGE), strips - 1);
    const int group = group_of(kt, 2 * ((c / 2) % GROUPS_PER_STAGE), groups);
    const uint4* src = (part ? Z : S) + ((i64)strip * groups + group) * 2 + c % 2;
    cp_async_16(dst + A_TILE + W_TILE + i * 16, src, 16);
  }
}

// A fragments (ldmatrix) and dequantised weight fragments of k16 step `step` of a stage.
GN_DEVICE void fragments(u32 (&af)[MI][4], u32 (&bf)[NS][4], u32 stage, const uint4 (&wv)[NS],
                         const DqZeros (&dq)[NS][GROUPS_PER_STAGE], int step, int a_row, int a_half) {
#pragma unroll
  for (int i = 0; i < MI; ++i) ldmatrix_x4(af[i], stage + a_offset(a_row + i * 16, 2 * step + a_half));
#pragma unroll
  for (int j = 0; j < NS; ++j) {
    const u32 w = step == 0 ? wv[j].x : step == 1 ? wv[j].y : step == 2 ? wv[j].z : wv[j].w;
    dq[j][GROUPS_PER_STAGE == 2 ? step / 2 : 0].word(w, bf[j]);
  }
}

// The end of a group: acc += scale * gacc per column (fp32), gacc = 0. Lane (g, t) holds columns 2t, 2t + 1 of
// each n8 tile; the stage's scale tile has each strip's 16 columns of group slot q in order (32 bytes).
GN_DEVICE void fold(float (&acc)[MI][NT][4], float (&gacc)[MI][NT][4], const u8* stile, int warp_n, int q, int t) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const u32 s2 = *(const u32*)(stile + ((warp_n * NS + j / 2) * GROUPS_PER_STAGE + q) * 32 + (j % 2) * 16 + t * 4);
    const float hi = j % 2 ? DQ_HI : 1.f;  // fp16's second-pair values are 16 (q - zero)
    const float s0 = to_float<OUT>((u16)(s2 & 0xffff)) * hi, s1 = to_float<OUT>((u16)(s2 >> 16)) * hi;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      acc[i][j][0] += s0 * gacc[i][j][0];
      acc[i][j][1] += s1 * gacc[i][j][1];
      acc[i][j][2] += s0 * gacc[i][j][2];
      acc[i][j][3] += s1 * gacc[i][j][3];
#pragma unroll
      for (int r = 0; r < 4; ++r) gacc[i][j][r] = 0.f;
    }
  }
}

}  // namespace w4a16

using namespace w4a16;

// A: activations (byte pointer, row stride lda bytes); W, S, Z: packed weight, scales, zero points (Z unused
// without zero points: z_bits is MAGIC + zp_bias in both halves instead); bias: [N] in the activation dtype
// (has_bias); C: [M, N] contiguous. ws / tickets: split-K workspace and per-tile counters (zero between calls:
// the last CTA of a tile resets its counter). k_stages: K / 64 rounded up (the packed layout's stage count).
extern "C" __global__ void __launch_bounds__(NUM_THREADS, MIN_BLOCKS) sm80_w4a16(
    const u8* __restrict__ A, const uint4* __restrict__ W, const uint4* __restrict__ S, const uint4* __restrict__ Z,
    const u16* __restrict__ bias, u8* __restrict__ C, float4* __restrict__ ws, int* __restrict__ tickets, int M,
    int N, int K, int lda, int k_stages, int groups, int z_bits, int has_bias) {
  extern __shared__ __align__(128) u8 smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / NUM_WARP_N, warp_n = warp % NUM_WARP_N;
  const int g = lane / 4, t = lane % 4;

  // Consecutive CTAs take consecutive M tiles of one column block: the weight tile is read once from DRAM.
  const int grid_m = (M + BLOCK_M - 1) / BLOCK_M;
  const int tile = blockIdx.x, tile_m = tile % grid_m, tile_n = tile / grid_m;
  const int m0 = tile_m * BLOCK_M, n0 = tile_n * BLOCK_N;
  const int strips = (N + 15) / 16, strip0 = n0 / 16;

  const int per_split = (k_stages + gridDim.y - 1) / gridDim.y;
  const int kt0 = blockIdx.y * per_split;  // the host makes every split non-empty
  const int k_tiles = gn_min(per_split, k_stages - kt0);
  const int k_bytes = K * 2;
  const u32 smem0 = smem_u32(smem);

  // gacc: the current group's sums of a * (q - zero); acc: the scaled sums of the groups already folded.
  float acc[MI][NT][4], gacc[MI][NT][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = gacc[i][j][r] = 0.f;

  zero_dead_rows(smem, M, m0, tid);  // ordered before any MMA by the first barrier of the K loop
#pragma unroll
  for (int s = 0; s < NUM_STAGES - 1; ++s) {
    if (s < k_tiles)
      load_stage(smem0 + s * STAGE_BYTES, A, W, S, Z, lda, M, m0, k_bytes, strip0, strips, k_stages, groups,
                 kt0 + s, tid);
    cp_async_commit();
  }

  // ldmatrix.x4 of an m16k16 A fragment: lanes 0-15 address rows, lanes 16-31 the same rows' next chunk.
  const int a_row = warp_m * WARP_M + lane % 16, a_half = lane / 16;

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<NUM_STAGES - 2>();
    __syncthreads();  // stage kt has landed, and every warp is done with the slot the next load reuses
    if (kt + NUM_STAGES - 1 < k_tiles)
      load_stage(smem0 + ((kt + NUM_STAGES - 1) % NUM_STAGES) * STAGE_BYTES, A, W, S, Z, lda, M, m0, k_bytes,
                 strip0, strips, k_stages, groups, kt0 + kt + NUM_STAGES - 1, tid);
    cp_async_commit();

    const u32 stage = smem0 + (kt % NUM_STAGES) * STAGE_BYTES;
    const u8* wtile = smem + (kt % NUM_STAGES) * STAGE_BYTES + A_TILE;
    uint4 wv[NS];
#pragma unroll
    for (int j = 0; j < NS; ++j) wv[j] = *(const uint4*)(wtile + ((warp_n * NS + j) * 32 + lane) * 16);
    // Lane (g, t) reads the zero-point pair (g, 8 + g) of each of its strips' groups (4 lanes broadcast).
    const u8* stile = wtile + W_TILE;
    DqZeros dq[NS][GROUPS_PER_STAGE];
#pragma unroll
    for (int j = 0; j < NS; ++j)
#pragma unroll
      for (int q = 0; q < GROUPS_PER_STAGE; ++q)
        dq[j][q].set(GN_HAS_ZEROS ? *(const u32*)(stile + S_TILE + (((warp_n * NS + j) * GROUPS_PER_STAGE + q) * 8 + g) * 4)
                                  : (u32)z_bits);
    // Where this stage closes a group (groups of 64 and 128 values start on stage boundaries).
    const int kg = kt0 + kt;
    const bool closes = GROUP_SIZE == 32 || GROUP_SIZE == 64 || (GROUP_SIZE == 128 && kg % 2 == 1) ||
                        kt == k_tiles - 1;

    // Software pipeline over the 4 k16 steps: step + 1's A fragments and dequantised weights are produced
    // before step's MMAs are issued (mma / ldmatrix are volatile asm: program order is issue order).
    u32 af[2][MI][4], bf[2][NS][4];
    fragments(af[0], bf[0], stage, wv, dq, 0, a_row, a_half);
#pragma unroll
    for (int step = 0; step < 4; ++step) {
      if (step < 3) fragments(af[(step + 1) % 2], bf[(step + 1) % 2], stage, wv, dq, step + 1, a_row, a_half);
#pragma unroll
      for (int j = 0; j < NS; ++j) {
        const u32 b0[2] = {bf[step % 2][j][0], bf[step % 2][j][1]}, b1[2] = {bf[step % 2][j][2], bf[step % 2][j][3]};
#pragma unroll
        for (int i = 0; i < MI; ++i) {
          MmaOp::run(gacc[i][2 * j], af[step % 2][i], b0);
          MmaOp::run(gacc[i][2 * j + 1], af[step % 2][i], b1);
        }
      }
      if (GROUP_SIZE == 32 && step == 1) fold(acc, gacc, stile, warp_n, 0, t);
      if (step == 3 && closes) fold(acc, gacc, stile, warp_n, GROUPS_PER_STAGE - 1, t);
    }
  }
  cp_async_wait<0>();

  if (gridDim.y > 1) {
    // Split-K: publish this split's sums, take a ticket; the last split of the tile sums them all in order.
    constexpr int V = MI * NT;  // float4s per thread
    float4* mine = ws + (i64)tile * gridDim.y * V * NUM_THREADS;
    // Only fragments whose row g exists are published and read back (decode: 1 row of 16).
    const int frag_row = m0 + warp_m * WARP_M + g;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        if (frag_row + i * 16 < M) __stcg(mine + ((i64)blockIdx.y * V + i * NT + j) * NUM_THREADS + tid,
               make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]));
    __syncthreads();
    __shared__ int last;
    if (tid == 0) last = ticket_arrive(tickets + tile, gridDim.y);
    __syncthreads();
    if (!last) return;
    sum_parts<V, 8>([&](int v) { return acc[v / NT][v % NT]; }, [&](int v) { return frag_row + v / NT * 16 < M; },
                 mine + tid, (i64)V * NUM_THREADS, NUM_THREADS, gridDim.y, blockIdx.y, gridDim.y);
  }

  // Epilogue from registers: thread (g, t) holds rows g, g + 8 and columns 2t, 2t + 1 of each fragment. N is a
  // multiple of 8, so a column pair is entirely in or out, and C rows are 4-byte aligned.
  typedef Store<OUT> St;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int col = n0 + warp_n * WARP_N + j * 8 + 2 * t;
    if (col >= N) continue;
    float b0 = 0.f, b1 = 0.f;
    if (has_bias) {
      const u32 bb = *(const u32*)(bias + col);
      b0 = to_float<OUT>((u16)(bb & 0xffff));
      b1 = to_float<OUT>((u16)(bb >> 16));
    }
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + warp_m * WARP_M + i * 16 + g + 8 * h;
        if (row < M) St::two(C + ((i64)row * N + col) * 2, acc[i][j][2 * h] + b0, acc[i][j][2 * h + 1] + b1);
      }
  }
}
