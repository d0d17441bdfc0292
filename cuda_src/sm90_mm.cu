// sm90_mm: C = epilogue(A @ B) with wgmma fed by TMA, for every wgmma dtype of sm_90a.
//
// A is [M, K] with K contiguous; B is held as [N, K] with K contiguous (a weight passed as w.t()); both are
// read through byte-typed TMA tensor maps (x = byte of K, y = row), so the kernel never looks at element
// types: every wgmma variant consumes 32 bytes of K per instruction from 128-byte swizzled rows.
//
// Warp specialisation in a persistent CTA: warpgroup 0 is the producer (its first warp walks the k-tiles, one
// elected lane issues TMA loads into a NUM_STAGES ring guarded by "full" and "empty" mbarriers), warpgroups
// 1..CONSUMERS (1-3) each own 64 rows of the BLOCK_M x BLOCK_N tile, issue wgmma from shared memory, and write their
// accumulators through the shared register epilogue (scales, bias, masked stores). The ring runs across tiles, so
// the producer fetches the next tile while consumers finish the current one.
//
// CLUSTER_M = 2: two CTAs of a cluster own vertically adjacent tiles with the same B tile. Each loads its own
// A and one half of B, multicast into both CTAs: L2 -> SM traffic per tile drops by a third. A slot is
// refilled only when the consumers of both CTAs have released it (they arrive on both CTAs' barriers).
// CLUSTER_N = 2 or 4, the mirror image: the CTAs own horizontally adjacent tiles with the same A tile, each loads
// its own B and one part of A, multicast into all (few rows, many columns: A is the larger share of a stage).
//
// SWAP_AB: the host passes the [N, K] weight as A and the [M, K] activations as B, so the kernel computes C^T = B A^T:
// its tile rows run along C's columns and its BLOCK_N (any multiple of 16) along C's rows, which fits token counts that
// 64-row blocks would pad (M = 320: two 160-column tiles instead of three 128-row ones). Only the epilogue differs: it
// writes the accumulators transposed into the staging chunks (stmatrix .trans for 16-bit outputs) and TMA-stores them
// as rows of C. Scales and bias come swapped by the host: a per-row scale of the kernel's tile is per column of C.
//
// GN_STORE: the one epilogue a build holds (the host picks the build per call): STORE_TMA / STORE_TMA_COLS (through
// shared memory and TMA stores, C suiting a tensor map and no K split; _COLS: with the per-column terms of the tile, a
// per-column scale or a bias), STORE_DIRECT (masked stores from registers: any C) or STORE_PARTIAL (raw sums of a K
// split into the workspace, and the mm_reduce kernel that finishes them). One build held them all: the register-path
// stores, unrolled over a 64 x 256 tile per thread, took ~80% of its NVRTC time, the column terms most of the rest
// (NOTES sm90 79).
//
// CLUSTER_K > 1 (decode-sized problems): the CTAs of a cluster share one output tile and split its K; each
// leaves its raw sums in its own (drained) ring, and after a cluster barrier CTA r adds column slice r of
// every CTA's sums through distributed shared memory, in rank order, and runs the epilogue on it. Split-K
// in one launch, without a workspace or L2 round trips.

// Header section: editor defaults, replaced by codegen/sm90_mm.j2.
#include "common.cuh"
#define GN_ACC_KIND GN_ACC_F32
#define GN_OUT_KIND GN_OUT_BF16
#define GN_WGMMA_REGS 128
#define GN_WGMMA(d, desc_a, desc_b, scale_d)
#define GN_WGMMA_TOUCH(d)
constexpr int BLOCK_M = 128, BLOCK_N = 256, NUM_STAGES = 4, GROUP_M = 8, CLUSTER_M = 1, CLUSTER_N = 1, CLUSTER_K = 1;
constexpr bool SWAP_AB = false;
#define GN_STORE 0  // STORE_TMA (see GN_STORE above)
#define GN_CLUSTER  // __cluster_dims__(CLUSTER_M * CLUSTER_N * CLUSTER_K, 1, 1) when that is > 1
// ---- kernel ----
#include "epilogue.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"

