"""gn_mm's heuristic against the peer over a grid of M x N x K (sm_90): GPU time per call under CUDA-graph replay,
the faster of 2 interleaved rounds each, inputs rotated past L2. Finds the shapes where the heuristic's tiles land
badly (benchmarks/results/sm90_survey_h100.json found M = 384-1536 at 0.75-0.87x torch).

    python scripts/survey.py --dtypes bf16,e4m3 --out survey.json [--m 1,32,96] [--n 2048,5120] [--k 4096]
"""

import argparse
import json
import time

import torch

from gn_mm import bench as nb, sm90_mm
from gn_mm.timing import graph_time, rotation_sets


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", default="bf16,e4m3")
    p.add_argument("--m", type=ints, default=[1, 32, 96, 192, 384, 768, 1536])
    p.add_argument("--n", type=ints, default=[2048, 3072, 5120, 6144, 8192, 11008, 14336, 18944, 28672])
    p.add_argument("--k", type=ints, default=[4096, 14336])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    picked = {}
    make = sm90_mm.Plan.make.__func__

    def spy(cls, *a, **k):
        plan = make(cls, *a, **k)
        picked["cfg"] = f"{plan.config.name}/s{plan.splits}/g{plan.grid}"
        return plan
    sm90_mm.Plan.make = classmethod(spy)

    out = {"gpu": torch.cuda.get_device_name(), "rows": []}
    t0 = time.time()
    for dt in args.dtypes.split(","):
        case = nb.CASES[dt]
        for m in args.m:
            for n in args.n:
                for k in args.k:
                    if dt == "s8" and m <= 16:  # torch._int_mm refuses M <= 16
                        continue
                    first = case.make(m, n, k, "cuda")
                    sets = [first] + [case.make(m, n, k, "cuda")
                                      for _ in range(rotation_sets(nb._nbytes(first), "cuda") - 1)]
                    picked.pop("cfg", None)
                    case.ours(first)
                    calls = max(1, min(20, int(2e11 // (2 * m * n * k))))
                    fns = {"ours": lambda j: case.ours(sets[j]), "peer": lambda j: case.peer(sets[j])}
                    times = {w: [] for w in fns}
                    with case.flags():
                        for rnd in range(2):
                            for w in (list(fns) if rnd == 0 else list(fns)[::-1]):
                                times[w].append(graph_time(fns[w], len(sets), 15, calls)["median_ms"] * 1e3)
                    med = {w: round(min(v), 2) for w, v in times.items()}
                    row = {"dtype": dt, "m": m, "n": n, "k": k, "cfg": picked.get("cfg"), **med,
                           "peer/ours": round(med["peer"] / med["ours"], 3)}
                    out["rows"].append(row)
                    print(dt, m, n, k, row["cfg"], med["ours"], med["peer"], row["peer/ours"],
                          f"{time.time() - t0:.0f}s", flush=True)
                    json.dump(out, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
