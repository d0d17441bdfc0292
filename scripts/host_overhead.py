"""Host-side cost of one gn_mm.mm call (Python + launch) against torch.matmul, on a tiny problem where the
GPU work is negligible. Prints microseconds per call.

    python scripts/host_overhead.py [--profile]     (--profile: cProfile of the gn_mm.mm host path)
"""

import cProfile
import pstats
import sys
import time

import torch

import gn_mm


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
    if "--profile" in sys.argv:
        cProfile.run("for _ in range(2000): gn_mm.mm(a, w.t())", "/tmp/gn_mm_prof")
        pstats.Stats("/tmp/gn_mm_prof").sort_stats("tottime").print_stats(18)
