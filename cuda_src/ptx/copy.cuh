// Global -> shared copies (cp.async) and shared -> register fragment loads (ldmatrix), sm_80+.
#pragma once
#include "../common.cuh"

GN_DEVICE u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// 16-byte async copy; bytes < 16 zero-fills the rest (bytes == 0 writes zeros and reads nothing),
// which is how ragged M/N/K tails become zeros that the MMA can safely multiply.
GN_DEVICE void cp_async_16(u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
// The same, predicated (no branch: lanes of one warp may differ).
GN_DEVICE void cp_async_16_if(u32 dst, const void* src, bool pred, int bytes = 16) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p cp.async.cg.shared.global [%0], [%1], 16, %3;\n}\n"
               ::"r"(dst), "l"(src), "r"((int)pred), "r"(bytes));
}
// The 128-byte line holding p, from global memory into L2 (no destination, nothing to wait for).
GN_DEVICE void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
GN_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> GN_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Four 8x(16-byte) matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i receives it.
GN_DEVICE void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
