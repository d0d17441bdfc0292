// TMA bulk-tensor loads and mbarriers (sm_90+): the producer/consumer handshake of the Hopper kernels.
#pragma once
#include "../common.cuh"

// A CUtensorMap, opaque to the device: 128 bytes, 64-byte aligned, built on the host
// (gn_mm/tma.py: cuTensorMapEncodeTiled) and passed as a __grid_constant__ kernel parameter.
struct __align__(64) TmaDesc { u64 opaque[16]; };

GN_DEVICE void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Make barrier initialisation visible to the async proxy (TMA) before any use.
GN_DEVICE void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// Producer: this phase completes after one arrival plus `bytes` bytes of TMA transactions.
GN_DEVICE void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
GN_DEVICE void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Spin until the phase with this parity has completed.
GN_DEVICE void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
// mbar_wait for a barrier that other CTAs of the cluster complete (st.async): acquire at cluster scope, so that their
// writes counted on it are visible here.
GN_DEVICE void mbar_wait_cluster(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

// True in one lane of the (converged, full) warp: the lane that issues for all of them.
GN_DEVICE bool elect_one() {
  u32 pred;
  asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n" : "=r"(pred));
  return pred;
}

// One 2-D box (x = byte offset along K, y = row) of the tensor map into shared memory; completion is
// counted in bytes on `bar`. Out-of-range parts of the box arrive as zeros.
GN_DEVICE void tma_load_2d(u32 dst, const TmaDesc* map, int x, int y, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"((u64)map), "r"(x), "r"(y), "r"(bar) : "memory");
}
// A contiguous run of global memory (16-byte aligned, a multiple of 16 bytes) into shared memory, counted on
// `bar` like a tensor load: no tensor map, for operands already stored in the order the kernel reads them.
GN_DEVICE void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// `bytes` (a multiple of 16) from global memory into L2, without waiting or a destination.
GN_DEVICE void bulk_prefetch_l2(const void* src, u32 bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"((u64)src), "r"(bytes) : "memory");
}
// One 2-D box of the tensor map into L2 only: no destination, no barrier, nothing to wait for.
GN_DEVICE void tma_prefetch_2d(const TmaDesc* map, int x, int y) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"((u64)map), "r"(x), "r"(y)
               : "memory");
}
// Programmatic dependent launch: wait until the previous grid in the stream has completed and its memory is
// visible (returns at once for a plain launch); let the next grid in the stream launch.
GN_DEVICE void griddep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
GN_DEVICE void griddep_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
GN_DEVICE void tma_prefetch_desc(const TmaDesc* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((u64)map) : "memory");
}

// Warp-specialised register budgets (needs __launch_bounds__ with a block count, or ptxas ignores it).
template <int REGS> GN_DEVICE void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS)); }
template <int REGS> GN_DEVICE void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS)); }

// ---- clusters (thread-block clusters of sm_90) ----
GN_DEVICE u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster, for what peers read of this CTA's shared memory: the release covers
// only this CTA's shared-memory writes (sync_restrict::shared::cta: MEMBAR.ALL.CTA in SASS), where a plain
// `barrier.cluster.arrive.release` is MEMBAR.ALL.GPU and waits for every global store in flight (NOTES sm90 29, 47).
GN_DEVICE void cluster_sync_smem() {
#if __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8)
  asm volatile("fence.release.sync_restrict::shared::cta.cluster;\nbarrier.cluster.arrive.relaxed.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else  // the restricted fence is PTX 8.6 (CUDA 12.8): older NVRTCs (torch's cu126 builds) get the full release
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
// A cluster barrier that orders nothing (relaxed arrive): for a thread whose accesses need no ordering, or whose
// reads of peers are complete because their values were consumed before it arrives.
GN_DEVICE void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The same shared-memory offset in CTA `rank` of the cluster (a shared::cluster address).
GN_DEVICE u32 cluster_map(u32 smem_addr, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_addr), "r"(rank));
  return r;
}
// Arrive on a barrier of any CTA of the cluster. Default (.release.cta) semantics, as the consumer release of
// a multicast pipeline needs: a .release.cluster arrive fences every prior access at cluster scope and
// halved the kernel's throughput on an H100.
GN_DEVICE void mbar_arrive_cluster(u32 cluster_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}
// Two (four) 32-bit words of another CTA's shared memory (a shared::cluster address from cluster_map, aligned).
GN_DEVICE void ld_cluster(u32 cluster_addr, u32 (&v)[2]) {
  asm volatile("ld.shared::cluster.v2.b32 {%0, %1}, [%2];\n" : "=r"(v[0]), "=r"(v[1]) : "r"(cluster_addr) : "memory");
}
GN_DEVICE void ld_cluster(u32 cluster_addr, u32 (&v)[4]) {
  asm volatile("ld.shared::cluster.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(cluster_addr) : "memory");
}
// 16 bytes into another CTA's shared memory (shared::cluster addresses from cluster_map), counted in bytes on that CTA's
// barrier `cluster_bar` like a TMA copy: the receiver waits on its barrier, the sender waits for nothing.
GN_DEVICE void st_async(u32 cluster_addr, float4 v, u32 cluster_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n"
               ::"r"(cluster_addr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(cluster_bar) : "memory");
}
// Like tma_load_2d, but the box lands at the same offset in every CTA of `mask` and completes on the
// barrier at the same offset in each of them.
GN_DEVICE void tma_load_2d_multicast(u32 dst, const TmaDesc* map, int x, int y, u32 bar, u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n"
      ::"r"(dst), "l"((u64)map), "r"(x), "r"(y), "r"(bar), "h"(mask) : "memory");
}

// ---- TMA stores (shared -> global), tracked per issuing thread in bulk groups ----
// A 2-D box of shared memory (laid out as the tensor map's swizzle says) to global (x = column, y = row);
// parts outside the tensor are not written.
GN_DEVICE void tma_store_2d(const TmaDesc* map, u32 src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
               ::"l"((u64)map), "r"(x), "r"(y), "r"(src) : "memory");
}
GN_DEVICE void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N of this thread's bulk groups still read their shared memory.
template <int N> GN_DEVICE void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory"); }
template <int N> GN_DEVICE void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory"); }
// Barrier `id` (1..15; 0 is __syncthreads) among `count` threads: one warpgroup synchronising alone.
GN_DEVICE void named_barrier(int id, int count) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory"); }
