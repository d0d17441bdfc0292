// sm80_mm: C = epilogue(A @ B) with mma.sync, for every tensor-core dtype of sm_80+.
//
// A is [M, K] with K contiguous; B is held as [N, K] with K contiguous (a weight passed as w.t()).
// The kernel never looks at element types: it moves bytes of K. Every mma.sync variant consumes 32 bytes of
// K per instruction with the same register layout, so one pipeline serves bf16, f16, tf32, fp8, int8 and int4.
//
// Pipeline: NUM_STAGES-deep cp.async ring of (BLOCK_M + BLOCK_N) x BLOCK_K_BYTES tiles in XOR-swizzled
// shared memory -> ldmatrix.x4 fragments -> mma.sync into register accumulators -> register epilogue
// (fp32 scales per tensor / row / column, bias) with every store masked against M and N.

// Header section: defaults so that editors can parse this file. gn_mm replaces everything above the marker
// with a header rendered from codegen/sm80_mm.j2.
#include "common.cuh"
#define GN_MMA_INSTR "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#define GN_ACC_KIND GN_ACC_F32
#define GN_OUT_KIND GN_OUT_BF16
constexpr int ELEM_BITS = 16;
constexpr int BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, BLOCK_K_BYTES = 128;
constexpr int NUM_WARP_M = 2, NUM_WARP_N = 2, NUM_STAGES = 4, GROUP_M = 8;
// ---- kernel ----
#include "ptx/copy.cuh"
#include "ptx/mma.cuh"
#include "ptx/store.cuh"

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
constexpr int A_LOADS = BLOCK_M * CHUNKS / NUM_THREADS;  // 16-byte copies per thread per stage
constexpr int B_LOADS = BLOCK_N * CHUNKS / NUM_THREADS;

static_assert(WARP_M % 16 == 0 && WARP_N % 16 == 0, "warp tile must be a multiple of 16x16");
static_assert(BLOCK_K_BYTES == 64 || BLOCK_K_BYTES == 128, "BLOCK_K_BYTES must be 64 or 128");
static_assert(A_LOADS * NUM_THREADS == BLOCK_M * CHUNKS && B_LOADS * NUM_THREADS == BLOCK_N * CHUNKS,
              "tile chunks must divide evenly among threads");
static_assert(NUM_STAGES >= 2, "need at least two stages");

typedef Mma<GN_ACC_KIND> MmaOp;
typedef typename MmaOp::Reg AccReg;

// XOR swizzle of 16-byte chunks: the 8 rows one ldmatrix reads land in 8 distinct bank groups.
GN_DEVICE int swizzle(int row) { return (row / (8 / CHUNKS)) % CHUNKS; }
GN_DEVICE int tile_offset(int row, int chunk) { return row * BLOCK_K_BYTES + ((chunk ^ swizzle(row)) << 4); }