namespace sm90 {

constexpr int ROW_BYTES = 128;                  // K bytes per stage: one 128-byte swizzle row
constexpr int KSTEPS = ROW_BYTES / 32;          // wgmmas per stage
constexpr int CONSUMERS = BLOCK_M / 64;         // one m64 wgmma row block per consumer warpgroup
constexpr int NUM_THREADS = 128 * (1 + CONSUMERS);
constexpr int A_TILE = BLOCK_M * ROW_BYTES, B_TILE = BLOCK_N * ROW_BYTES;
constexpr int STAGE_BYTES = A_TILE + B_TILE;
// Registers per thread after setmaxnreg: 128 x PRODUCER_REGS + 128 x CONSUMERS x CONSUMER_REGS <= 64 K.
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = CONSUMERS == 3 ? 152 : CONSUMERS == 2 ? 232 : 240;
constexpr int B_PART = B_TILE / CLUSTER_M;      // bytes of B each CTA of a cluster loads (and multicasts)
constexpr int A_PART = A_TILE / CLUSTER_N;      // bytes of A likewise
constexpr int MULTICAST = CLUSTER_M * CLUSTER_N;  // CTAs that fill each other's stages (1: none)
// TMA-store epilogue: each consumer stages its 64 rows in chunks of 128-byte rows (64 bf16 / 32 f32 columns),
// double-buffered, so a chunk's store drains while the next is written and the next tile starts.
constexpr int OUT_BYTES = Store<GN_OUT_KIND>::BYTES;
constexpr int CHUNK_COLS = 128 / OUT_BYTES, CHUNK_BYTES = 64 * 128, CHUNKS = BLOCK_N / CHUNK_COLS;
constexpr int STORE_TMA = 0, STORE_DIRECT = 1, STORE_PARTIAL = 2, STORE_TMA_COLS = 3;  // GN_STORE (the header comment)
constexpr bool TMA_STORES = GN_STORE == STORE_TMA || GN_STORE == STORE_TMA_COLS, COLS = GN_STORE == STORE_TMA_COLS;
// STORE_TMA: whole chunks through TMA (columns past the last one stored directly), so a chunk at least; K splits store
// partials. CLUSTER_K tiles store their slices directly (reduce_in_cluster), builds of them are STORE_DIRECT.
static_assert(GN_STORE == STORE_DIRECT || (CLUSTER_K == 1 && (TMA_STORES ? SWAP_AB || CHUNKS > 0 : !SWAP_AB)),
              "GN_STORE: TMA stores need a whole chunk (or SWAP_AB); K-split partials no SWAP_AB; CLUSTER_K stores directly");
// SWAP_AB: a consumer's 64 tile rows are 64 columns of C, T_HALVES 128-byte spans of a C row (1 for 16-bit outputs, 2
// for 4-byte ones); a chunk holds T_ROWS rows of C (64 or 32), stored in boxes of T_BOX rows (a tile's BLOCK_N rows
// of C are a multiple of 16, not of the chunk).
constexpr int T_HALVES = 64 * OUT_BYTES / 128, T_ROWS = CHUNK_BYTES / (128 * T_HALVES), T_BOX = 16;
constexpr int T_CHUNKS = (BLOCK_N + T_ROWS - 1) / T_ROWS;
static_assert(!SWAP_AB || (CLUSTER_M * CLUSTER_N * CLUSTER_K == 1 && BLOCK_N % T_BOX == 0),
              "SWAP_AB: no clusters; tile columns (rows of C) in whole 16-row boxes");
constexpr int C_STAGE_BYTES = CONSUMERS * 2 * CHUNK_BYTES;
constexpr bool SWAP_GROUPS = OUT_BYTES == 4;  // see store_tile_tma
static_assert(!SWAP_GROUPS || CHUNK_COLS == 32, "4-byte outputs: 4 groups of 8 columns per chunk");

static_assert(BLOCK_M % 64 == 0 && CONSUMERS >= 1 && CONSUMERS <= 3, "BLOCK_M must be 64, 128 or 192");
// Named barriers: 1 + c per consumer c (epilogue), 3 for all consumers (CLUSTER_K): three consumers take no CLUSTER_K.
static_assert(CONSUMERS < 3 || CLUSTER_K == 1, "192-row tiles: no CLUSTER_K");
static_assert(BLOCK_N % 16 == 0 && BLOCK_N <= 256, "BLOCK_N must be a multiple of 16, at most 256");
static_assert(CLUSTER_M == 1 || (CLUSTER_M == 2 && B_PART % 1024 == 0), "CLUSTER_M: 1, or 2 with 1 KB halves of B");
static_assert(CLUSTER_N == 1 || ((CLUSTER_N == 2 || CLUSTER_N == 4) && A_PART % 1024 == 0 && CLUSTER_M == 1),
              "CLUSTER_N: 1, or 2 / 4 with 1 KB parts of A, not with CLUSTER_M");
constexpr int CLUSTER = CLUSTER_M * CLUSTER_N * CLUSTER_K;  // CTAs per cluster
constexpr int SLICE = BLOCK_N / CLUSTER_K;            // CLUSTER_K: the columns each CTA reduces and stores
static_assert(CLUSTER_K == 1 || (MULTICAST == 1 && SLICE % 4 == 0 && GN_ACC_KIND != GN_ACC_F16 &&
                                 BLOCK_M * BLOCK_N * 4 <= NUM_STAGES * STAGE_BYTES),
              "CLUSTER_K: no B multicast, a column slice of whole quads per CTA, 4-byte sums that fit the ring");

#if GN_ACC_KIND == GN_ACC_F32
typedef float AccReg;
#elif GN_ACC_KIND == GN_ACC_S32
typedef int AccReg;
#else
typedef u32 AccReg;  // two packed f16 (columns 2t, 2t + 1 of one row)
#endif

// Tile t of the persistent sweep -> (tile_m, tile_n): GROUP_M row-tiles sweep the columns together (L2 reuse).
GN_DEVICE void raster(int t, int grid_m, int grid_n, int& tile_m, int& tile_n) {
  const int width = GROUP_M * grid_n, first_m = (t / width) * GROUP_M;
  const int group_rows = gn_min(grid_m - first_m, GROUP_M);
  tile_m = first_m + (t % width) % group_rows;
  tile_n = (t % width) / group_rows;
}

// The four accumulators of 8-column group j: (row, 8j + 2(l%4) + {0, 1}) in v[0..1], row + 8 in v[2..3].
// wgmma's m64nN layout: warp w of the warpgroup owns rows 16w..16w+15; lane l holds rows l/4 and l/4 + 8.
template <class V>
GN_DEVICE void group_values(const AccReg (&d)[GN_WGMMA_REGS], int j, V (&v)[4]) {
#if GN_ACC_KIND == GN_ACC_F16
  asm("{\n.reg .f16 a, b, c, d;\nmov.b32 {a, b}, %4;\nmov.b32 {c, d}, %5;\n"
      "cvt.f32.f16 %0, a;\ncvt.f32.f16 %1, b;\ncvt.f32.f16 %2, c;\ncvt.f32.f16 %3, d;\n}\n"
      : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "r"(d[2 * j]), "r"(d[2 * j + 1]));
#else
#pragma unroll
  for (int r = 0; r < 4; ++r) v[r] = (V)d[4 * j + r];
#endif
}

// One consumer's 64 x BLOCK_N accumulators -> C. Row scales are read once per tile, column terms once per
// column pair (shared by the thread's two rows).
// J0: the first 8-column group to store (store_tile_tma's columns past its last whole chunk).
template <int J0 = 0, class Ep>
GN_DEVICE void store_tile(const Ep& ep, const AccReg (&d)[GN_WGMMA_REGS], int row0, int col0) {
  if constexpr (GN_OUT_KIND == GN_OUT_S32) {
#pragma unroll
    for (int j = J0; j < BLOCK_N / 8; ++j) {
      int v[4];
      group_values(d, j, v);
      ep.put2(row0, col0 + 8 * j, v[0], v[1]);
      ep.put2(row0 + 8, col0 + 8 * j, v[2], v[3]);
    }
  } else {
    const float r0 = ep.row_scale(row0), r1 = ep.row_scale(row0 + 8);
#pragma unroll
    for (int j = J0; j < BLOCK_N / 8; ++j) {
      float v[4], s0, s1, b0, b1;
      group_values(d, j, v);
      ep.column_terms(col0 + 8 * j, s0, s1, b0, b1);
      ep.put2(row0, col0 + 8 * j, v[0] * r0 * s0 + b0, v[1] * r0 * s1 + b1);
      ep.put2(row0 + 8, col0 + 8 * j, v[2] * r1 * s0 + b0, v[3] * r1 * s1 + b1);
    }
  }
}

// One consumer's 64 x BLOCK_N results through shared memory and TMA stores (the host checked that C suits a
// tensor map). buf0: this consumer's two 8 KB chunk buffers (1024-byte aligned), taken in turn by every chunk this
// consumer stores, across tiles (`issued`: its chunks so far; restarting the turn at each tile let a tile of an odd
// chunk count refill the buffer its last chunk's store was still reading). Thread t == 0 issues and tracks the
// stores; a named barrier per consumer keeps the buffers' reuse in order. Chunk rows are 128-byte swizzled: 16-byte
// unit u of row r sits at u ^ (r % 8).
// COLS: per-column scales or a bias to apply. Without them (plain and per-tensor / per-row scaled outputs) a value
// costs one multiply, a pack and half a store: the general form's column loads and clamps made the epilogue ~1,600
// instructions per warp and tile, ~10% of a 4096^3 bf16 kernel with the tensor cores idle (NOTES sm90 30).
template <bool COLS, class Ep>
GN_DEVICE void store_tile_tma(const Ep& ep, const AccReg (&d)[GN_WGMMA_REGS], const TmaDesc* map_c, u32 buf0,
                              int c, int t, int row_base, int col_base, int& issued) {
  const int warp = t / 32, lane = t % 32;
  const int r0 = warp * 16 + lane / 4;  // rows r0 and r0 + 8 of the 64
  const float s_r0 = ep.row_scale(row_base + r0), s_r1 = ep.row_scale(row_base + r0 + 8);
#pragma unroll
  for (int q = 0; q < CHUNKS; ++q) {
    const u32 buf = buf0 + (issued % 2) * CHUNK_BYTES;
    if (issued >= 2) {  // the store issued from this buffer two chunks ago must have read it
      if (t == 0) bulk_wait_read<1>();
      named_barrier(1 + c, 128);
    }
#pragma unroll
    for (int jj = 0; jj < CHUNK_COLS / 8; ++jj) {
      // 4-byte outputs: lanes 2 and 3 of each quad store group jj ^ 2, so that a half-warp's 8-byte stores cover
      // eight distinct 16-byte units; in plain order they hit four units twice (ncu: 4 wavefronts per STS.64, not 2).
      const bool swap = SWAP_GROUPS && (lane & 2);
      const int j = q * (CHUNK_COLS / 8) + (swap ? jj ^ 2 : jj);  // this lane's 8-column group
      const int byte = (8 * (j % (CHUNK_COLS / 8)) + 2 * (lane % 4)) * OUT_BYTES;  // within the chunk's 128-byte row
      typedef typename Pick<GN_OUT_KIND == GN_OUT_S32, int, float>::type V;  // exact int32 outputs
      V v[4];
      float s0 = 1.f, s1 = 1.f, b0 = 0.f, b1 = 0.f;
      group_values(d, q * (CHUNK_COLS / 8) + jj, v);
      if constexpr (SWAP_GROUPS) {  // a select, not a register index that varies by lane (local memory)
        V w[4];
        group_values(d, q * (CHUNK_COLS / 8) + (jj ^ 2), w);
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = swap ? w[i] : v[i];
      }
      if constexpr (COLS && GN_OUT_KIND != GN_OUT_S32)
        ep.column_terms(col_base + 8 * j + 2 * (lane % 4), s0, s1, b0, b1);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        const u32 at = buf + r * 128 + ((((byte / 16) ^ (r % 8)) * 16) | (byte % 16));
        const float rs = h ? s_r1 : s_r0;
        if constexpr (GN_OUT_KIND == GN_OUT_S32) {
          asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(at), "r"((int)v[2 * h]), "r"((int)v[2 * h + 1]));
        } else if constexpr (GN_OUT_KIND == GN_OUT_F32) {
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(v[2 * h] * rs * s0 + b0),
                       "f"(v[2 * h + 1] * rs * s1 + b1));
        } else {
          const float f0 = v[2 * h] * rs * s0 + b0, f1 = v[2 * h + 1] * rs * s1 + b1;
          const u32 packed = GN_OUT_KIND == GN_OUT_BF16 ? pack_bf16x2(f0, f1) : pack_f16x2(f0, f1);
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(packed));
        }
      }
    }
    fence_proxy_async_smem();  // each writer's stores -> visible to the TMA engine
    named_barrier(1 + c, 128);
    if (t == 0) {
      tma_store_2d(map_c, buf, (col_base + q * CHUNK_COLS) * OUT_BYTES, row_base);  // a byte-typed map
      bulk_commit();
    }
    ++issued;
  }
  // Columns past the last whole chunk (e.g. 16 of a 144-column bf16 tile) go straight to global memory: a whole
  // tile of direct stores measured slower than the chunks' TMA stores (NOTES sm90 41).
  if constexpr (BLOCK_N % CHUNK_COLS != 0)
    store_tile<CHUNKS * (CHUNK_COLS / 8)>(ep, d, row_base + r0, col_base + 2 * (lane % 4));
}

