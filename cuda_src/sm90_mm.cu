// sm90_mm: C = epilogue(A @ B) with wgmma fed by TMA, for every wgmma dtype of sm_90a.
//
// A is [M, K] with K contiguous; B is held as [N, K] with K contiguous (a weight passed as w.t()); both are
// read through byte-typed TMA tensor maps (x = byte of K, y = row), so the kernel never looks at element
// types: every wgmma variant consumes 32 bytes of K per instruction from 128-byte swizzled rows.
//
// Warp specialisation in a persistent CTA: warpgroup 0 is the producer (one thread issues TMA loads into a
// NUM_STAGES ring guarded by "full" and "empty" mbarriers), warpgroups 1..CONSUMERS each own 64 rows of the
// BLOCK_M x BLOCK_N tile, issue wgmma from shared memory, and write their accumulators through the shared
// register epilogue (scales, bias, masked stores). The ring runs across tiles, so the producer fetches the
// next tile while consumers finish the current one.

// Header section: editor defaults, replaced by codegen/sm90_mm.j2.
#include "common.cuh"
#define GN_ACC_KIND GN_ACC_F32
#define GN_OUT_KIND GN_OUT_BF16
#define GN_WGMMA_REGS 128
#define GN_WGMMA(d, desc_a, desc_b, scale_d)
#define GN_WGMMA_TOUCH(d)
constexpr int BLOCK_M = 128, BLOCK_N = 256, NUM_STAGES = 4, GROUP_M = 8;
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
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = CONSUMERS == 2 ? 232 : 240;

static_assert(BLOCK_M % 64 == 0 && CONSUMERS >= 1 && CONSUMERS <= 2, "BLOCK_M must be 64 or 128");
static_assert(BLOCK_N % 16 == 0 && BLOCK_N <= 256, "BLOCK_N must be a multiple of 16, at most 256");

#if GN_ACC_KIND == GN_ACC_F32
typedef float AccReg;
#else
typedef u32 AccReg;  // s32, or two packed f16 (columns 2t, 2t + 1 of one row)
#endif

// Tile t of the persistent sweep -> (tile_m, tile_n): GROUP_M row-tiles sweep the columns together (L2 reuse).
GN_DEVICE void raster(int t, int grid_m, int grid_n, int& tile_m, int& tile_n) {
  const int width = GROUP_M * grid_n, first_m = (t / width) * GROUP_M;
  const int group_rows = gn_min(grid_m - first_m, GROUP_M);
  tile_m = first_m + (t % width) % group_rows;
  tile_n = (t % width) / group_rows;
}

// Accumulator register pair p of a thread -> the two adjacent outputs it holds. wgmma's m64nN layout: warp w
// of the warpgroup owns rows 16w..16w+15; lane l holds rows l/4 and l/4 + 8, columns 8j + 2(l%4) + {0, 1}.
template <int J, class Ep>
GN_DEVICE void store_columns(const Ep& ep, const AccReg (&d)[GN_WGMMA_REGS], int row0, int col0) {
  if constexpr (J < BLOCK_N / 8) {
#if GN_ACC_KIND == GN_ACC_F16
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v0, v1;
      const u32 x = d[2 * J + h];
      asm("{\n.reg .f16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.f32.f16 %0, lo;\ncvt.f32.f16 %1, hi;\n}\n"
          : "=f"(v0), "=f"(v1) : "r"(x));
      ep.store2(row0 + 8 * h, col0 + 8 * J, v0, v1);
    }
#elif GN_ACC_KIND == GN_ACC_S32
    ep.store2(row0, col0 + 8 * J, (int)d[4 * J], (int)d[4 * J + 1]);
    ep.store2(row0 + 8, col0 + 8 * J, (int)d[4 * J + 2], (int)d[4 * J + 3]);
#else
    ep.store2(row0, col0 + 8 * J, d[4 * J], d[4 * J + 1]);
    ep.store2(row0 + 8, col0 + 8 * J, d[4 * J + 2], d[4 * J + 3]);
#endif
    store_columns<J + 1>(ep, d, row0, col0);
  }
}

}  // namespace sm90

using namespace sm90;