// Issue the cp.async copies of one [ROWS x BLOCK_K_BYTES] tile; rows >= rows_valid and bytes >= k_bytes
// arrive as zeros.
template <int ROWS, int LOADS>
GN_DEVICE void load_tile(u32 smem, const u8* g, int ld, int rows_valid, int k0, int k_bytes, int tid) {
#pragma unroll
  for (int i = 0; i < LOADS; ++i) {
    const int idx = tid + i * NUM_THREADS;
    const int row = idx / CHUNKS, chunk = idx % CHUNKS;
    const int k = k0 + chunk * 16;
    const int bytes = row < rows_valid ? gn_max(0, gn_min(16, k_bytes - k)) : 0;
    const u8* src = bytes > 0 ? g + (i64)row * ld + k : g;  // never form an out-of-range address
    cp_async_16(smem + tile_offset(row, chunk), src, bytes);
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

// Scales, bias and the masked store of one thread's two adjacent outputs of one fragment row.
struct Epilogue {
  u8* C;
  const float *scale_a, *scale_b, *bias;
  int M, N, ldc, scale_a_mode, scale_b_mode, has_bias;
  bool pair_ok;  // two-column vector stores need an even row stride and a pair-aligned base (out= views)

  template <int H>
  GN_DEVICE void half(const AccReg (&d)[MmaOp::REGS], int row, int col) const {
    typedef Store<GN_OUT_KIND> St;
    if (row >= M || col >= N) return;
    const bool two = col + 1 < N;
    u8* p = C + ((i64)row * ldc + col) * St::BYTES;
#if GN_OUT_KIND == GN_OUT_S32
    const int v0 = d[2 * H], v1 = d[2 * H + 1];
#else
    float v0, v1;
    MmaOp::pair(d, H, v0, v1);
    if (scale_a_mode) {
      const float s = scale_a[scale_a_mode == 2 ? row : 0];
      v0 *= s;
      v1 *= s;
    }
    if (scale_b_mode == 1) {
      v0 *= scale_b[0];
      v1 *= scale_b[0];
    } else if (scale_b_mode == 2) {
      v0 *= scale_b[col];
      if (two) v1 *= scale_b[col + 1];
    }
    if (has_bias) {
      v0 += bias[col];
      if (two) v1 += bias[col + 1];
    }
#endif
    if (two && pair_ok) {
      St::two(p, v0, v1);
    } else {
      St::one(p, v0);
      if (two) St::one(p + St::BYTES, v1);
    }
  }
};

// Fragment F = (i, j) of the warp tile, then F + 1 ...: recursion instead of a loop, so every index into
// acc is a compile-time constant (NVVM declined to unroll the equivalent loop nest for large tiles and
// moved acc to local memory).
template <int F>
GN_DEVICE void store_fragments(const Epilogue& ep, const AccReg (&acc)[MI][NI][MmaOp::REGS], int row0, int col0) {
  if constexpr (F < MI * NI) {
    constexpr int i = F / NI, j = F % NI;
    ep.template half<0>(acc[i][j], row0 + i * 16, col0 + j * 8);
    ep.template half<1>(acc[i][j], row0 + i * 16 + 8, col0 + j * 8);
    store_fragments<F + 1>(ep, acc, row0, col0);
  }
}

}  // namespace sm80

using namespace sm80;

// A, B, C are byte pointers; lda and ldb are row strides in bytes, ldc in elements of C; k_bytes is K in
// bytes. scale_a: [1] or [M] fp32, scale_b: [1] or [N] fp32 (mode 0 none, 1 per tensor, 2 per row/column);
// bias: [N] fp32. Unused pointers may be any valid address.
extern "C" __global__ void __launch_bounds__(NUM_THREADS) sm80_mm(
    const u8* __restrict__ A, const u8* __restrict__ B, u8* __restrict__ C, const float* __restrict__ scale_a,
    const float* __restrict__ scale_b, const float* __restrict__ bias, int M, int N, int k_bytes, int lda, int ldb,
    int ldc, int scale_a_mode, int scale_b_mode, int has_bias) {
  extern __shared__ __align__(128) u8 smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / NUM_WARP_N, warp_n = warp % NUM_WARP_N;

  int tile_m, tile_n;
  raster(M, N, tile_m, tile_n);
  const int m0 = tile_m * BLOCK_M, n0 = tile_n * BLOCK_N;
  const u8* a_tile = A + (i64)m0 * lda;
  const u8* b_tile = B + (i64)n0 * ldb;
  const int a_rows = M - m0, b_rows = N - n0;
  const u32 smem0 = smem_u32(smem);

  AccReg acc[MI][NI][MmaOp::REGS];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int r = 0; r < MmaOp::REGS; ++r) acc[i][j][r] = 0;

  const int k_tiles = (k_bytes + BLOCK_K_BYTES - 1) / BLOCK_K_BYTES;
  auto load_stage = [&](int kt) {
    const u32 s = smem0 + (kt % NUM_STAGES) * STAGE_BYTES;
    load_tile<BLOCK_M, A_LOADS>(s, a_tile, lda, a_rows, kt * BLOCK_K_BYTES, k_bytes, tid);
    load_tile<BLOCK_N, B_LOADS>(s + A_TILE, b_tile, ldb, b_rows, kt * BLOCK_K_BYTES, k_bytes, tid);
  };

  // Prologue: fill NUM_STAGES - 1 stages. Always commit, so group counting stays uniform at the tail.
#pragma unroll
  for (int s = 0; s < NUM_STAGES - 1; ++s) {
    if (s < k_tiles) load_stage(s);
    cp_async_commit();
  }

  // ldmatrix row addresses: A lanes 0-15 rows, lanes 16-31 the second 16-byte chunk;
  // B lanes pick (n 0-7 | 8-15) x (chunk 0 | 1) in the order b0, b1 of fragment j then of fragment j + 1.
  const int a_row = warp_m * WARP_M + lane % 16, a_chunk = lane / 16;
  const int b_row = warp_n * WARP_N + lane % 8 + (lane / 16) * 8, b_chunk = (lane / 8) % 2;

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<NUM_STAGES - 2>();
    __syncthreads();  // stage kt landed for everyone, and everyone is done reading stage kt - 1
    if (kt + NUM_STAGES - 1 < k_tiles) load_stage(kt + NUM_STAGES - 1);
    cp_async_commit();

    const u32 sa = smem0 + (kt % NUM_STAGES) * STAGE_BYTES, sb = sa + A_TILE;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      u32 af[MI][4], bf[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) ldmatrix_x4(af[i], sa + tile_offset(a_row + i * 16, ks * 2 + a_chunk));
#pragma unroll
      for (int j = 0; j < NI; j += 2) {
        u32 r[4];
        ldmatrix_x4(r, sb + tile_offset(b_row + j * 8, ks * 2 + b_chunk));
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) MmaOp::run(acc[i][j], af[i], bf[j]);
    }
  }
  cp_async_wait<0>();

  // Epilogue straight from registers. Thread (g = lane / 4, t = lane % 4) holds rows g and g + 8 of each
  // fragment, columns 2t and 2t + 1.
  const int row0 = m0 + warp_m * WARP_M + lane / 4, col0 = n0 + warp_n * WARP_N + 2 * (lane % 4);
  const Epilogue ep{C, scale_a, scale_b, bias, M, N, ldc, scale_a_mode, scale_b_mode, has_bias,
                    (ldc % 2) == 0 && ((u64)C % (2 * Store<GN_OUT_KIND>::BYTES)) == 0};
  store_fragments<0>(ep, acc, row0, col0);
}
