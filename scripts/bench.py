"""Benchmark gn_mm against torch peers per variant: the same as `python -m gn_mm bench` (gn_mm/bench.py).

    python scripts/bench.py --out benchmarks/results/sm80_mm_h100 [--variants bf16,s8] [--shapes square] [--quick]
"""

import sys

from gn_mm.bench import main

if __name__ == "__main__":
    sys.exit(main())
