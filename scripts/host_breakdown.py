"""Where a small gn_mm.mm call spends its host time, and what the GPU alone takes (CUDA graph replay).

    python scripts/host_breakdown.py
"""

import time

import torch

import gn_mm
from gn_mm import api


def us(fn, n=3000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def graph_us(fn, n=200):
    fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


if __name__ == "__main__":
    dev = torch.device("cuda")
    for m, n, k in [(16, 64, 64), (16, 4096, 4096), (128, 4096, 4096)]:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        gn_mm.mm(a, w.t())
        gpu = api._gpu(0)
        plan = api._plan(gn_mm.variant_table.find("bf16", "bf16", "f32"), "bf16", m, n, 2 * k, gpu, None, None)
        c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        kw = dict(m=m, n=n, k_bytes=2 * k, lda_bytes=2 * k, ldb_bytes=2 * k)
        print(f"{m}x{n}x{k} ({type(plan).__module__}, splits {plan.splits}, grid {getattr(plan, 'grid', '-')}):"
              f" mm {us(lambda: gn_mm.mm(a, w.t())):.1f} us, plan.launch {us(lambda: plan.launch(a, w, c, **kw)):.1f},"
              f" torch.empty {us(lambda: torch.empty(m, n, device=dev, dtype=torch.bfloat16)):.1f},"
              f" torch.matmul {us(lambda: torch.matmul(a, w.t())):.1f};"
              f" graph replay: gn_mm {graph_us(lambda: gn_mm.mm(a, w.t(), out=c)):.1f},"
              f" torch {graph_us(lambda: torch.matmul(a, w.t(), out=c)):.1f}", flush=True)
