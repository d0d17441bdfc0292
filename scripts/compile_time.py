"""Compile and first-call latency of one Hopper (or mma.sync) variant, each in a fresh process:

* cold: empty disk cache, the NVRTC compile of the kernel gn_mm.mm picks for a bf16 4096^3 problem;
* warm: the same call in a new process whose disk cache holds the cubin (CUDA context made beforehand).

Both children run with CUDA_CACHE_DISABLE=1: NVRTC (13.0) keeps the cubins it builds in the driver's compute cache
(~/.nv/ComputeCache), so a repeated "cold" run of the same source would take ~0.05 s (NOTES sm90 79).

    python scripts/compile_time.py [--out compile_time.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time, torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()          # CUDA context first: not ours to count
import gn_mm
from gn_mm import runtime
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
t0 = time.perf_counter(); c = gn_mm.mm(a, a.t()); torch.cuda.synchronize(); first = time.perf_counter() - t0
t0 = time.perf_counter(); c = gn_mm.mm(a, a.t()); torch.cuda.synchronize(); second = time.perf_counter() - t0
print(json.dumps({"first_call_s": first, "second_call_s": second, "stats": dict(runtime.stats)}))
"""


def run(cache: str) -> dict:
    env = dict(os.environ, GN_MM_CACHE_DIR=cache, CUDA_CACHE_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="compile_time.json")
    p.add_argument("--runs", type=int, default=3, help="cold / warm pairs, each with its own empty cache")
    args = p.parse_args()
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            runs.append({"cold": run(cache), "warm": run(cache)})
    result = {**{f"{kind}_median_s": statistics.median(r[kind]["first_call_s"] for r in runs)
                 for kind in ("cold", "warm")}, "runs": runs}
    print(json.dumps(result, indent=1))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
