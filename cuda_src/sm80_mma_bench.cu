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
#include "ptx/mma.cuh"

typedef Mma<GN_ACC_KIND> MmaOp;

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

  typename MmaOp::Reg acc[2][4][MmaOp::REGS];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < MmaOp::REGS; ++r) acc[i][j][r] = (typename MmaOp::Reg)(i * 4 + j + r);  // distinct

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

  u32 x = 0;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < MmaOp::REGS; ++r) x ^= *(u32*)&acc[i][j][r];
  out[tid] = x;  // keeps every accumulator alive
}
