// Hopper warpgroup MMA (wgmma, sm_90a): shared-memory descriptors and the async-group protocol.
// The instruction itself (GN_WGMMA, one line with every accumulator register as an operand) is generated
// by codegen/wgmma.j2 from the Python variant table.
#pragma once
#include "../common.cuh"

// Descriptor of a K-major operand tile stored with the 128-byte swizzle: rows of 128 bytes, 8-row
// (1024-byte) swizzle atoms stacked along M/N. Bits: start address >> 4 (0-13), leading byte offset >> 4
// (16-29, unused by K-major 128B swizzle: 1), stride byte offset >> 4 (32-45: one atom, 1024 B),
// swizzle mode (62-63: 1 = 128B). Tiles must start 1024-byte aligned (base offset 0).
// The low word (address, leading byte offset) and the whole descriptor from it: a loop that advances only the
// address field (bytes / 16; it never carries out of its 14 bits inside shared memory) adds 32-bit values to a
// low word, no 64-bit carry.
GN_DEVICE u32 wgmma_desc_k128_lo(u32 smem_addr) { return ((smem_addr & 0x3FFFF) >> 4) | (1u << 16); }
GN_DEVICE u64 wgmma_desc_k128_from_lo(u32 lo) { return ((u64)((1024 >> 4) | (1u << (62 - 32))) << 32) | lo; }
GN_DEVICE u64 wgmma_desc_k128(u32 smem_addr) { return wgmma_desc_k128_from_lo(wgmma_desc_k128_lo(smem_addr)); }

// Registers the next wgmma reads or writes were produced by ordinary instructions: order them first.
GN_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
GN_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most N committed groups are still running (N = 0: accumulators are readable).
template <int N> GN_DEVICE void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

// Shared memory written by ordinary stores must be made visible to the async proxy (wgmma, TMA) first.
GN_DEVICE void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
