"""Every config that splits K inside a cluster (sums added through distributed shared memory), for
compute-sanitizer: ragged M / N / K over bf16, int8 and fp8, and clusters that take several tiles in turn (each
reduction's ring reused for the next tile). A quick check of the reduction's barriers; sanitize_cases.py covers
them too, among everything else (racecheck over it takes ~6 minutes on the lent H100):

    compute-sanitizer --tool racecheck --error-exitcode 1 python scripts/sanitize_cluster_k.py
    compute-sanitizer --tool memcheck --error-exitcode 1 python scripts/sanitize_cluster_k.py
"""

import dataclasses

import torch

import gn_mm
from gn_mm.sm90_config import DECODE, SPLIT_CLUSTERS

dev = torch.device("cuda")
for dtype, acc in ((torch.bfloat16, torch.float32), (torch.int8, torch.int32), (torch.float8_e4m3fn, torch.float32)):
    for m, n, k in ((33, 1000, 2400), (300, 47, 2400)):  # K: 19+ k-tiles, enough for clusters of 8
        a = torch.randn(m, k, device=dev).clamp(-3, 3).to(dtype)
        w = torch.randn(n, k, device=dev).clamp(-3, 3).to(dtype)
        for cfg in SPLIT_CLUSTERS:
            gn_mm.mm(a, w.t(), acc_dtype=acc, config=cfg)
    a = torch.randn(300, 2048, device=dev).clamp(-3, 3).to(dtype)
    w = torch.randn(2000, 2048, device=dev).clamp(-3, 3).to(dtype)
    for ck in (4, 8):  # more tiles than resident clusters
        gn_mm.mm(a, w.t(), acc_dtype=acc, config=dataclasses.replace(DECODE, cluster_k=ck))
torch.cuda.synchronize()
print(f"ran {len(SPLIT_CLUSTERS)} cluster configs x 3 dtypes x 2 shapes, and clusters of 4 / 8 over several tiles")
