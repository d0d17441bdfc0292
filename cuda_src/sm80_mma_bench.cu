// sm80_mma_bench: register-only throughput of one mma.sync variant (the "instruction ceiling").
//
// A real GEMM's inner loop minus memory traffic: each warp holds 2 A and 4 B fragments and 8 accumulators,
// and rewrites one register of every fragment each iteration, so the compiler can hoist nothing out of the
// loop (an emulated instruction's unpacking must be redone every time, as in a real kernel).

// Header section: editor defaults, replaced by codegen/sm80_mma_bench.j2.
#include "common.cuh"
#define GN_MMA_INSTR "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#define GN_ACC_KIND GN_ACC_F32
// ---- kernel ----
#include "ptx/copy.cuh"
#include "ptx/mma.cuh"

typedef Mma<GN_ACC_KIND> MmaOp;
typedef typename MmaOp::Reg AccReg;

// Accumulators start distinct (nothing can be folded), and all of them feed the output (nothing is dead).
template <int I, int J>
GN_DEVICE void init_acc(AccReg (&acc)[I][J][MmaOp::REGS]) {
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int r = 0; r < MmaOp::REGS; ++r) acc[i][j][r] = (AccReg)(i * J + j + r);
}

template <int I, int J>
GN_DEVICE u32 fold_acc(const AccReg (&acc)[I][J][MmaOp::REGS]) {
  u32 x = 0;
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int r = 0; r < MmaOp::REGS; ++r) x ^= *(const u32*)&acc[i][j][r];
  return x;
}

extern "C" __global__ void sm80_mma_bench(u32* __restrict__ out, const u32* __restrict__ seed, int iters) {
  const int tid = threadIdx.x + blockIdx.x * blockDim.x;
  u32 a[2][4], b[4][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[i][r] = seed[(i * 4 + r + threadIdx.x) % 64];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int r = 0; r < 2; ++r) b[j][r] = seed[(8 + j * 2 + r + threadIdx.x) % 64];

  AccReg acc[2][4][MmaOp::REGS];
  init_acc(acc);

  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 2; ++i) a[i][0] = a[i][0] * 1664525u + 1013904223u;
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j][0] = b[j][0] * 22695477u + 1u;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) MmaOp::run(acc[i][j], a[i], b[j]);
  }

  out[tid] = fold_acc(acc);
}

// sm80_ldsm_mma_bench: sm80_mm's inner loop alone. Each of 8 warps owns a 64x64 warp tile (4 A x 8 B
// fragments, 32 accumulators) and reloads every fragment from shared memory with ldmatrix.x4 each k-step,
// double-buffered as in sm80_mm, with no global loads and no barriers: the in-SM ceiling of that loop.
extern "C" __global__ void __launch_bounds__(256) sm80_ldsm_mma_bench(u32* __restrict__ out,
                                                                     const u32* __restrict__ seed, int iters) {
  __shared__ __align__(128) u32 tile[2][64 * 32];  // per k-step parity: 64 rows x 128 bytes (A rows 0-63, B 0-63)
  for (int i = threadIdx.x; i < 2 * 64 * 32; i += blockDim.x) (&tile[0][0])[i] = seed[i % 64] + i;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const u32 base = (u32)__cvta_generic_to_shared(&tile[0][0]);
  // Swizzled addresses as in sm80_mm (row r, 16-byte chunk c -> c ^ (r % 8)).
  const u32 a_row = base + (lane % 16) * 128, a_c = (lane / 16) ^ (lane % 8);
  const u32 b_row = base + (lane % 8 + (lane / 16) * 8) * 128, b_c = ((lane / 8) % 2) ^ (lane % 8);

  u32 af[2][4][4], bf[2][8][2];
  AccReg acc[4][8][MmaOp::REGS];
  init_acc(acc);

  auto load = [&](int buf, int ks) {
    const u32 parity = (ks % 2) * 64 * 128, k2 = 2 * ((ks / 2) % 4);  // 4 k-steps per 128-byte row
    const u32 a_addr = a_row + parity + ((k2 ^ a_c) << 4), b_addr = b_row + parity + ((k2 ^ b_c) << 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) ldmatrix_x4(af[buf][i], a_addr + i * 16 * 128);
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      u32 r[4];
      ldmatrix_x4(r, b_addr + j * 8 * 128);
      bf[buf][j][0] = r[0];
      bf[buf][j][1] = r[1];
      bf[buf][j + 1][0] = r[2];
      bf[buf][j + 1][1] = r[3];
    }
  };
  load(0, 0);
  for (int it = 0; it < iters; it += 2) {
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      load((ks + 1) % 2, it + ks + 1);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          const int j = i % 2 ? 7 - jj : jj;
          MmaOp::run(acc[i][j], af[ks][i], bf[ks][j]);
        }
    }
  }
  out[threadIdx.x + blockIdx.x * blockDim.x] = fold_acc(acc);
}