// SWAP_AB: one consumer's 64 x BLOCK_N accumulators are C^T: tile row r is column row_base + r of C, tile column j row
// col_base + j. Through shared memory and TMA stores like store_tile_tma: a chunk holds T_ROWS rows of C x this
// consumer's 64 columns (T_HALVES 128-byte spans, each T_ROWS x 128 bytes, 128-byte swizzled). 16-bit outputs: a
// warp's values of one 8-column group form two 8 x 8 fragments (tile rows 16w..16w+7 and +8), which stmatrix .trans
// writes as 8 rows of C x 8 columns, 16 bytes each. 4-byte outputs: one 4-byte store per value; a store instruction's
// 32 lanes hit 8 rows x 4 words whose swizzled units differ, so 32 distinct banks.
// COLS as in store_tile_tma: here a per-column scale of the tile (per row of C); the tile's row terms (a per-row scale:
// per column of C, and the bias) are read once per tile.
template <bool COLS, class Ep>
GN_DEVICE void store_tile_swapped(const Ep& ep, const AccReg (&d)[GN_WGMMA_REGS], const TmaDesc* map_c, u32 buf0, int c,
                                  int t, int row_base, int col_base, int& issued) {
  const int warp = t / 32, lane = t % 32;
  const int r0 = warp * 16 + lane / 4;  // tile rows r0 and r0 + 8 of the 64: columns of C
  const float rs[2] = {ep.row_scale(row_base + r0), ep.row_scale(row_base + r0 + 8)};
  const float rb[2] = {ep.row_bias(row_base + r0), ep.row_bias(row_base + r0 + 8)};
#pragma unroll
  for (int q = 0; q < T_CHUNKS; ++q) {
    constexpr int LAST = BLOCK_N - (T_CHUNKS - 1) * T_ROWS;  // rows of C in the last chunk
    const int rows = q + 1 < T_CHUNKS ? T_ROWS : LAST;
    const u32 buf = buf0 + (issued % 2) * CHUNK_BYTES;
    if (issued >= 2) {  // the stores issued from this buffer two chunks ago must have read it
      if (t == 0) bulk_wait_read<1>();
      named_barrier(1 + c, 128);
    }
#pragma unroll
    for (int jj = 0; jj < T_ROWS / 8; ++jj) {
      if (jj >= rows / 8) break;
      const int j = q * (T_ROWS / 8) + jj;  // the tile's 8-column group: rows 8jj.. of the chunk
      typedef typename Pick<GN_OUT_KIND == GN_OUT_S32, int, float>::type V;
      V v[4];
      group_values(d, j, v);
      float s0 = 1.f, s1 = 1.f, b0 = 0.f, b1 = 0.f;  // b0, b1: no bias along the tile's columns (has_bias = 2)
      if constexpr (COLS && GN_OUT_KIND != GN_OUT_S32)
        ep.column_terms(col_base + 8 * j + 2 * (lane % 4), s0, s1, b0, b1);
      if constexpr (OUT_BYTES == 2) {
        const float f0 = v[0] * rs[0] * s0 + rb[0], f1 = v[1] * rs[0] * s1 + rb[0];
        const float f2 = v[2] * rs[1] * s0 + rb[1], f3 = v[3] * rs[1] * s1 + rb[1];
        const u32 lo = GN_OUT_KIND == GN_OUT_BF16 ? pack_bf16x2(f0, f1) : pack_f16x2(f0, f1);
        const u32 hi = GN_OUT_KIND == GN_OUT_BF16 ? pack_bf16x2(f2, f3) : pack_f16x2(f2, f3);
        const int r = 8 * jj + lane % 8, unit = 2 * warp + (lane / 8) % 2;  // lanes 16-31: addresses unused
        stmatrix_x2_trans(buf + r * 128 + ((unit ^ (r % 8)) << 4), lo, hi);
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = r0 + 8 * h, r = 8 * jj + 2 * (lane % 4) + e;  // C column (of 64), C row (of the chunk)
            const int byte = (col % 32) * 4;
            const u32 at = buf + (col / 32) * (T_ROWS * 128) + r * 128 + ((((byte / 16) ^ (r % 8)) * 16) | (byte % 16));
            if constexpr (GN_OUT_KIND == GN_OUT_S32)
              asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"((int)v[2 * h + e]));
            else
              asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(at), "f"(v[2 * h + e] * rs[h] * (e ? s1 : s0) + rb[h]));
          }
      }
    }
    fence_proxy_async_smem();  // each writer's stores -> visible to the TMA engine
    named_barrier(1 + c, 128);
    if (t == 0) {
#pragma unroll
      for (int hh = 0; hh < T_HALVES; ++hh)
        for (int b = 0; b < rows / T_BOX; ++b)
          tma_store_2d(map_c, buf + hh * (T_ROWS * 128) + b * (T_BOX * 128), (row_base + hh * CHUNK_COLS) * OUT_BYTES,
                       col_base + q * T_ROWS + b * T_BOX);
      bulk_commit();
    }
    ++issued;
  }
}

