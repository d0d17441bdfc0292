"""Every clustered sm90_mm config, for compute-sanitizer: the ones that split K inside a cluster (sums added
through distributed shared memory) and those that multicast B (pairs along M) or A (clusters along N), over
bf16, int8 and fp8, ragged M / N / K, clusters taking several tiles in turn (rings reused after a reduction,
barriers crossing units). A quick check of the cluster barriers; sanitize_cases.py covers samples of them among
everything else (racecheck over it takes ~6 minutes on the lent H100):

    compute-sanitizer --tool racecheck --error-exitcode 1 python scripts/sanitize_clusters.py
    compute-sanitizer --tool memcheck --error-exitcode 1 python scripts/sanitize_clusters.py
"""

import dataclasses

import torch

import gn_mm
from gn_mm.sm90_config import DECODE, FIT_CONFIGS, LONG_K_CONFIGS, SHARE_A_CONFIGS, SM90_CONFIGS, SPLIT_CLUSTERS

SPLITS = tuple(dict.fromkeys(SPLIT_CLUSTERS + LONG_K_CONFIGS))
MULTICAST = [c for c in SM90_CONFIGS + FIT_CONFIGS if c.cluster_m > 1] + list(SHARE_A_CONFIGS[::3])
dev = torch.device("cuda")
for dtype, acc in ((torch.bfloat16, torch.float32), (torch.int8, torch.int32), (torch.float8_e4m3fn, torch.float32)):
    for m, n, k in ((33, 1002, 2400), (300, 47, 2400)):  # K: 19+ k-tiles, enough for clusters of 8; N = 2 mod 4
        a = torch.randn(m, k, device=dev).clamp(-3, 3).to(dtype)
        w = torch.randn(n, k, device=dev).clamp(-3, 3).to(dtype)
        for cfg in SPLITS:
            gn_mm.mm(a, w.t(), acc_dtype=acc, config=cfg)
    a = torch.randn(300, 2048, device=dev).clamp(-3, 3).to(dtype)
    w = torch.randn(2000, 2048, device=dev).clamp(-3, 3).to(dtype)
    for ck in (4, 8):  # more tiles than resident clusters
        gn_mm.mm(a, w.t(), acc_dtype=acc, config=dataclasses.replace(DECODE, cluster_k=ck))
    # multicast: a lone row tile and parts past M / N (300 x 47); 1000 x 1100: several units for the narrow pairs
    for cfg in MULTICAST:
        for m, n, k in ((300, 47, 528), (1000, 1100, 528)):
            a = torch.randn(m, k, device=dev).clamp(-3, 3).to(dtype)
            w = torch.randn(n, k, device=dev).clamp(-3, 3).to(dtype)
            gn_mm.mm(a, w.t(), acc_dtype=acc, config=cfg)
torch.cuda.synchronize()
print(f"ran {len(SPLITS)} K-split and {len(MULTICAST)} multicast cluster configs x 3 dtypes")
