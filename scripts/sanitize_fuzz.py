"""The fuzz tier's random problems (tests/test_fuzz_gpu.py) that are small enough for compute-sanitizer, run one
after another within a time budget: random layouts, explicit configs and split counts under memcheck, beside the
fixed cases of scripts/sanitize_cases.py.

    compute-sanitizer --tool memcheck python scripts/sanitize_fuzz.py [seconds]     (default 240)
"""

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_fuzz_gpu as fuzz  # noqa: E402

MAX_MM, MAX_W4A16 = 2e8, 5e8  # M x N x K past which a problem takes too long under the sanitizer

budget = float(sys.argv[1]) if len(sys.argv) > 1 else 240.0
t0, runs, failed = time.time(), {"mm": 0, "w4a16": 0}, []
for seed in range(400):
    if time.time() - t0 > budget:
        break
    v, out, m, n, k, *_ = fuzz._mm_case(seed)
    cases = [("mm", fuzz.test_mm_random)] if m * n * k <= MAX_MM else []
    c = fuzz._w4a16_case(seed)
    if seed % 3 == 0 and c["m"] * c["k"] * c["n"] <= MAX_W4A16:
        cases.append(("w4a16", fuzz.test_w4a16_random))
    for kind, test in cases:
        try:
            test(seed)
            runs[kind] += 1
        except Exception as e:  # a wrong result or a CUDA error: report it and go on (memcheck reports its own)
            failed.append((kind, seed))
            print(f"FAIL {kind} seed {seed}: {e!r}"[:300], flush=True)
torch.cuda.synchronize()
print(f"sanitize_fuzz: {runs['mm']} mm + {runs['w4a16']} W4A16 problems, {len(failed)} wrong results, "
      f"{time.time() - t0:.0f} s")
sys.exit(1 if failed else 0)
