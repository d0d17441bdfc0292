"""How fast can per-warp shared-memory rings stream a weight, with nothing else to do? 16 warps per CTA, each
streaming its share (contiguous, or stage-interleaved like w4a16_decode's packing) through a ring of DEPTH
stages of CHUNK bytes, filled by per-lane cp.async (16 bytes a lane) or by one cp.async.bulk per stage (sm_90),
for the W4A16 benchmark's weight sizes; timed like the W4A16 benchmark (CUDA graph of 10 calls, inputs past L2,
GPU time). A measuring probe, not a library kernel: the w4a16_decode ring's ceiling (NOTES W4A16 24).

    python scripts/ring_probe.py benchmarks/results/ring_probe_<gpu>.json
"""
import json, sys, torch
from torch.cuda._utils import _cuda_load_module
from gn_mm import compiler, runtime
from gn_mm.arch import Arch
from gn_mm.timing import graph_time, rotation_sets

HDR = r'''
typedef unsigned long long u64; typedef unsigned u32;
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
'''
BODY = r'''
extern "C" __global__ void __launch_bounds__(512, 1) ring_@MODE@_@DEPTH@_@CHUNK@_@IL@(const uint4* __restrict__ p, int stages, unsigned* out) {
  constexpr int MODE = @MODE@, DEPTH = @DEPTH@, CHUNK = @CHUNK@, IL = @IL@, V = CHUNK / 512;
  extern __shared__ __align__(128) unsigned char sm[];
  __shared__ __align__(8) u64 bars[16][DEPTH];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const u64 gw = blockIdx.x * 16 + warp, nw = gridDim.x * 16;
  const u32 ring = smem_u32(sm) + warp * DEPTH * CHUNK;
  auto src = [&](u64 i) { return p + (IL ? (i * nw + gw) : (gw * stages + i)) * (CHUNK / 16); };
  unsigned acc = 0;
  if (MODE == 0) {
    auto fetch = [&](int slot, u64 i) {
      if (i < stages) {
#pragma unroll
        for (int r = 0; r < V; ++r)
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(ring + slot * CHUNK + r * 512 + lane * 16), "l"(src(i) + r * 32 + lane));
      }
      asm volatile("cp.async.commit_group;\n" ::);
    };
    for (int j = 0; j < DEPTH - 1; ++j) fetch(j, j);
    for (u64 i = 0; i < stages; ++i) {
      const int slot = i % DEPTH;
      asm volatile("cp.async.wait_group %0;\n" :: "n"(DEPTH - 2));
      __syncwarp();
#pragma unroll
      for (int r = 0; r < V; ++r) { const uint4 v = *(const uint4*)(sm + warp * DEPTH * CHUNK + slot * CHUNK + r * 512 + lane * 16); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
      fetch((slot + DEPTH - 1) % DEPTH, i + DEPTH - 1);
    }
  } else {
    const u32 bar0 = smem_u32(&bars[warp][0]);
    if (lane == 0) {
      for (int j = 0; j < DEPTH; ++j) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(bar0 + 8 * j) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncwarp();
    auto fetch = [&](int slot, u64 i) {
      if (lane == 0 && i < stages) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar0 + 8 * slot), "r"(CHUNK) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                     :: "r"(ring + slot * CHUNK), "l"(src(i)), "r"(CHUNK), "r"(bar0 + 8 * slot) : "memory");
      }
    };
    for (int j = 0; j < DEPTH; ++j) fetch(j, j);
    for (u64 i = 0; i < stages; ++i) {
      const int slot = i % DEPTH;
      u32 done;
      do {
        asm volatile("{\n.reg .pred q;\nmbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2;\nselp.u32 %0, 1, 0, q;\n}\n"
                     : "=r"(done) : "r"(bar0 + 8 * slot), "r"((u32)((i / DEPTH) & 1)) : "memory");
      } while (!done);
#pragma unroll
      for (int r = 0; r < V; ++r) { const uint4 v = *(const uint4*)(sm + warp * DEPTH * CHUNK + slot * CHUNK + r * 512 + lane * 16); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
      __syncwarp();
      fetch(slot, i + DEPTH);
    }
  }
  if (acc == 0x9E3779B9u) out[0] = acc;
}
'''
CFGS = [(0, 4, 512), (0, 8, 512), (0, 16, 512), (0, 4, 1024), (0, 8, 1024), (0, 4, 2048),
        (1, 4, 512), (1, 8, 512), (1, 16, 512), (1, 4, 1024), (1, 8, 1024), (1, 4, 2048), (1, 6, 2048), (1, 3, 4096)]

def main(out):
    arch = Arch.of_device(torch.device("cuda"))
    src = HDR + "".join(BODY.replace("@MODE@", str(m)).replace("@DEPTH@", str(d)).replace("@CHUNK@", str(c)).replace("@IL@", str(il))
                        for m, d, c in CFGS for il in (0, 1))
    fns = {}
    res = compiler.compile_source(src, "ring_0_4_512_0", arch, compiler.default_backend(), lambda: None)
    mod = _cuda_load_module(res.cubin)
    for m, d, c in CFGS:
        for il in (0, 1):
            fns[(m, d, c, il)] = getattr(mod, f"ring_{m}_{d}_{c}_{il}")
            fns[(m, d, c, il)].set_shared_memory_config(16 * d * c)
    sink = torch.zeros(4, dtype=torch.int32, device="cuda")
    rows = []
    for nbytes in (4096 * 4096 // 2, 4096 * 14336 // 2, 8192 * 28672 // 2):
        sets = [torch.randint(0, 1 << 30, (nbytes // 4,), dtype=torch.int32, device="cuda")
                for _ in range(rotation_sets(nbytes))]
        for grid in (128, 132):
            for (m, d, c, il), fn in fns.items():
                stages = nbytes // (grid * 16 * c)
                smem = 16 * d * c
                def call(i, fn=fn, grid=grid, stages=stages, smem=smem):
                    runtime.launch(fn, (grid, 1, 1), (512, 1, 1), [sets[i], stages, sink], smem)
                us = graph_time(call, len(sets), 30)["median_ms"] * 1e3
                rb = stages * grid * 16 * c
                rows.append({"bytes": rb, "grid": grid, "mode": ["cp.async", "bulk"][m], "depth": d, "chunk": c,
                             "interleaved": il, "us": us, "gbs": rb / us / 1e3})
                print(rows[-1], flush=True)
        sets.clear()
        torch.cuda.empty_cache()
    json.dump(rows, open(out, "w"), indent=1)

main(sys.argv[1])
