"""The realistic floor of a decode-sized weight stream on this GPU: a kernel that only reads B bytes (the int4
weights of the W4A16 benchmark shapes; each CTA a contiguous share, 8 x 16-byte loads in flight per thread) and
does nothing else, timed like the W4A16 benchmark (CUDA graph of 10 calls, inputs rotated past L2), for several
grids, with plain launches and with programmatic dependent launch plus an L2 prefetch of the CTA's share.
A measuring probe, not a library kernel (its 20 lines of CUDA live here for that reason).

    python scripts/stream_floor.py benchmarks/results/stream_floor_<gpu>.json
"""
import json, sys, torch
from torch.cuda._utils import _cuda_load_module
from gn_mm import compiler, runtime
from gn_mm.arch import Arch
from gn_mm.timing import graph_time, rotation_sets

SRC = r'''
typedef unsigned long long u64;
extern "C" __global__ void __launch_bounds__(512) stream(const uint4* __restrict__ p, u64 n16, unsigned* out, int pdl) {
  const u64 per = (n16 + gridDim.x - 1) / gridDim.x;
  const u64 b0 = blockIdx.x * per, b1 = min(n16, b0 + per);
  if (pdl) {
    if (threadIdx.x == 0) for (u64 o = b0; o < b1; o += 2048)  // 32 KB pieces
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p + o), "r"((unsigned)(min(b1 - o, (u64)2048) * 16)) : "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  unsigned acc = 0;
  u64 i = b0 + threadIdx.x;
  for (; i + 7 * blockDim.x < b1; i += 8 * blockDim.x) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w) : "l"(p + i + j * blockDim.x));
#pragma unroll
    for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < b1; i += blockDim.x) { uint4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x9E3779B9u) out[0] = acc;
}
'''

def main(out):
    arch = Arch.of_device(torch.device("cuda"))
    res = compiler.compile_source(SRC, "stream", arch, compiler.default_backend(), lambda: None)
    fn = getattr(_cuda_load_module(res.cubin), "stream")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.zeros(4, dtype=torch.int32, device="cuda")
    rows = []
    for nbytes in (4096 * 4096 // 2, 4096 * 14336 // 2, 8192 * 28672 // 2):
        sets = [torch.randint(0, 1 << 30, (nbytes // 4,), dtype=torch.int32, device="cuda")
                for _ in range(rotation_sets(nbytes))]
        for grid in (sms, 2 * sms, 4 * sms):
            for threads in (256, 512):
                for pdl in (0, 1):
                    def call(i, grid=grid, threads=threads, pdl=pdl):
                        runtime.launch(fn, (grid, 1, 1), (threads, 1, 1), [sets[i], nbytes // 16, sink, pdl], 0,
                                       dependent=bool(pdl))
                    us = graph_time(call, len(sets), 30)["median_ms"] * 1e3
                    rows.append({"bytes": nbytes, "grid": grid, "threads": threads, "pdl": pdl, "us": us,
                                 "gbs": nbytes / us / 1e3})
                    print(rows[-1], flush=True)
        sets.clear()
        torch.cuda.empty_cache()
    z = torch.zeros(1, device="cuda")
    rows.append({"empty_kernel_us": graph_time(lambda i: z.add_(1), 1, 30)["median_ms"] * 1e3})
    print(rows[-1])
    json.dump(rows, open(out, "w"), indent=1)

main(sys.argv[1])