// SWAP_AB without TMA stores (C's rows not 16-byte aligned): one masked store per value, C[col][row].
template <class Ep>
GN_DEVICE void store_tile_swapped_direct(const Ep& ep, const AccReg (&d)[GN_WGMMA_REGS], int row0, int col0) {
  typedef Store<GN_OUT_KIND> St;
  const float rs[2] = {ep.row_scale(row0), ep.row_scale(row0 + 8)};
  const float rb[2] = {ep.row_bias(row0), ep.row_bias(row0 + 8)};
#pragma unroll
  for (int j = 0; j < BLOCK_N / 8; ++j) {
    typedef typename Pick<GN_OUT_KIND == GN_OUT_S32, int, float>::type V;
    V v[4];
    group_values(d, j, v);
    float s[2] = {1.f, 1.f}, b0 = 0.f, b1 = 0.f;
    if constexpr (GN_OUT_KIND != GN_OUT_S32) ep.column_terms(col0 + 8 * j, s[0], s[1], b0, b1);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int row = row0 + 8 * h, col = col0 + 8 * j + e;  // of the tile: C[col][row]
        if (row >= ep.M || col >= ep.N) continue;
        u8* p = ep.C + ((i64)col * ep.ldc + row) * St::BYTES;
        if constexpr (GN_OUT_KIND == GN_OUT_S32)
          St::one(p, (int)v[2 * h + e]);
        else
          St::one(p, v[2 * h + e] * rs[h] * s[e] + rb[h]);
      }
  }
}

