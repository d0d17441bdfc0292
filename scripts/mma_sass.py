"""Instruction ceilings of every mma.sync variant on this GPU, with the SASS tensor-core mix of each
microbenchmark (so an emulated or hoisted loop is visible). Writes <out>.json.

    python scripts/mma_sass.py --out mma_sass
"""

import argparse
import json
import sys

import torch

from gn_mm import microbench, runtime, sass, variant_table as variants
from gn_mm.arch import Arch


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="mma_sass")
    args = p.parse_args()
    arch = Arch.of_device()
    rows = []
    for v in variants.MMA_SYNC:
        if v.a != v.b or arch.cc < v.min_arch:
            continue
        built = runtime.build(microbench.spec(v, arch))
        text = sass.disassemble(built.cubin)
        mix = dict(sass.tensor_core_mix(text)) if text else "unknown (no disassembler)"
        ceil = microbench.mma_ceiling(v)
        ldsm = None if arch.cc in v.emulated_on else microbench.mma_ceiling(v, loop="ldmatrix")["tflops"]
        rows.append({"variant": v.name, "instr": v.instr, "tflops": ceil["tflops"],
                     "ldmatrix_loop_tflops": ldsm, "sass_mix": mix})
        print(f"{v.name:18} {ceil['tflops']:8.1f} {ldsm or 0:8.1f}  {mix}", flush=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "arch": arch.name, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
