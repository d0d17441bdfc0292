"""Time every candidate W4A16 config per M and (K, N): CUDA-graph GPU time, inputs past L2.
Candidates of both kernels: mma.sync (w4a16_...) and, on sm_90, wgmma (w4a16wg_...). --splits times each
config under the heuristic's K splitting (h) and under overrides (wgmma: 1 whole tiles, s > 1 stream-K over
tiles x s CTAs, at most one per SM); --heuristic-config times only the config the heuristic picks.

    python scripts/tune_w4a16.py --out tune_w4a16.json [--ms 1,16,64,256,2048] [--splits h,1,2,4,8]
"""

import argparse
import json

import torch

from gn_mm import W4A16Config
from gn_mm import sm90_w4a16
from gn_mm.sm90_w4a16 import Sm90W4A16Config as G
from gn_mm.bench_w4a16 import SHAPES, _graph_time, _weights
from gn_mm.timing import rotation_sets
from gn_mm.w4a16 import w4a16_mm

C = W4A16Config
CANDIDATES = {
    1: [C(16, 256, 1, 8, 4), C(16, 256, 1, 8, 4, 3), C(16, 256, 1, 8, 4, 4), C(16, 128, 1, 4, 6, 6),
        C(16, 128, 1, 4, 4, 8), C(16, 256, 1, 8, 6, 3)],
    64: [C(64, 128, 2, 4, 4), C(32, 128, 1, 4, 6), C(64, 128, 2, 4, 4, 2), C(32, 128, 1, 4, 6, 3), C(64, 64, 2, 2, 6, 3)],
    256: [C(128, 128, 4, 2, 4), C(64, 128, 2, 4, 4), C(128, 128, 2, 4, 4)],
}
CANDIDATES[16] = CANDIDATES[1]
CANDIDATES[2048] = [C(64, 128, 2, 4, 4), C(128, 128, 2, 4, 4)]
WGMMA = {
    1: [G(8, 2, 2, 8), G(8, 2, 2, 6, 2), G(8, 2, 2, 5, 2), G(8, 2, 2, 4, 2)],
    16: [G(16, 2, 2, 8), G(16, 2, 2, 6, 2), G(16, 2, 2, 4, 2)],
    64: [G(64, 2, 1, 8), G(64, 2, 2, 6), G(64, 2, 1, 10), G(32, 4, 1, 8)],
    256: [G(128, 2, 1, 6), G(128, 2, 1, 9), G(256, 2, 1, 4), G(256, 2, 1, 5)],
    2048: [G(256, 2, 1, 4), G(256, 2, 1, 5)],
}
if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):
    CANDIDATES = WGMMA  # the mma.sync configs are 1.5-4x slower there (benchmarks/results/w4a16_tune_h200.json)

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="tune_w4a16.json")
    p.add_argument("--ms", default="1,16,64,256,2048")
    p.add_argument("--splits", default="h")
    p.add_argument("--heuristic-config", action="store_true")
    args = p.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    splits = [None if s == "h" else int(s) for s in args.splits.split(",")]
    rows = []
    for k, n in SHAPES:
        w_bytes = k * n // 2
        weights = _weights(k, n, 128, torch.bfloat16, "cuda", rotation_sets(w_bytes))
        for m in map(int, args.ms.split(",")):
            acts = [torch.randn(m, k, device="cuda").bfloat16() for _ in weights]
            line = []
            configs = [sm90_w4a16.choose(m, n, sms, 128, k // 64)] if args.heuristic_config else CANDIDATES[m]
            for cfg in configs:
                for sp in splits:
                    if sp is not None and sp > k // 64:
                        continue
                    t = _graph_time(lambda i: w4a16_mm(acts[i], weights[i][0], config=cfg, splits=sp),
                                    len(weights), 20)
                    us = t["median_ms"] * 1e3
                    grid = stream = None
                    if isinstance(cfg, G):
                        grid, stream = sm90_w4a16.schedule(cfg, m, n, k // 64 // cfg.k_sub, sms, sp)
                    rows.append({"k": k, "n": n, "m": m, "config": cfg.name, "splits": sp, "grid": grid,
                                 "stream": stream, "us": us})
                    line.append(f"{cfg.name}/{'h' if sp is None else sp}(grid {grid})={us:.1f}")
            print(f"{k}x{n} M={m}: " + "  ".join(line), flush=True)
        del weights
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
