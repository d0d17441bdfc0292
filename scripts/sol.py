"""Speed of light per dtype on this GPU: the same as `python -m gn_mm sol` (see gn_mm/sol.py).

    python scripts/sol.py [--dtypes bf16,s8] [--quick] [--out gn_mm_sol]
"""

import sys

from gn_mm.sol import main

if __name__ == "__main__":
    sys.exit(main())
