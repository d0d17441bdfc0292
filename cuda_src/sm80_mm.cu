// sm80_mm: C = epilogue(A @ B) with mma.sync, for every tensor-core dtype of sm_80+.
//
// A is [M, K] with K contiguous; B is held as [N, K] with K contiguous (a weight passed as w.t()).
// The kernel never looks at element types: it moves bytes of K. Every mma.sync variant consumes 32 bytes of
// K per instruction with the same register layout, so one pipeline serves bf16, f16, tf32, fp8, int8 and int4.
//
// Pipeline: NUM_STAGES-deep ring of (BLOCK_M + BLOCK_N) x BLOCK_K_BYTES tiles in XOR-swizzled shared memory
// -> ldmatrix.x4 fragments -> mma.sync into register accumulators -> epilogue (fp32 scales per tensor / row /
// column, bias): whole tiles through the drained ring as 16-byte row stores, edge tiles straight from
// registers with every store masked against M and N. The ring is filled by cp.async
// (every thread copies 16-byte chunks) or, on sm_90 (TMA_LOADS), by one thread's TMA loads completing on an
// mbarrier per slot: the XOR swizzle below is TMA's 64- and 128-byte swizzle, so both fill the same layout,
// and the other threads spend no instructions or LSU slots on copies.

// Header section: defaults so that editors can parse this file. gn_mm replaces everything above the marker
// with a header rendered from codegen/sm80_mm.j2.
#include "common.cuh"
#define GN_MMA_INSTR "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#define GN_ACC_KIND GN_ACC_F32
#define GN_OUT_KIND GN_OUT_BF16
constexpr int ELEM_BITS = 16;
constexpr int BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, BLOCK_K_BYTES = 128;
constexpr int NUM_WARP_M = 2, NUM_WARP_N = 2, NUM_STAGES = 4, GROUP_M = 8;
constexpr int MIN_BLOCKS = 1;  // __launch_bounds__ hint (0: none); see gn_mm/sm80_mm.py
constexpr bool TMA_LOADS = false;
// ---- kernel ----
#include "ptx/copy.cuh"
#include "ptx/mma.cuh"
#include "ptx/tma.cuh"
#include "epilogue.cuh"

namespace sm80 {

constexpr int NUM_THREADS = NUM_WARP_M * NUM_WARP_N * 32;
constexpr int WARP_M = BLOCK_M / NUM_WARP_M;  // rows of C per warp
constexpr int WARP_N = BLOCK_N / NUM_WARP_N;  // columns of C per warp
constexpr int MI = WARP_M / 16;               // m16 fragments per warp
constexpr int NI = WARP_N / 8;                // n8 fragments per warp
constexpr int CHUNKS = BLOCK_K_BYTES / 16;    // 16-byte chunks per tile row
constexpr int KSTEPS = BLOCK_K_BYTES / 32;    // mma k-steps per stage
constexpr int A_TILE = BLOCK_M * BLOCK_K_BYTES;
constexpr int B_TILE = BLOCK_N * BLOCK_K_BYTES;
constexpr int STAGE_BYTES = A_TILE + B_TILE;

static_assert(WARP_M % 16 == 0 && WARP_N % 16 == 0, "warp tile must be a multiple of 16x16");
static_assert(BLOCK_K_BYTES == 64 || BLOCK_K_BYTES == 128, "BLOCK_K_BYTES must be 64 or 128");
static_assert(NUM_STAGES >= 2, "need at least two stages");

typedef Mma<GN_ACC_KIND> MmaOp;
typedef typename MmaOp::Reg AccReg;

// XOR swizzle of 16-byte chunks over rows of C chunks (4 or 8): 8 consecutive rows land in 8 distinct bank
// groups (what one ldmatrix, or one fragment store of the staged epilogue, touches).
template <int C = CHUNKS>
GN_DEVICE int swizzle(int row) { return (row / (8 / C)) % C; }

// Copies one operand's [ROWS x BLOCK_K_BYTES] tiles with cp.async. Thread t always copies the same
// 16-byte chunk column of rows t / CHUNKS + i * ROW_STEP, so every address but the K offset is fixed
// once per CTA; rows past the matrix and bytes past K arrive as zeros (src-size 0 or short).
template <int ROWS>
struct TileLoader {
  static constexpr int ROW_STEP = NUM_THREADS / CHUNKS;
  static constexpr int LOADS = ROWS / ROW_STEP;
  static_assert(NUM_THREADS % CHUNKS == 0 && ROWS % ROW_STEP == 0, "chunks must divide among threads");

