"""One gn_mm.w4a16_mm call (G = 128, symmetric, bf16) of a given shape, for profilers:

    ncu --section SpeedOfLight python scripts/ncu_w4a16.py M K N [config]
"""

import sys

import torch

import gn_mm
from gn_mm import w4a16_formats as fmt

if __name__ == "__main__":
    m, k, n = map(int, sys.argv[1:4])
    config = sys.argv[4] if len(sys.argv) > 4 else None
    q = torch.randint(0, 16, (k, n), device="cuda", dtype=torch.int32)
    scales = (torch.rand(k // 128, n, device="cuda") * 0.01).bfloat16()
    w = gn_mm.prepare_w4a16(fmt.pack_nibbles(q, dim=1), scales, group_size=128)
    a = torch.randn(m, k, device="cuda").bfloat16()
    for _ in range(3):
        gn_mm.w4a16_mm(a, w, config=config)
    torch.cuda.synchronize()
