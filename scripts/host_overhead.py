"""Host-side cost of one gn_mm.mm call (Python + launch) against torch.matmul, on a tiny problem where the
GPU work is negligible, then per decode-sized shape where that time goes and what the GPU alone takes
(CUDA-graph replay). Prints microseconds per call.

    python scripts/host_overhead.py [--profile]     (--profile: cProfile of the gn_mm.mm host path)
"""

import cProfile
import pstats
import sys
import time

import torch

import gn_mm
from gn_mm import api


def graph_us(fn, n: int = 200) -> float:
    """Per call with the host out of the way: fn captured once in a CUDA graph, the graph replayed."""
    fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return per_call_us(g.replay, n)


def breakdown(m: int, n: int, k: int) -> str:
    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    gn_mm.mm(a, w.t())
    plan = api._plan(gn_mm.variant_table.find("bf16", "bf16", "f32"), "bf16", m, n, 2 * k, api._gpu(0), None, None)
    c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    kw = dict(m=m, n=n, k_bytes=2 * k, lda_bytes=2 * k, ldb_bytes=2 * k)
    return (f"{m}x{n}x{k} ({type(plan).__module__}, splits {plan.splits}, grid {getattr(plan, 'grid', '-')}):"
            f" mm {per_call_us(lambda: gn_mm.mm(a, w.t())):.1f} us, plan.launch "
            f"{per_call_us(lambda: plan.launch(a, w, c, **kw)):.1f}, torch.empty "
            f"{per_call_us(lambda: torch.empty(m, n, device=dev, dtype=torch.bfloat16)):.1f}, torch.matmul "
            f"{per_call_us(lambda: torch.matmul(a, w.t())):.1f}; graph replay: gn_mm "
            f"{graph_us(lambda: gn_mm.mm(a, w.t(), out=c)):.1f}, torch {graph_us(lambda: torch.matmul(a, w.t(), out=c)):.1f}")


def per_call_us(fn, n: int = 2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


if __name__ == "__main__":
    a = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    a8, w8 = a.to(torch.int8), w.to(torch.int8)
    s = torch.ones(1, device="cuda")
    print(f"gn_mm.mm bf16            {per_call_us(lambda: gn_mm.mm(a, w.t())):7.1f} us/call")
    print(f"gn_mm.mm s8 + scales     {per_call_us(lambda: gn_mm.mm(a8, w8.t(), scale_a=s, scale_b=s)):7.1f} us/call")
    print(f"torch.matmul bf16        {per_call_us(lambda: torch.matmul(a, w.t())):7.1f} us/call")
    for shape in [(16, 64, 64), (16, 4096, 4096), (128, 4096, 4096)]:
        print(breakdown(*shape), flush=True)
    if "--profile" in sys.argv:
        cProfile.run("for _ in range(2000): gn_mm.mm(a, w.t())", "/tmp/gn_mm_prof")
        pstats.Stats("/tmp/gn_mm_prof").sort_stats("tottime").print_stats(18)