  const u8* src;   // first row of this thread, at its chunk column
  i64 step;        // bytes between this thread's rows
  u32 smem_off;    // its first chunk within a stage's tile
  int k_chunk;     // byte offset of its chunk within a K tile
  unsigned valid;  // bit i: row i is inside the matrix

  GN_DEVICE TileLoader(const u8* tile, int ld, int rows_valid, int tid) {
    const int row = tid / CHUNKS, chunk = tid % CHUNKS;
    k_chunk = chunk * 16;
    src = tile + (i64)row * ld + k_chunk;
    step = (i64)ROW_STEP * ld;
    // ROW_STEP is a multiple of 8, so every row of this thread has the same swizzle.
    smem_off = row * BLOCK_K_BYTES + ((chunk ^ swizzle<>(row)) << 4);
    valid = 0;
#pragma unroll
    for (int i = 0; i < LOADS; ++i) valid |= (row + i * ROW_STEP < rows_valid ? 1u : 0u) << i;
  }

  GN_DEVICE void load(u32 smem_tile, int kt, int k_bytes) const {
    const int k = kt * BLOCK_K_BYTES + k_chunk;
    const int bytes = gn_max(0, gn_min(16, k_bytes - k));
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const int n = (valid >> i) & 1 ? bytes : 0;
      const u8* p = n ? src + i * step + kt * BLOCK_K_BYTES : src;  // never an out-of-range address
      cp_async_16(smem_tile + smem_off + i * ROW_STEP * BLOCK_K_BYTES, p, n);
    }
  }
};

// The ring's two fills behind one interface. issue(kt): start tile kt of this split into slot kt % NUM_STAGES
// (nothing past the split). wait(kt): return once tile kt may be read. release(kt): this warp has read tile
// kt (every fragment it loaded from it has been consumed by an MMA). Both are built from the same arguments:
// the operands as maps and as pointers, this CTA's tile and split.

// cp.async: every thread copies its chunks; wait() ends in a CTA barrier, after which every warp has also
// finished the tile two behind, whose slot the next issue() refills.
struct CpAsyncPipe {
  TileLoader<BLOCK_M> a;
  TileLoader<BLOCK_N> b;
  u32 smem0;
  int kt0, k_tiles, k_bytes;
  GN_DEVICE CpAsyncPipe(const TmaDesc*, const TmaDesc*, const u8* A, const u8* B, int lda, int ldb, int M, int N,
                        int m0, int n0, int kt0_, int k_tiles_, int k_bytes_, u32 smem0_, int tid)
      : a(A + (i64)m0 * lda, lda, M - m0, tid), b(B + (i64)n0 * ldb, ldb, N - n0, tid), smem0(smem0_), kt0(kt0_),
        k_tiles(k_tiles_), k_bytes(k_bytes_) {}
  GN_DEVICE void issue(int kt) const {
    if (kt < k_tiles) {
      const u32 s = smem0 + (kt % NUM_STAGES) * STAGE_BYTES;
      a.load(s, kt0 + kt, k_bytes);
      b.load(s + A_TILE, kt0 + kt, k_bytes);
    }
    cp_async_commit();  // always, so group counting stays uniform at the tail
  }
  GN_DEVICE void wait(int) const {
    cp_async_wait<NUM_STAGES - 2>();
    __syncthreads();
  }
  GN_DEVICE void release(int, int) const {}
  GN_DEVICE void drain() const { cp_async_wait<0>(); }
};

