"""Compile and first-call latency of one Hopper (or mma.sync) variant, each in a fresh process:

* cold: empty disk cache, the NVRTC compile of the kernel gn_mm.mm picks for a bf16 4096^3 problem;
* warm: the same call in a new process whose disk cache holds the cubin (CUDA context made beforehand).

    python scripts/compile_time.py [--out compile_time.json]
"""

import argparse
import json
import os
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
    env = dict(os.environ, GN_MM_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="compile_time.json")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        cold, warm = run(cache), run(cache)
    result = {"cold": cold, "warm": warm}
    print(json.dumps(result, indent=1))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