// The persistent sweep: work unit u = (output tile u % tiles, K split u / tiles); a cluster takes every
// step-th unit, its CTA `rank` the rank-th row (column) tile of the cluster tile (CLUSTER_M, CLUSTER_N) or the
// rank-th share of the unit's K tiles (CLUSTER_K; the host requires at least CLUSTER_K of them).
struct Work {
  int tiles, units, step, cluster, grid_cm, grid_cn, k_tiles_total, per_split, splits;
  u32 rank;
  GN_DEVICE int first() const { return cluster; }
  GN_DEVICE void unit(int u, int& tm, int& tn, int& kt0, int& k_tiles) const {
    raster(u % tiles, grid_cm, grid_cn, tm, tn);
    kt0 = (u / tiles) * per_split;  // the host makes every split non-empty
    k_tiles = gn_min(per_split, k_tiles_total - kt0);
    if constexpr (CLUSTER_K > 1) {  // balanced shares: none is empty while k_tiles >= CLUSTER_K
      const int lo = (int)rank * k_tiles / CLUSTER_K, hi = ((int)rank + 1) * k_tiles / CLUSTER_K;
      kt0 += lo;
      k_tiles = hi - lo;
    } else {  // past the last row (column) tile: loads are zeros, stores masked
      tm = tm * CLUSTER_M + (CLUSTER_M > 1 ? (int)rank : 0);
      tn = tn * CLUSTER_N + (CLUSTER_N > 1 ? (int)rank : 0);
    }
  }
};

// Which map and row each box of tile (tm, tn) comes from. A ragged last row (column) tile loads only its rows,
// through tma_at (tma_bt): a box partly past M would be zero-filled by the TMA unit, which measured 16-19% slower
// for the whole kernel at M = 100 (bf16 20.1 against 16.9 us). The ring's rows past M (N) keep stale data; they
// only reach outputs that are never stored. CLUSTER_M (CLUSTER_N): each CTA loads (multicasts) its part of B (A),
// full boxes.
struct Boxes {
  const TmaDesc *a, *b;
  int row_a, row_b, bytes;  // bytes: what the stage's barrier expects
  GN_DEVICE Boxes(const TmaDesc* ma, const TmaDesc* mat, const TmaDesc* mb, const TmaDesc* mbt, int M, int N, int tm,
                  int tn, u32 rank) {
    const int tail_m = CLUSTER_N == 1 ? M % BLOCK_M : 0, tail_n = CLUSTER_M == 1 ? N % BLOCK_N : 0;
    const bool short_m = tail_m != 0 && tm == (M - 1) / BLOCK_M, short_n = tail_n != 0 && tn == (N - 1) / BLOCK_N;
    a = short_m ? mat : ma;
    b = short_n ? mbt : mb;
    row_a = tm * BLOCK_M + (CLUSTER_N > 1 ? (int)rank * (BLOCK_M / CLUSTER_N) : 0);
    row_b = tn * BLOCK_N + (CLUSTER_M > 1 ? (int)rank * (BLOCK_N / CLUSTER_M) : 0);
    bytes = (short_m ? tail_m * ROW_BYTES : A_TILE) + (short_n ? tail_n * ROW_BYTES : B_TILE);
  }
};

// One consumer warp is done with a slot: tell every CTA of the cluster (each of them writes into it). Lane r
// signals CTA r, so the remote arrivals go out in parallel.
GN_DEVICE void release(u32 empty_bar, int lane) {
  if constexpr (MULTICAST > 1) {
    if (lane < MULTICAST) mbar_arrive_cluster(cluster_map(empty_bar, lane));
  } else {
    if (lane == 0) mbar_arrive(empty_bar);
  }
}

GN_DEVICE u32 bits(float x) { return __float_as_uint(x); }
GN_DEVICE u32 bits(int x) { return (u32)x; }

