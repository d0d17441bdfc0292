"""Time every candidate W4A16 config (heuristic splits) per M and (K, N): CUDA-graph GPU time, inputs past L2.

    python scripts/tune_w4a16.py --out tune_w4a16.json [--ms 1,16,64,256]
"""

import argparse
import json

import torch

from gn_mm import W4A16Config
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

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="tune_w4a16.json")
    p.add_argument("--ms", default="1,16,64,256")
    args = p.parse_args()
    rows = []
    for k, n in SHAPES:
        w_bytes = k * n // 2
        weights = _weights(k, n, 128, torch.bfloat16, "cuda", rotation_sets(w_bytes))
        for m in map(int, args.ms.split(",")):
            acts = [torch.randn(m, k, device="cuda").bfloat16() for _ in weights]
            line = []
            for cfg in CANDIDATES[m]:
                t = _graph_time(lambda i: w4a16_mm(acts[i], weights[i][0], config=cfg), len(weights), 20)
                us = t["median_ms"] * 1e3
                rows.append({"k": k, "n": n, "m": m, "config": cfg.name, "us": us})
                line.append(f"{cfg.name}={us:.1f}")
            print(f"{k}x{n} M={m}: " + "  ".join(line), flush=True)
        del weights
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