// TMA: thread 0 issues both boxes of a tile once every warp has released the slot's previous tile ("empty"
// mbarrier, one arrival per warp); the slot's "full" mbarrier completes when the boxes' bytes have landed
// (rows past M / N and bytes past K arrive as zeros). No CTA barrier in the main loop: warps drift freely
// and only thread 0 ever waits for the slowest. The barriers sit after the ring; thread 0 initialises them
// in the constructor, and a __syncthreads must follow.
struct TmaPipe {
  const TmaDesc* map_a;
  const TmaDesc* map_b;
  u32 smem0, full0, empty0;
  int kt0, k_tiles, m0, n0;
  bool leader;
  GN_DEVICE TmaPipe(const TmaDesc* ma, const TmaDesc* mb, const u8*, const u8*, int, int, int, int, int m0_, int n0_,
                    int kt0_, int k_tiles_, int, u32 smem0_, int tid)
      : map_a(ma), map_b(mb), smem0(smem0_), full0(smem0_ + NUM_STAGES * STAGE_BYTES),
        empty0(full0 + 8 * NUM_STAGES), kt0(kt0_), k_tiles(k_tiles_), m0(m0_), n0(n0_), leader(tid == 0) {
    if (leader) {
      for (int s = 0; s < NUM_STAGES; ++s) {
        mbar_init(full0 + 8 * s, 1);
        mbar_init(empty0 + 8 * s, NUM_THREADS / 32);
      }
      mbar_fence_init();
    }
  }
  GN_DEVICE void issue(int kt) const {
    if (leader && kt < k_tiles) {
      const int s = kt % NUM_STAGES;
      if (kt >= NUM_STAGES) mbar_wait(empty0 + 8 * s, ((kt / NUM_STAGES) + 1) & 1);  // tile kt - NUM_STAGES read
      const u32 stage = smem0 + s * STAGE_BYTES, full = full0 + 8 * s;
      mbar_arrive_expect_tx(full, STAGE_BYTES);
      tma_load_2d(stage, map_a, (kt0 + kt) * BLOCK_K_BYTES, m0, full);
      tma_load_2d(stage + A_TILE, map_b, (kt0 + kt) * BLOCK_K_BYTES, n0, full);
    }
  }
  GN_DEVICE void wait(int kt) const {
    if (kt < k_tiles) mbar_wait(full0 + 8 * (kt % NUM_STAGES), (kt / NUM_STAGES) & 1);
  }
  GN_DEVICE void release(int kt, int lane) const {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty0 + 8 * (kt % NUM_STAGES));
  }
  GN_DEVICE void drain() const {}
};

// A and B fragments of k-step ks of one stage. Row r's chunk c sits at chunk c ^ swizzle(r); rows 16 apart
// share a swizzle, so the lane's own (chunk ^ swizzle) = c is fixed and chunk 2 ks + c' maps to (2 ks) ^ c.
GN_DEVICE void load_frag_a(u32 (&af)[MI][4], u32 stage, int ks, int a_row, int a_c) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
    ldmatrix_x4(af[i], stage + (a_row + i * 16) * BLOCK_K_BYTES + (((2 * ks) ^ a_c) << 4));
}

GN_DEVICE void load_frag_b(u32 (&bf)[NI][2], u32 stage, int ks, int b_row, int b_c) {
#pragma unroll
  for (int j = 0; j < NI; j += 2) {
    u32 r[4];
    ldmatrix_x4(r, stage + A_TILE + (b_row + j * 8) * BLOCK_K_BYTES + (((2 * ks) ^ b_c) << 4));
    bf[j][0] = r[0];
    bf[j][1] = r[1];
    bf[j + 1][0] = r[2];
    bf[j + 1][1] = r[3];
  }
}

