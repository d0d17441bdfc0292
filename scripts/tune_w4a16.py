"""Time every candidate W4A16 config per M and (K, N): CUDA-graph GPU time, inputs past L2.
Candidates of the kernels: mma.sync (w4a16_...) and, on sm_90, wgmma (w4a16wg_...); with --decode the decode
kernel's (w4a16dec_..., M in 1, 16). --splits times each config under the heuristic's K splitting (h) and under
overrides (mma.sync / decode: K splits; wgmma: 1 whole tiles, s > 1 stream-K over tiles x s CTAs, at most one
per SM); --heuristic-config times only the config the heuristic picks.

    python scripts/tune_w4a16.py --out tune_w4a16.json [--ms 1,16,64,256,2048] [--splits h,1,2,4,8]
    python scripts/tune_w4a16.py --decode --ms 1 --splits h,1,2 [--dtype float16] [--shapes 4096x4096]
"""

import argparse
import json

import torch

from gn_mm import W4A16Config
from gn_mm.arch import Arch
from gn_mm import runtime, sm90_w4a16, w4a16_decode
from gn_mm.w4a16_decode import DecodeConfig as D
from gn_mm.sm90_w4a16 import Sm90W4A16Config as G
from gn_mm.bench_w4a16 import SHAPES, _weights
from gn_mm.timing import graph_time, rotation_sets
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
    8: [G(8, 2, 2, 6, 2)] + [G(8, 2, 1, s, 2, p) for s, p in ((6, 0), (8, 0), (8, 2))],
    16: [G(16, 2, 2, 4, 2, 2)] + [G(16, 2, 1, s, 2, p) for s, p in ((8, 2), (10, 2), (12, 2), (8, 1), (8, 3), (8, 4))] +
        [G(16, 1, 1, s, 2, 3) for s in (8, 12)],
    32: [G(32, 2, 2, 6, 2, 2)] + [G(32, 2, 1, s, 2, 2) for s in (6, 8, 10)],
    64: [G(64, 2, 1, 8), G(64, 2, 2, 6), G(64, 2, 1, 10), G(32, 4, 1, 8)] + [G(64, 2, 1, 8, 1, p) for p in (2, 4)] +
        [G(64, 1, 1, 8, 1, 2), G(64, 1, 1, 12, 1, 2), G(32, 2, 1, 8, 2, 2)],
    256: [G(128, 2, 1, 6), G(128, 2, 1, 9), G(256, 2, 1, 4), G(256, 2, 1, 5), G(64, 2, 1, 8, 1, 2), G(128, 1, 1, 8),
          G(128, 2, 1, 6, 1, 2)],
    2048: [G(256, 2, 1, 4), G(256, 2, 1, 5)],
}
if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):
    CANDIDATES = WGMMA  # the mma.sync configs are 1.5-4x slower there (benchmarks/results/w4a16_tune_h200.json)
# The decode kernel (any sm_80+ GPU): strips per CTA x warps per strip along K, ring depth, CTAs per SM.
DECODE = {1: [D(8, s, wk, d) for s, wk, d in ((2, 8, 4), (8, 2, 4), (7, 2, 4), (7, 2, 6))] + [D(8, 7, 2, 4, ahead=2)] +
             [G.parse("w4a16wg_8x256_c2_s6_k128")],
          16: [D(16, s, wk, d) for s, wk, d in ((2, 8, 4), (8, 2, 4), (16, 1, 4), (8, 1, 6), (4, 2, 6))]}
DECODE[4] = DECODE[8] = DECODE[1]

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="tune_w4a16.json")
    p.add_argument("--ms", default="1,16,64,256,2048")
    p.add_argument("--splits", default="h")
    p.add_argument("--heuristic-config", action="store_true")
    p.add_argument("--decode", action="store_true", help="only the decode kernel's candidates (M in 1, 16)")
    p.add_argument("--shapes", default=None, help="K x N list (default: the benchmark's)")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    args = p.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dram_tbs = runtime.dram_bandwidth(0) / 1e12
    arch = Arch.of_device()
    splits = [None if s == "h" else int(s) for s in args.splits.split(",")]
    rows = []
    shapes = SHAPES if not args.shapes else [tuple(map(int, x.split("x"))) for x in args.shapes.split(",")]
    for k, n in shapes:
        w_bytes = k * n // 2
        dtype = getattr(torch, args.dtype)
        weights = _weights(k, n, 128, dtype, "cuda", rotation_sets(w_bytes))
        for m in map(int, args.ms.split(",")):
            acts = [torch.randn(m, k, device="cuda").to(dtype) for _ in weights]
            line = []
            configs = [sm90_w4a16.choose(m, n, sms, 128, k // 64, sm90_w4a16.cluster_capacity(0), dram_tbs)] \
                if args.heuristic_config else \
                [None] + DECODE[m] if args.decode else CANDIDATES[m]  # None: what w4a16_mm picks
            for cfg in configs:
                name = cfg.name if cfg is not None else "heuristic"
                for sp in splits:
                    if sp is not None and sp > k // 64:
                        continue
                    try:
                        t = graph_time(lambda i: w4a16_mm(acts[i], weights[i][0], config=cfg, splits=sp),
                                        len(weights), 20)
                    except ValueError as exc:  # gn_mm.LayoutError: this config cannot run the shape
                        print(f"{name}/{sp}: {exc}")
                        continue
                    us = t["median_ms"] * 1e3
                    grid = stream = None
                    if isinstance(cfg, G):
                        grid, stream = sm90_w4a16.schedule(cfg, m, n, k // 64 // cfg.k_sub, sms, sp, dram_tbs)
                    if isinstance(cfg, D):
                        pick = w4a16_decode.choose(m, n, k // 64, sms, 128, False, w4a16_decode.smem_limit(arch), sp, cfg)
                        grid = pick and -(-n // 16 // cfg.strips) * pick[1]
                    rows.append({"k": k, "n": n, "m": m, "config": name, "splits": sp, "grid": grid,
                                 "stream": stream, "us": us})
                    line.append(f"{name}/{'h' if sp is None else sp}(grid {grid})={us:.1f}")
            print(f"{k}x{n} M={m}: " + "  ".join(line), flush=True)
        del weights
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