// CLUSTER_K: columns [rank * SLICE, (rank + 1) * SLICE) of the parked sums' first `rows` rows, added over the cluster's
// CTAs in rank order and stored. Units of W adjacent columns of a row, one W x 4-byte read per CTA; unit i = c * 128 +
// t + j * CONSUMERS * 128. A peer's shared memory is a round trip away (a few hundred cycles). ONE: at most one unit
// per thread, read and added alone; else every read of a batch of units is issued before the first is used (one pair at
// a time took ~2 us for a 64 x 64 tile split 2 ways, NOTES sm90 55). Units past the rows or starting past N: nothing to
// store, not read either (see reduce_in_cluster).
template <int W, bool ONE, class Ep>
GN_DEVICE void add_slice(const Ep& ep, u32 smem0, int c, int t, int tm, int tn, u32 rank, int rows) {
  constexpr int UNITS = SLICE / W, STEP = CONSUMERS * 128;
  // Registers of values in flight: 64 for quads with one consumer, else 32 (two consumers compile for 168 registers a
  // thread; 64 x 128 tiles spilled with 64 of pairs).
  constexpr int VALUES = W == 4 && CONSUMERS == 1 ? 64 : 32;
  constexpr int MOST = VALUES / (W * CLUSTER_K) > 1 ? VALUES / (W * CLUSTER_K) : 1;
  constexpr int PER = ONE ? 1 : (BLOCK_M * UNITS + STEP - 1) / STEP, BATCH = PER < MOST ? PER : MOST;
  const int units = rows * UNITS;
  auto col = [&](int i) { return (int)rank * SLICE + W * (i % UNITS); };  // unit i's first column in the tile
  auto wanted = [&](int i) { return i < units && tn * BLOCK_N + col(i) < ep.N; };
#pragma unroll 1
  for (int j0 = 0; j0 < PER; j0 += BATCH) {
    u32 v[BATCH][CLUSTER_K][W];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int i = c * 128 + t + (j0 + j) * STEP;
      if (j0 + j < PER && wanted(i))
#pragma unroll
        for (int p = 0; p < CLUSTER_K; ++p)
          ld_cluster(cluster_map(smem0 + ((i / UNITS) * BLOCK_N + col(i)) * 4, p), v[j][p]);
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int i = c * 128 + t + (j0 + j) * STEP;
      if (!(j0 + j < PER && wanted(i))) continue;
      const int g_row = tm * BLOCK_M + i / UNITS, g_col = tn * BLOCK_N + col(i);
      typedef typename Pick<GN_ACC_KIND == GN_ACC_S32, int, float>::type V;
      V o[W];
      if constexpr (GN_ACC_KIND == GN_ACC_S32) {  // 64-bit sums saturated to int32, as .satfinite would
        i64 sum[W] = {};
#pragma unroll
        for (int p = 0; p < CLUSTER_K; ++p)
#pragma unroll
          for (int q = 0; q < W; ++q) sum[q] += (int)v[j][p][q];
#pragma unroll
        for (int q = 0; q < W; ++q) o[q] = sat_s32(sum[q]);
      } else {
#pragma unroll
        for (int q = 0; q < W; ++q) o[q] = 0.f;
#pragma unroll
        for (int p = 0; p < CLUSTER_K; ++p)
#pragma unroll
          for (int q = 0; q < W; ++q) o[q] += __uint_as_float(v[j][p][q]);
      }
      if constexpr (W == 4) {
        if (g_col + 3 < ep.N) {  // scales and bias once for the quad, one vector store
          ep.store4(g_row, g_col, o);
          continue;
        }
      }
#pragma unroll
      for (int q = 0; q < W; q += 2) ep.store2(g_row, g_col + q, o[q], o[q + 1]);  // each pair masked past N
    }
  }
}

// CLUSTER_K: the cluster's CTAs hold raw sums of one tile over their K shares. Each consumer parks its 64 x BLOCK_N
// sums in the drained ring (row-major, 4-byte values); after a cluster barrier, the consumers of CTA `rank` add column
// slice `rank` of all CTAs' sums (rank order: deterministic) and store it through the epilogue; a second barrier keeps
// every CTA's ring alive until its peers have read it. Every thread of every CTA passes both barriers once per tile
// (the producer warpgroup too: see the kernel). Neither barrier fences global memory: the first publishes only this
// CTA's shared-memory writes (cluster_sync_smem), the second orders nothing (relaxed): each thread's remote reads are
// complete when it arrives, since every value read feeds the sums before it (units starting past N are not read; a
// vector read is complete once any of its words is used). That rests on in-order issue, not on the PTX memory model (a
// relaxed arrival orders nothing there; its own example fences at cluster scope first): the offline compile test checks
// the SASS for it. A release or fence at cluster scope compiles to MEMBAR.ALL.GPU, which waits for the epilogue's
// global stores (NOTES sm90 47).
template <class Ep>
GN_DEVICE void reduce_in_cluster(const Ep& ep, const AccReg (&d)[GN_WGMMA_REGS], u32 smem0, int c, int t, int tm,
                                 int tn, u32 rank) {
  const int warp = t / 32, lane = t % 32, r0 = warp * 16 + lane / 4;
  const u32 mine = smem0 + c * 64 * BLOCK_N * 4;
  const int rows = gn_min(BLOCK_M, ep.M - tm * BLOCK_M);  // rows of the tile that exist (decode: 1-32 of 64)
  if (c * 64 + warp * 16 < rows)  // a warp's 16 rows: parked unless all are past M
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n"
                     ::"r"(mine + ((r0 + 8 * h) * BLOCK_N + 8 * j + 2 * (lane % 4)) * 4), "r"(bits(d[4 * j + 2 * h])),
                     "r"(bits(d[4 * j + 2 * h + 1])) : "memory");
  fence_proxy_async_smem();  // ordered before the TMA loads that refill the ring for a next tile
  cluster_sync_smem();
  // One pair per thread at most (decode rows): pairs, spread over twice the threads that quads would take (quads were
  // 3-5% slower there). Several per thread: quads (16-byte reads) for 4 or 8 CTAs, pairs for 2 (quads measured up to
  // 6% slower there in the kernel, faster in a probe of the reads alone: NOTES sm90 56).
  constexpr int W = CLUSTER_K == 2 ? 2 : 4;
  if (rows * (SLICE / 2) <= CONSUMERS * 128)
    add_slice<2, true>(ep, smem0, c, t, tm, tn, rank, rows);
  else
    add_slice<W, false>(ep, smem0, c, t, tm, tn, rank, rows);
  cluster_sync_relaxed();
}

