"""Benchmark gn_mm against torch peers per variant (see gn_mm/bench.py). Writes <out>.json and <out>.md.

    python scripts/bench.py --out benchmarks/results/sm80_mm_h100 [--variants bf16,s8] [--quick]
"""

import argparse
import sys

from gn_mm import bench


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", default=",".join(bench.CASES))
    p.add_argument("--shapes", choices=["square", "llm", "all"], default="all")
    p.add_argument("--quick", action="store_true", help="4096^3 only, fewer repetitions")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out", default="bench")
    args = p.parse_args()
    shapes = {"square": bench.SQUARE, "llm": bench.LLM, "all": bench.SQUARE + bench.LLM}[args.shapes]
    if args.quick:
        shapes, args.reps = bench.SQUARE[:1], 10
    try:
        from tqdm import tqdm
        progress = lambda jobs: tqdm(jobs, desc="bench", file=sys.stderr)  # noqa: E731
    except ImportError:
        progress = None
    result = bench.run(args.variants.split(","), shapes, reps=args.reps, progress=progress)
    bench.save(result, args.out)
    print(bench.markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
