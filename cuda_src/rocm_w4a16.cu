// rocm_w4a16: the hipRTC twin of sm80_w4a16 for AMD matrix cores (MI300 gfx942 first, MI200 gfx90a second).
// C = A @ dequant(W) (+ bias): A [M, K] fp16/bf16, W in the GPTQ layout itself (qweight [K, N/8] int32, 8
// N-values per word at bits 0, 4, ..., 28; scales [K/G, N]; optional qzeros [K/G, N/8]).
//
// One wave64 per 16 x 16 output tile, 4 waves per block along N; K in steps of 16 with
// v_mfma_f32_16x16x16{f16,bf16_1k}. Operand layout of the 16x16x16 MFMA, lane l: A row l % 16 and B column
// l % 16, k = 4 (l / 16) + 0..3; D rows 4 (l / 16) + 0..3 of column l % 16. Each lane dequantises its own 4
// weights (q - zero) * scale in fp32, rounds once to the activation type, and feeds the MFMA: no dequantised
// copy of the weight in memory. Correctness-first: compile-checked offline (hipRTC, gfx90a / gfx940), never
// run on AMD hardware by gn_mm's CI (see README).

// Header section: defaults so that editors can parse this file. gn_mm replaces everything above the marker
// with a header rendered from codegen/rocm_w4a16.j2.
#define GN_ACT_BF16 0
#define GN_HAS_ZEROS 0
// ---- kernel ----
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
typedef short s16x4 __attribute__((ext_vector_type(4)));

constexpr int WAVES = 4;  // along N: a block covers 16 rows x 64 columns

__device__ __forceinline__ float act_to_float(u16 bits) {
#if GN_ACT_BF16
  return __builtin_bit_cast(float, (u32)bits << 16);
#else
  return (float)__builtin_bit_cast(_Float16, bits);
#endif
}

__device__ __forceinline__ u16 float_to_act(float v) {
#if GN_ACT_BF16
  u32 u = __builtin_bit_cast(u32, v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                      // round to nearest even
  return (u16)(u >> 16);
#else
  return __builtin_bit_cast(u16, (_Float16)v);
#endif
}

// out = A @ W (+ bias). lda: A's row stride in elements. Unused pointers (qzeros, bias) may be any address.
extern "C" __global__ void __launch_bounds__(64 * WAVES) rocm_w4a16(
    const u16* __restrict__ A, const u32* __restrict__ qweight, const u16* __restrict__ scales,
    const u32* __restrict__ qzeros, const u16* __restrict__ bias, u16* __restrict__ C, int M, int N, int K,
    int lda, int group_size, int zp_bias, int has_bias) {
  const int lane = threadIdx.x % 64, wave = threadIdx.x / 64;
  const int m0 = blockIdx.y * 16, n0 = (blockIdx.x * WAVES + wave) * 16;
  if (n0 >= N) return;  // whole waves only: the MFMA needs all 64 lanes
  const int row = m0 + lane % 16, col = n0 + lane % 16, kq = 4 * (lane / 16);
  const bool row_ok = row < M, col_ok = col < N;
  const int word_col = col / 8, shift = 4 * (col % 8);

  f32x4 acc = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += 16) {
    u16 a_bits[4], b_bits[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int k = k0 + kq + r;
      const bool in = k < K;
      a_bits[r] = row_ok && in ? A[(i64)row * lda + k] : (u16)0;
      float w = 0.f;
      if (col_ok && in) {
        const int group = k / group_size;
        const int q = (int)((qweight[(i64)k * (N / 8) + word_col] >> shift) & 15u);
#if GN_HAS_ZEROS
        const int z = (int)((qzeros[(i64)group * (N / 8) + word_col] >> shift) & 15u);
#else
        const int z = zp_bias;
#endif
        w = (float)(q - z) * act_to_float(scales[(i64)group * N + col]);
      }
      b_bits[r] = float_to_act(w);
    }
#if GN_ACT_BF16
    const s16x4 a = {(short)a_bits[0], (short)a_bits[1], (short)a_bits[2], (short)a_bits[3]};
    const s16x4 b = {(short)b_bits[0], (short)b_bits[1], (short)b_bits[2], (short)b_bits[3]};
    acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, acc, 0, 0, 0);
#else
    f16x4 a, b;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      a[r] = __builtin_bit_cast(_Float16, a_bits[r]);
      b[r] = __builtin_bit_cast(_Float16, b_bits[r]);
    }
    acc = __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, acc, 0, 0, 0);
#endif
  }

  // D: lane l holds rows 4 (l / 16) + r of column l % 16.
  if (!col_ok) return;
  const float b = has_bias ? act_to_float(bias[col]) : 0.f;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int out_row = m0 + kq + r;
    if (out_row < M) C[(i64)out_row * N + col] = float_to_act(acc[r] + b);
  }
}
