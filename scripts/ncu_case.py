"""One gn_mm.mm call of a given shape and dtype, for profilers (ncu / nsys):

    ncu --section SpeedOfLight python scripts/ncu_case.py bf16 16 4096 4096 [mma.sync|wgmma]
"""

import sys

import torch

import gn_mm

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn, "s8": torch.int8,
          "tf32": torch.float32}

if __name__ == "__main__":
    name, m, n, k = sys.argv[1], *map(int, sys.argv[2:5])
    dt = DTYPES[name]
    a = torch.randn(m, k, device="cuda").to(dt) if name != "s8" else torch.randint(-8, 8, (m, k), device="cuda").to(dt)
    w = torch.randn(n, k, device="cuda").to(dt) if name != "s8" else torch.randint(-8, 8, (n, k), device="cuda").to(dt)
    for _ in range(3):
        gn_mm.mm(a, w.t(), config=sys.argv[5] if len(sys.argv) > 5 else None)
    torch.cuda.synchronize()