// A consumer warpgroup: wait for a stage, run its wgmmas, release the stage (in every CTA of the cluster,
// since all of them write into it), and at the end of each tile store the accumulators.
GN_DEVICE void consume(const Work& w, u32 smem0, u32 full0, u32 empty0, u32 cbuf0, const TmaDesc* map_c, int c,
                       int t, u8* C, u8* partial, const float* scale_a, const float* scale_b,
                       const float* bias, int M, int N, int ldc, int scale_a_mode, int scale_b_mode, int has_bias) {
  setmaxnreg_inc<CONSUMER_REGS>();
  const int warp = t / 32, lane = t % 32;
  const Epilogue<GN_OUT_KIND> ep{C, scale_a, scale_b, bias, M, N, ldc, scale_a_mode, scale_b_mode, has_bias,
                                 Epilogue<GN_OUT_KIND>::pairs_aligned(C, ldc)};
  AccReg d[GN_WGMMA_REGS];
  // Descriptors of slot 0's A rows (this consumer's 64) and B tile; a descriptor's address field is bytes / 16,
  // so slot s and k-step ks are plain additions (no masks and shifts per wgmma).
  const u32 desc_a0 = wgmma_desc_k128_lo(smem0 + c * 64 * ROW_BYTES), desc_b0 = wgmma_desc_k128_lo(smem0 + A_TILE);
  int s = 0, prev = 0;  // the slot of the next k-tile and of the one before it, across units
  u32 phase = 0;        // the parity of slot s's current round
  int issued = 0;       // chunks this consumer has stored through TMA (store_tile_tma's buffer turn)
  for (int u = w.first(); u < w.units; u += w.step) {
    int tm, tn, kt0, k_tiles;
    w.unit(u, tm, tn, kt0, k_tiles);
    for (int kt = 0; kt < k_tiles; ++kt) {
      mbar_wait(full0 + 8 * s, phase);
      const u32 slot = s * (STAGE_BYTES / 16);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks)  // scale-d 0 on the tile's first step: D = A*B, no zeroing
        GN_WGMMA(d, wgmma_desc_k128_from_lo(desc_a0 + slot + 2 * ks), wgmma_desc_k128_from_lo(desc_b0 + slot + 2 * ks),
                 (kt > 0 || ks > 0) ? 1 : 0);  // + 32 bytes of K per k-step
      wgmma_commit();
      // One group stays in flight; the one before it has finished reading its slot: release that slot.
      wgmma_wait<1>();
      if (kt > 0) release(empty0 + 8 * prev, lane);
      prev = s;
      if (++s == NUM_STAGES) {
        s = 0;
        phase ^= 1;
      }
    }
    wgmma_wait<0>();
    GN_WGMMA_TOUCH(d);
    release(empty0 + 8 * prev, lane);
    const int row0 = tm * BLOCK_M + c * 64 + warp * 16 + lane / 4, col0 = tn * BLOCK_N + 2 * (lane % 4);
    if constexpr (CLUSTER_K > 1) {
      named_barrier(3, CONSUMERS * 128);  // every consumer's wgmmas are done reading the ring
      reduce_in_cluster(ep, d, smem0, c, t, tm, tn, w.rank);
    } else if constexpr (SWAP_AB) {  // the host runs these with splits = 1
      const u32 buf = cbuf0 + c * 2 * CHUNK_BYTES;
      if constexpr (TMA_STORES)  // (COLS: the host's ep.column_terms_needed())
        store_tile_swapped<COLS>(ep, d, map_c, buf, c, t, tm * BLOCK_M + c * 64, tn * BLOCK_N, issued);
      else
        store_tile_swapped_direct(ep, d, row0, col0);
    } else if constexpr (TMA_STORES) {
      store_tile_tma<COLS>(ep, d, map_c, cbuf0 + c * 2 * CHUNK_BYTES, c, t, tm * BLOCK_M + c * 64, tn * BLOCK_N,
                           issued);
    } else if constexpr (GN_STORE == STORE_DIRECT) {
      store_tile(ep, d, row0, col0);
    } else {  // raw sums into this split's plane of the workspace; mm_reduce finishes the epilogue
      u8* part = partial + (i64)(u / w.tiles) * M * N * 4;
      const Epilogue<PARTIAL_KIND> pe{part, scale_a, scale_b, bias, M, N, N, 0, 0, 0,
                                      Epilogue<PARTIAL_KIND>::pairs_aligned(part, N)};
      store_tile(pe, d, row0, col0);
    }
  }
  if constexpr (TMA_STORES)
    if (t == 0) bulk_wait<0>();  // the staging buffers live in this CTA's shared memory
}

}  // namespace sm90

using namespace sm90;