// Which (tile_m, tile_n) this CTA owns: GROUP_M row-tiles sweep the columns together for L2 reuse.
GN_DEVICE void raster(int M, int N, int& tile_m, int& tile_n) {
  const int grid_m = (M + BLOCK_M - 1) / BLOCK_M, grid_n = (N + BLOCK_N - 1) / BLOCK_N;
  const int pid = blockIdx.x, width = GROUP_M * grid_n;
  const int first_m = (pid / width) * GROUP_M;
  const int group_rows = gn_min(grid_m - first_m, GROUP_M);
  tile_m = first_m + (pid % width) % group_rows;
  tile_n = (pid % width) / group_rows;
}

// Half H of one accumulator fragment: row g (H = 0) or g + 8 (H = 1), columns 2t and 2t + 1.
template <int H, class Ep>
GN_DEVICE void store_half(const Ep& ep, const AccReg (&d)[MmaOp::REGS], int row, int col) {
  if constexpr (GN_ACC_KIND == GN_ACC_S32) {
    ep.store2(row, col, (int)d[2 * H], (int)d[2 * H + 1]);
  } else {
    float v0, v1;
    MmaOp::pair(d, H, v0, v1);
    ep.store2(row, col, v0, v1);
  }
}

// Fragment F = (i, j) of the warp tile, then F + 1 ...: recursion instead of a loop, so every index into
// acc is a compile-time constant (NVVM declined to unroll the equivalent loop nest for large tiles and
// moved acc to local memory).
template <int F, class Ep>
GN_DEVICE void store_fragments(const Ep& ep, const AccReg (&acc)[MI][NI][MmaOp::REGS], int row0, int col0) {
  if constexpr (F < MI * NI) {
    constexpr int i = F / NI, j = F % NI;
    store_half<0>(ep, acc[i][j], row0 + i * 16, col0 + j * 8);
    store_half<1>(ep, acc[i][j], row0 + i * 16 + 8, col0 + j * 8);
    store_fragments<F + 1>(ep, acc, row0, col0);
  }
}

// The warp tile through shared memory, then whole-row 16-byte stores: stored from the fragment layout (4 bytes
// per lane, 8 rows x 16 bytes per instruction) the epilogue took ~10% of the kernel at 4096^3, the SM's tensor
// cores idle meanwhile (benchmarks/NOTES.md, sm80 11-12).
// `region`: this warp's WARP_M x WARP_N outputs of the drained ring, rows of ROW bytes whose 16-byte chunks are
// XOR-swizzled so that a fragment store's 8 rows hit distinct banks. The tile must lie inside C, with
// 16-byte aligned rows. Scales and bias are applied on the way in; integer outputs stay exact.
template <class Ep>
GN_DEVICE void store_staged(const Ep& ep, const AccReg (&acc)[MI][NI][MmaOp::REGS], u32 region, int lane, int m0,
                            int n0) {
  constexpr int OUT = Ep::KIND, B = Store<OUT>::BYTES, ROW = WARP_N * B, CH = ROW / 16;
  constexpr int SPREAD = CH < 8 ? CH : 8, ROWS_PER_STORE = 32 / CH;  // chunks the swizzle spreads rows over
  static_assert(CH >= 4 && CH <= 32, "a warp row must be 64 to 512 bytes");
  const int g = lane / 4, t = lane % 4;
  float rs[MI][2];  // row terms once per row, column terms once per column pair
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) rs[i][h] = ep.row_scale(m0 + i * 16 + h * 8 + g);
#pragma unroll
  for (int j = 0; j < NI; ++j) {
    float s0, s1, b0, b1;
    ep.column_terms(n0 + j * 8 + 2 * t, s0, s1, b0, b1);
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = i * 16 + h * 8 + g, byte = (j * 8 + 2 * t) * B;
        const u32 at = region + r * ROW + ((byte / 16) ^ swizzle<SPREAD>(r)) * 16 + byte % 16;
        if constexpr (OUT == GN_OUT_S32) {
          asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(at), "r"((int)acc[i][j][2 * h]),
                       "r"((int)acc[i][j][2 * h + 1]));
        } else {
          float v0, v1;
          MmaOp::pair(acc[i][j], h, v0, v1);
          v0 = v0 * rs[i][h] * s0 + b0;
          v1 = v1 * rs[i][h] * s1 + b1;
          if constexpr (OUT == GN_OUT_F32)
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(v0), "f"(v1));
          else
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at),
                         "r"(OUT == GN_OUT_BF16 ? pack_bf16x2(v0, v1) : pack_f16x2(v0, v1)));
        }
      }
  }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < WARP_M / ROWS_PER_STORE; ++k) {
    const int r = k * ROWS_PER_STORE + lane / CH, c = lane % CH;
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(region + r * ROW + (c ^ swizzle<SPREAD>(r)) * 16));
    *(uint4*)(ep.C + ((i64)(m0 + r) * ep.ldc + n0) * B + c * 16) = v;
  }
}

}  // namespace sm80

