"""Time every config of a kernel family on a few variants and shapes; writes JSON and prints a table.

    python scripts/tune.py --family sm80 --out benchmarks/results/sm80_tune_h100 [--variants bf16,s8]
    python scripts/tune.py --family sm90 --configs sm90_128x256_s4_g8_c2,sm90_128x256_s3_g16_c2
"""

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

from gn_mm import bench, config, runtime, sm80_mm, sm90_mm, variant_table as variants
from gn_mm.arch import Arch
from gn_mm.sm90_config import SM90_CONFIGS, Sm90Config
from gn_mm.timing import bench as time_it

VARIANT_OF = {"bf16": ("bf16", "bf16", "f32", "bf16"), "f16acc": ("f16", "f16", "f16", "f16"),
              "s8": ("s8", "s8", "s32", "s32"), "e4m3": ("e4m3", "e4m3", "f32", "bf16"),
              "s4": ("s4", "s4", "s32", "s32"), "tf32": ("tf32", "tf32", "f32", "f32")}



def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--variants", default="bf16,s8,f16acc,e4m3,s4,tf32")
    p.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,128x14336x4096")
    p.add_argument("--configs", default="", help="comma-separated config names instead of every candidate")
    p.add_argument("--family", choices=["sm80", "sm90"], default="sm80")
    p.add_argument("--out", default="tune")
    args = p.parse_args()
    dev = torch.device("cuda")
    arch = Arch.of_device(dev)
    names = args.variants.split(",")
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    todo = []
    for nm in names:
        a, b, acc, out = VARIANT_OF[nm]
        v = variants.find(a, b, acc)
        if args.family == "sm90":
            v = variants.find_path(a, b, acc, "wgmma")
            cands = [Sm90Config.parse(c) for c in args.configs.split(",")] if args.configs else list(SM90_CONFIGS)
        else:
            cands = ([config.Sm80Config.parse(c) for c in args.configs.split(",")] if args.configs else
                     config.sm80_candidates(arch, emulated=arch.cc in v.emulated_on, acc=v.acc))
        for cfg in cands:
            todo.append((nm, v, out, cfg))

    def build(t):
        s = sm90_mm.spec(t[1], t[2], t[3]) if args.family == "sm90" else sm80_mm.spec(t[1], t[2], t[3], arch)
        return runtime.build(s)

    with ThreadPoolExecutor(16) as pool:  # warm the disk cache in parallel
        list(pool.map(build, todo))
    rows = []
    for nm, v, out, cfg in todo:
        case = bench.CASES[nm]
        for m, n, k in shapes:
            x = case.make(m, n, k, dev)
            sets = [x] + [case.make(m, n, k, dev) for _ in range(2)]
            fn = lambda i: case.ours(sets[i], config=cfg)  # noqa: E731
            t = time_it(fn, len(sets), reps=15)
            tf = 2 * m * n * k / t["median_ms"] / 1e9
            rows.append({"variant": nm, "config": cfg.name, "m": m, "n": n, "k": k, "tflops": tf,
                         })
            print(f"{nm:7} {cfg.name:30} {m}x{n}x{k}: {tf:8.1f}", flush=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"environment": bench.environment(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