// tma_a / tma_b: byte-typed maps of A [M, k_bytes] and B [N, k_bytes] with 128-byte swizzle and boxes of
// 128 bytes x (BLOCK_M / CLUSTER_N) / (BLOCK_N / CLUSTER_M) rows; tma_at / tma_bt: the same with boxes of M %
// BLOCK_M / N % BLOCK_N rows, for the ragged last row / column tile (without CLUSTER_N / CLUSTER_M; else unused).
// TMA_STORES: tma_c maps C as bytes ([M, N * OUT_BYTES], boxes of 128 bytes x 64 rows, 128-byte swizzle; SWAP_AB: x
// 16 rows), which the epilogue stores through (other builds: unused). The grid is a multiple of CLUSTER. C: [M, N] with row
// stride ldc (elements). Scales and bias as in sm80_mm. splits > 1: each output tile's K is split into that many
// runs whose raw sums go to partial[split] ([M, N], 4-byte values); mm_reduce finishes the epilogue. prefetch:
// k-tiles of the CTA's first unit brought into L2 before waiting for the previous kernel (PDL).
extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) GN_CLUSTER sm90_mm(
    const __grid_constant__ TmaDesc tma_a, const __grid_constant__ TmaDesc tma_b,
    const __grid_constant__ TmaDesc tma_at, const __grid_constant__ TmaDesc tma_bt,
    const __grid_constant__ TmaDesc tma_c, u8* __restrict__ C,
    const float* __restrict__ scale_a, const float* __restrict__ scale_b, const float* __restrict__ bias,
    u8* __restrict__ partial, int M, int N, int k_bytes, int ldc, int splits, int scale_a_mode, int scale_b_mode,
    int has_bias, int prefetch) {
  extern __shared__ u8 smem_raw[];
  // 128-byte swizzled tiles need 1024-byte alignment; the host allocates 1 KB of slack for this.
  const u32 smem0 = ((u32)__cvta_generic_to_shared(smem_raw) + 1023) & ~1023u;
  const u32 cbuf0 = smem0 + NUM_STAGES * STAGE_BYTES;  // the epilogue's chunk buffers (1024-byte aligned)
  const u32 full0 = cbuf0 + C_STAGE_BYTES, empty0 = full0 + 8 * NUM_STAGES;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;

  // Cluster rank (0 without clusters) and the clusters that sweep the tiles: a cluster owns CLUSTER_M
  // vertically or CLUSTER_N horizontally adjacent tiles, or (CLUSTER_K) the K shares of one tile.
  const u32 rank = CLUSTER > 1 ? cluster_ctarank() : 0;
  const int cluster = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;

  const int grid_m = (M + BLOCK_M - 1) / BLOCK_M, grid_n = (N + BLOCK_N - 1) / BLOCK_N;
  const int grid_cm = (grid_m + CLUSTER_M - 1) / CLUSTER_M;  // cluster tiles along M
  const int grid_cn = (grid_n + CLUSTER_N - 1) / CLUSTER_N;  // and along N
  const int k_tiles_total = (k_bytes + ROW_BYTES - 1) / ROW_BYTES, per_split = (k_tiles_total + splits - 1) / splits;
  const Work w{grid_cm * grid_cn, grid_cm * grid_cn * splits, clusters, cluster, grid_cm, grid_cn, k_tiles_total,
               per_split, splits, rank};

  // Before the wait below: this CTA's first `prefetch` stages into L2, while the previous kernel finishes. Safe:
  // L2 is where every SM's writes land, so a prefetch cannot make anyone read stale data.
  if (threadIdx.x == 32 && w.first() < w.units) {
    tma_prefetch_desc(&tma_a);
    tma_prefetch_desc(&tma_b);
    tma_prefetch_desc(&tma_at);
    tma_prefetch_desc(&tma_bt);
    int tm, tn, kt0, k_tiles;
    w.unit(w.first(), tm, tn, kt0, k_tiles);
    const Boxes box(&tma_a, &tma_at, &tma_b, &tma_bt, M, N, tm, tn, rank);
    for (int kt = kt0; kt < kt0 + gn_min(prefetch, k_tiles); ++kt) {
      tma_prefetch_2d(box.a, kt * ROW_BYTES, box.row_a);
      tma_prefetch_2d(box.b, kt * ROW_BYTES, box.row_b);
    }
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < NUM_STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);                              // the producer's arrive + the TMA bytes
      mbar_init(empty0 + 8 * s, MULTICAST * CONSUMERS * 4);      // one arrival per consumer warp of the cluster
    }
    mbar_fence_init();
  }
  // Peers' barriers exist before anyone signals them: fence.mbarrier_init released the inits, so a relaxed arrival.
  if constexpr (MULTICAST > 1) cluster_sync_relaxed();
  else __syncthreads();
  // Launched as a programmatic dependent: the prologue above overlaps the previous kernel's tail; every global
  // access waits for it to complete, and the next kernel may launch at once (it waits for this one likewise).
  griddep_wait();
  griddep_launch_dependents();

  if (wg == 0) {  // producer
    setmaxnreg_dec<PRODUCER_REGS>();
    int it = 0;          // k-tiles issued so far, across units
    int s = 0;           // their slot (it % NUM_STAGES)
    u32 phase = 0;       // and its round's parity ((it / NUM_STAGES) & 1)
    for (int u = w.first(); u < w.units; u += w.step) {
      // The whole first warp runs the loop, so its values are warp-uniform and the compiler keeps them in uniform
      // registers; one elected lane waits for the slot and issues. (A loop of thread 0 alone moved every TMA operand
      // into uniform registers through a per-lane loop, and its ~50 dependent instructions per k-tile capped narrow
      // tiles' stage rate: NOTES sm90 67.)
      if (t < 32) {
        int tm, tn, kt0, k_tiles;
        w.unit(u, tm, tn, kt0, k_tiles);
        const Boxes box(&tma_a, &tma_at, &tma_b, &tma_bt, M, N, tm, tn, rank);
        for (int kt = kt0; kt < kt0 + k_tiles; ++kt, ++it) {
          const u32 stage = smem0 + s * STAGE_BYTES, full = full0 + 8 * s;
          if (elect_one()) {
            if (it >= NUM_STAGES) mbar_wait(empty0 + 8 * s, phase ^ 1);  // slot drained (its previous round)
            mbar_arrive_expect_tx(full, box.bytes);
            if constexpr (CLUSTER_N > 1)
              tma_load_2d_multicast(stage + rank * A_PART, box.a, kt * ROW_BYTES, box.row_a, full,
                                    (1 << CLUSTER_N) - 1);
            else
              tma_load_2d(stage, box.a, kt * ROW_BYTES, box.row_a, full);
            if constexpr (CLUSTER_M > 1)
              tma_load_2d_multicast(stage + A_TILE + rank * B_PART, box.b, kt * ROW_BYTES, box.row_b, full,
                                    (1 << CLUSTER_M) - 1);
            else
              tma_load_2d(stage + A_TILE, box.b, kt * ROW_BYTES, box.row_b, full);
          }
          if (++s == NUM_STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
      if constexpr (CLUSTER_K > 1) {  // the consumers' two cluster barriers of this tile (reduce_in_cluster)
        cluster_sync_relaxed();
        cluster_sync_relaxed();
      }
    }
    // No CTA may leave while a peer can still arrive on its barriers: wait until every consumer of the cluster has
    // released the last slots (their multicast copies into this CTA have landed: its consumers waited for them).
    // A peer waits likewise for this CTA's arrivals, so no cluster barrier (and no GPU-scope fence) at the exit.
    if constexpr (MULTICAST > 1)
      if (t == 0)  // (lane 0 counted every k-tile with the others)
        for (int j = gn_max(0, it - NUM_STAGES); j < it; ++j)
          mbar_wait(empty0 + 8 * (j % NUM_STAGES), (j / NUM_STAGES) & 1);
  } else {
    consume(w, smem0, full0, empty0, cbuf0, &tma_c, wg - 1, t, C, partial, scale_a, scale_b, bias, M, N, ldc,
            scale_a_mode, scale_b_mode, has_bias);
  }
}

#if GN_STORE == 2  // STORE_PARTIAL: the kernel that finishes its sums
#include "mm_reduce.cuh"
#endif
