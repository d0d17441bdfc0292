// sm90_wgmma_bench: throughput of one wgmma variant with no global memory traffic (the "instruction ceiling").
//
// Two warpgroups per SM, each with one m64n256 accumulator, issue wgmma back to back from a 48 KB shared
// tile (A: 64 rows per warpgroup, B: 256 rows, 128-byte swizzled K-major rows). Every instruction of an
// iteration reads a different 32-byte K slice, accumulators start distinct and all of them reach the output,
// so nothing can be folded or hoisted; the SASS is checked for HGMMA/QGMMA/IGMMA by the caller.

// Header section: editor defaults, replaced by codegen/sm90_wgmma_bench.j2.
#include "common.cuh"
#define GN_ACC_KIND GN_ACC_F32
#define GN_WGMMA_REGS 128
#define GN_WGMMA(d, desc_a, desc_b, scale_d)
#define GN_WGMMA_TOUCH(d)
// ---- kernel ----
#include "ptx/wgmma.cuh"

#if GN_ACC_KIND == GN_ACC_F32
typedef float AccReg;
#else
typedef u32 AccReg;  // s32, or two packed f16
#endif

constexpr int ROW_BYTES = 128, A_ROWS = 64, B_ROWS = 256, WARPGROUPS = 2;
constexpr int KSLICES = ROW_BYTES / 32;  // one wgmma eats 32 bytes of K

extern "C" __global__ void __launch_bounds__(128 * WARPGROUPS, 1)
sm90_wgmma_bench(u32* __restrict__ out, const u32* __restrict__ seed, int iters) {
  __shared__ __align__(1024) u32 smem[(WARPGROUPS * A_ROWS + B_ROWS) * ROW_BYTES / 4];
  // Small finite values of every type (each byte <= 0x3c): the data does not change the rate, NaNs would not either.
  for (int i = threadIdx.x; i < (int)(sizeof(smem) / 4); i += blockDim.x)
    smem[i] = (seed[i % 64] + (u32)i * 2654435761u) & 0x3c3c3c3cu;
  fence_proxy_async_smem();  // generic-proxy stores -> visible to wgmma's async proxy
  __syncthreads();

  const int wg = threadIdx.x / 128;
  const u32 base = (u32)__cvta_generic_to_shared(smem);
  const u32 a_base = base + wg * A_ROWS * ROW_BYTES, b_base = base + WARPGROUPS * A_ROWS * ROW_BYTES;

  AccReg d[GN_WGMMA_REGS];
#pragma unroll
  for (int r = 0; r < GN_WGMMA_REGS; ++r) d[r] = (AccReg)(r + wg + threadIdx.x % 128);

  GN_WGMMA_TOUCH(d);  // the initial values are in registers before the first fence
  for (int it = 0; it < iters; ++it) {
    wgmma_fence();  // as in a real k-loop: without it ptxas injects its own arrive (C7519) at the loop head
#pragma unroll
    for (int s = 0; s < KSLICES; ++s) GN_WGMMA(d, wgmma_desc_k128(a_base + 32 * s), wgmma_desc_k128(b_base + 32 * s), 1);
    wgmma_commit();
    wgmma_wait<1>();  // keep one group in flight: the tensor core never waits for the issuing warps
  }
  wgmma_wait<0>();
  GN_WGMMA_TOUCH(d);

  u32 x = 0;
#pragma unroll
  for (int r = 0; r < GN_WGMMA_REGS; ++r) x ^= *(const u32*)&d[r];
  out[threadIdx.x + blockIdx.x * blockDim.x] = x;
}