using namespace sm80;

// tma_a / tma_b (TMA_LOADS only): byte-typed maps of A [M, k_bytes] and B [N, k_bytes] in boxes of
// BLOCK_K_BYTES x BLOCK_M / BLOCK_N rows, swizzled by BLOCK_K_BYTES; otherwise unused (any bytes).
// A, B, C are byte pointers (A and B unused with TMA_LOADS); lda and ldb are row strides in bytes, ldc in
// elements of C; k_bytes is K in bytes. scale_a: [1] or [M] fp32, scale_b: [1] or [N] fp32 (mode 0 none, 1 per tensor, 2 per row/column);
// bias: [N] fp32. Unused pointers may be any valid address.
// Split-K: gridDim.y CTAs share each output tile, blockIdx.y taking an equal run of K tiles; each writes its
// raw sums to partial[blockIdx.y] ([M, N], 4-byte values) and mm_reduce finishes the epilogue.
extern "C" __global__ void __launch_bounds__(NUM_THREADS, MIN_BLOCKS) sm80_mm(
    const __grid_constant__ TmaDesc tma_a, const __grid_constant__ TmaDesc tma_b, const u8* __restrict__ A,
    const u8* __restrict__ B, u8* __restrict__ C, const float* __restrict__ scale_a, const float* __restrict__ scale_b,
    const float* __restrict__ bias, u8* __restrict__ partial, int M, int N, int k_bytes, int lda, int ldb, int ldc,
    int scale_a_mode, int scale_b_mode, int has_bias) {
  extern __shared__ __align__(128) u8 smem_raw[];
  // Swizzled TMA boxes need 1024-byte aligned slots; the host allocates 1 KB of slack (and the barriers).
  const u32 smem0 = TMA_LOADS ? (smem_u32(smem_raw) + 1023) & ~1023u : smem_u32(smem_raw);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / NUM_WARP_N, warp_n = warp % NUM_WARP_N;

  int tile_m, tile_n;
  raster(M, N, tile_m, tile_n);
  const int m0 = tile_m * BLOCK_M, n0 = tile_n * BLOCK_N;

  AccReg acc[MI][NI][MmaOp::REGS];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int r = 0; r < MmaOp::REGS; ++r) acc[i][j][r] = 0;

  const int k_tiles_total = (k_bytes + BLOCK_K_BYTES - 1) / BLOCK_K_BYTES;
  const int per_split = (k_tiles_total + gridDim.y - 1) / gridDim.y;
  const int kt0 = blockIdx.y * per_split;  // the host makes every split non-empty
  const int k_tiles = gn_min(per_split, k_tiles_total - kt0);
  // Prologue: fill NUM_STAGES - 1 stages.
  typedef typename Pick<TMA_LOADS, TmaPipe, CpAsyncPipe>::type Pipe;
  const Pipe pipe(&tma_a, &tma_b, A, B, lda, ldb, M, N, m0, n0, kt0, k_tiles, k_bytes, smem0, tid);
  if constexpr (TMA_LOADS) __syncthreads();  // the barriers exist before anyone waits on them