// tma_a / tma_b: byte-typed maps of A [M, k_bytes] and B [N, k_bytes] with 128-byte swizzle and boxes of
// 128 bytes x BLOCK_M / BLOCK_N rows. C: [M, N] with row stride ldc (elements). Scales and bias as in sm80_mm.
extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) sm90_mm(
    const __grid_constant__ TmaDesc tma_a, const __grid_constant__ TmaDesc tma_b, u8* __restrict__ C,
    const float* __restrict__ scale_a, const float* __restrict__ scale_b, const float* __restrict__ bias, int M,
    int N, int k_bytes, int ldc, int scale_a_mode, int scale_b_mode, int has_bias) {
  extern __shared__ u8 smem_raw[];
  // 128-byte swizzled tiles need 1024-byte alignment; the host allocates 1 KB of slack for this.
  const u32 smem0 = ((u32)__cvta_generic_to_shared(smem_raw) + 1023) & ~1023u;
  const u32 full0 = smem0 + NUM_STAGES * STAGE_BYTES, empty0 = full0 + 8 * NUM_STAGES;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < NUM_STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);                  // the producer's arrive + the TMA bytes
      mbar_init(empty0 + 8 * s, CONSUMERS * 4);     // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();

  const int grid_m = (M + BLOCK_M - 1) / BLOCK_M, grid_n = (N + BLOCK_N - 1) / BLOCK_N;
  const int tiles = grid_m * grid_n, k_tiles = (k_bytes + ROW_BYTES - 1) / ROW_BYTES;

  if (wg == 0) {  // producer
    setmaxnreg_dec<PRODUCER_REGS>();
    if (t == 0) {
      tma_prefetch_desc(&tma_a);
      tma_prefetch_desc(&tma_b);
      int it = 0;  // k-tiles issued so far, across tiles: slot it % NUM_STAGES, round it / NUM_STAGES
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm, tn;
        raster(tile, grid_m, grid_n, tm, tn);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % NUM_STAGES;
          if (it >= NUM_STAGES) mbar_wait(empty0 + 8 * s, ((it / NUM_STAGES) + 1) & 1);  // slot drained
          const u32 stage = smem0 + s * STAGE_BYTES, full = full0 + 8 * s;
          mbar_arrive_expect_tx(full, STAGE_BYTES);
          tma_load_2d(stage, &tma_a, kt * ROW_BYTES, tm * BLOCK_M, full);
          tma_load_2d(stage + A_TILE, &tma_b, kt * ROW_BYTES, tn * BLOCK_N, full);
        }
      }
    }
    return;
  }

  // consumers
  setmaxnreg_inc<CONSUMER_REGS>();
  const int c = wg - 1, warp = t / 32, lane = t % 32;
  AccReg d[GN_WGMMA_REGS];
  int it = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int tm, tn;
    raster(tile, grid_m, grid_n, tm, tn);
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      const int s = it % NUM_STAGES;
      mbar_wait(full0 + 8 * s, (it / NUM_STAGES) & 1);
      const u32 a = smem0 + s * STAGE_BYTES + c * 64 * ROW_BYTES, b = smem0 + s * STAGE_BYTES + A_TILE;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks)  // scale-d 0 on the tile's first step: D = A*B, no zeroing
        GN_WGMMA(d, wgmma_desc_k128(a + 32 * ks), wgmma_desc_k128(b + 32 * ks), (kt > 0 || ks > 0) ? 1 : 0);
      wgmma_commit();
      // One group stays in flight; the one before it has finished reading its slot: release that slot.
      wgmma_wait<1>();
      if (kt > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % NUM_STAGES));
    }
    wgmma_wait<0>();
    GN_WGMMA_TOUCH(d);
    if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % NUM_STAGES));

    const Epilogue<GN_OUT_KIND> ep{C, scale_a, scale_b, bias, M, N, ldc, scale_a_mode, scale_b_mode, has_bias,
                                   Epilogue<GN_OUT_KIND>::pairs_aligned(C, ldc)};
    const int row0 = tm * BLOCK_M + c * 64 + warp * 16 + lane / 4, col0 = tn * BLOCK_N + 2 * (lane % 4);
    store_columns<0>(ep, d, row0, col0);
  }
}
