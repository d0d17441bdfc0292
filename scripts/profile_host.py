"""cProfile of the host side of gn_mm.mm on a tiny problem (where the GPU work is negligible).

    python scripts/profile_host.py
"""

import cProfile
import pstats
import time

import torch

import gn_mm

a = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
w = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
for _ in range(100):
    gn_mm.mm(a, w.t())
torch.cuda.synchronize()
n = 3000
t = time.perf_counter()
for _ in range(n):
    gn_mm.mm(a, w.t())
host = (time.perf_counter() - t) / n * 1e6
torch.cuda.synchronize()
print(f"host time per call (no sync inside the loop): {host:.1f} us")
cProfile.run("for _ in range(2000): gn_mm.mm(a, w.t())", "/tmp/gn_mm_prof")
pstats.Stats("/tmp/gn_mm_prof").sort_stats("tottime").print_stats(18)
