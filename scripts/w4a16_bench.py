"""W4A16 benchmark: the same as `python -m gn_mm w4a16-bench` (gn_mm/bench_w4a16.py).

    python scripts/w4a16_bench.py --out benchmarks/results/w4a16_h100 [--dtype bfloat16] [--ms 1,16,64,256,2048]
"""

import sys

from gn_mm.bench_w4a16 import main

if __name__ == "__main__":
    sys.exit(main())
