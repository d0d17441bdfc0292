"""gn_mm configs against the vendor under sustained load: after 3 s of warm calls (the GPU at its power limit), every
config's call and the vendor's are interleaved call by call at the square sizes (`gn_mm.sol_sustained.interleaved`);
the ratio of each config to the vendor shows whether a tile shape, cluster, group order or ring depth moves anything
there (benchmarks/NOTES.md sm90 80, sm80 21).

    python scripts/sustained_configs.py --dtypes bf16,f16,e4m3 --out sm90_configs_sustained.json
    python scripts/sustained_configs.py --configs mma.sync,128x128x128B_w2x2_s6_g8 --dtypes bf16 --out sm80.json
"""

import argparse
import json
import sys

import torch

from gn_mm import bench
from gn_mm.sol_sustained import interleaved

SM90 = ("auto", "sm90_128x256_s4_g8_c2", "sm90_128x256_s4_g8_c1", "sm90_128x256_s4_g4_c2", "sm90_128x256_s4_g16_c2",
        "sm90_128x256_s3_g8_c2", "sm90_128x128_s6_g8_c1", "sm90_128x128_s6_g8_c2")


def measure(dtype: str, size: int, configs, rounds: int) -> dict:
    """Median ms per config and the vendor, and vendor / config; configs that cannot run are listed with why."""
    case = bench.CASES[dtype]
    sets = [case.make(size, size, size, "cuda") for _ in range(2 if size >= 8192 else 3)]
    fns, errors = {"vendor": lambda i: case.peer(sets[i % len(sets)])}, {}
    for name in configs:
        kw = {} if name == "auto" else {"config": name}
        fn = (lambda kw: lambda i: case.ours(sets[i % len(sets)], **kw))(kw)
        try:
            with case.flags():
                fn(0)  # compiles and checks the config outside the timed rounds
            fns[name] = fn
        except Exception as exc:  # a config that does not fit is reported, never hidden
            errors[name] = f"{type(exc).__name__}: {exc}"
    with case.flags():
        ms = interleaved(fns, rounds)
    return {"dtype": dtype, "size": size, "ms": ms, "x_vendor": {k: ms["vendor"] / v for k, v in ms.items()},
            "errors": errors}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", default="bf16", help=f"comma-separated, from {', '.join(bench.CASES)}")
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--configs", default=",".join(SM90), help="config names, families or auto")
    p.add_argument("--out", required=True, help="results JSON")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    result = {"environment": bench.environment(), "rows": []}
    for dtype in args.dtypes.split(","):
        for size in map(int, args.sizes.split(",")):
            row = measure(dtype, size, args.configs.split(","), 60 if size >= 8192 else 200)
            result["rows"].append(row)
            print(dtype, size, {k: round(v, 3) for k, v in row["x_vendor"].items()}, flush=True)
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