#pragma unroll
  for (int s = 0; s < NUM_STAGES - 1; ++s) pipe.issue(s);

  // ldmatrix addresses. A: lanes 0-15 give rows, lanes 16-31 the same rows' next 16-byte chunk.
  // B: lanes pick (n 0-7 | 8-15) x (chunk 0 | 1) in the order b0, b1 of fragment j, then of j + 1.
  const int a_row = warp_m * WARP_M + lane % 16, b_row = warp_n * WARP_N + lane % 8 + (lane / 16) * 8;
  const int a_c = (lane / 16) ^ swizzle<>(a_row), b_c = ((lane / 8) % 2) ^ swizzle<>(b_row);
  // Software pipeline: fragments of k-step ks + 1 are loaded before the MMAs of ks; on the last k-step
  // of a tile the next tile is waited for first.
  u32 af[2][MI][4], bf[2][NI][2];
  pipe.wait(0);
  u32 stage = smem0;
  load_frag_a(af[0], stage, 0, a_row, a_c);
  load_frag_b(bf[0], stage, 0, b_row, b_c);

  for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      if (ks == 0) pipe.issue(kt + NUM_STAGES - 1);
      if (ks == KSTEPS - 1) {
        pipe.wait(kt + 1);
        stage = smem0 + ((kt + 1) % NUM_STAGES) * STAGE_BYTES;
      }
      const int next = (ks + 1) % KSTEPS;  // on the last k-step: k-step 0 of the next tile
      load_frag_a(af[(ks + 1) % 2], stage, next, a_row, a_c);
      load_frag_b(bf[(ks + 1) % 2], stage, next, b_row, b_c);
      // Serpentine order: consecutive MMAs share an A fragment along a row and a B fragment at each turn.
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int jj = 0; jj < NI; ++jj) {
          const int j = i % 2 ? NI - 1 - jj : jj;
          MmaOp::run(acc[i][j], af[ks % 2][i], bf[ks % 2][j]);
        }
    }
    pipe.release(kt, lane);
  }
  pipe.drain();

  // Epilogue. Thread (g = lane / 4, t = lane % 4) holds rows g and g + 8 of each fragment, columns 2t and
  // 2t + 1. When every warp's tile lies inside C with 16-byte aligned rows (all but edge tiles), the tiles
  // go through the drained ring (every warp past its main loop: the barrier) as whole rows; else each value
  // is stored straight from registers, masked.
  const int wm0 = m0 + warp_m * WARP_M, wn0 = n0 + warp_n * WARP_N;
  const bool inside = wm0 + WARP_M <= M && wn0 + WARP_N <= N;
  const u32 region = smem0 + warp * (WARP_M * WARP_N * 4);
  constexpr bool FITS = BLOCK_M * BLOCK_N * 4 <= NUM_STAGES * STAGE_BYTES;  // 4-byte values at most
  const int row0 = wm0 + lane / 4, col0 = wn0 + 2 * (lane % 4);
  if (gridDim.y == 1) {
    const Epilogue<GN_OUT_KIND> ep{C, scale_a, scale_b, bias, M, N, ldc, scale_a_mode, scale_b_mode, has_bias,
                                   Epilogue<GN_OUT_KIND>::pairs_aligned(C, ldc)};
    const bool rows16 = (u64)C % 16 == 0 && (ldc * Store<GN_OUT_KIND>::BYTES) % 16 == 0;
    if (FITS && __syncthreads_and(inside && rows16))
      store_staged(ep, acc, region, lane, wm0, wn0);
    else
      store_fragments<0>(ep, acc, row0, col0);
  } else {
    u8* part = partial + (i64)blockIdx.y * M * N * 4;
    const Epilogue<PARTIAL_KIND> ep{part, scale_a, scale_b, bias, M, N, N, 0, 0, 0,
                                    Epilogue<PARTIAL_KIND>::pairs_aligned(part, N)};
    if (FITS && __syncthreads_and(inside && N % 4 == 0))
      store_staged(ep, acc, region, lane, wm0, wn0);
    else
      store_fragments<0>(ep, acc, row0, col0);
  }
}

#include "mm_reduce.cuh"
