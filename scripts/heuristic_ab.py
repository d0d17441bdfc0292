"""gn_mm's heuristic against another build's, and the peer, in one process: GPU time per call under CUDA-graph
replay, median of 3 interleaved rounds, inputs rotated past L2, both builds' outputs compared. How a heuristic
change is measured before it lands (benchmarks/results/sm90_*_ab_*.json).

The other build is a copy of the package renamed gn_mm_base (the device machine has no git history), e.g.:

    mkdir -p scratch/base && git archive REV gn_mm cuda_src codegen | tar -x -C scratch/base \
        && mv scratch/base/gn_mm scratch/base/gn_mm_base
    python scripts/heuristic_ab.py --base scratch/base --shapes shapes.json --out ab.json

shapes.json: {"rows": [{"dtype": "bf16", "m": 768, "n": 3072, "k": 14336}, ...]}, dtype a gn_mm.bench case name.
"""

import argparse
import json
import math
import os
import sys
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="directory holding gn_mm_base (and its cuda_src, codegen)")
    p.add_argument("--shapes", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    sys.path.insert(0, args.base)
    from gn_mm import bench as nb, sm90_mm
    from gn_mm_base import bench as base_bench, sm90_mm as base_sm90
    from gn_mm.timing import graph_time, rotation_sets
    # gn_mm must be the working tree (PYTHONPATH), gn_mm_base the build under --base
    base = os.path.abspath(args.base)
    if os.path.commonpath([os.path.abspath(nb.__file__), base]) == base:
        raise SystemExit(f"gn_mm was imported from --base ({nb.__file__}): put the working tree first on PYTHONPATH")

    picked = {}  # the config, splits and grid of each build's last plan

    def spy(mod, key):
        make = mod.Plan.make.__func__

        def wrapped(cls, *a, **k):
            plan = make(cls, *a, **k)
            picked[key] = f"{plan.config.name}/s{plan.splits}/g{plan.grid}"
            return plan
        mod.Plan.make = classmethod(wrapped)
    spy(sm90_mm, "new")
    spy(base_sm90, "old")

    out = {"gpu": torch.cuda.get_device_name(), "method": "median of 3 interleaved rounds, each the median of 20 "
           "replays of a graph of calls", "rows": []}
    t0 = time.time()
    for i, r in enumerate(json.load(open(args.shapes))["rows"]):
        dt, m, n, k = r["dtype"], r["m"], r["n"], r["k"]
        picked.clear()  # a row whose plan was cached shows None rather than the row before's config
        new, old = nb.CASES[dt], base_bench.CASES[dt]
        first = new.make(m, n, k, "cuda")
        sets = [first] + [new.make(m, n, k, "cuda") for _ in range(rotation_sets(nb._nbytes(first), "cuda") - 1)]
        y_new, y_old = new.ours(first).double(), old.ours(first).double()
        row = {"dtype": dt, "m": m, "n": n, "k": k, "new_cfg": picked.get("new"), "old_cfg": picked.get("old"),
               "old_vs_new_max_rel": float((y_new - y_old).abs().max() / y_old.abs().max().clamp_min(1e-30))}
        fns = {"new": lambda j: new.ours(sets[j]), "old": lambda j: old.ours(sets[j])}
        if not (dt == "s8" and m <= 16):  # torch._int_mm refuses M <= 16
            fns["peer"] = lambda j: new.peer(sets[j])
        calls = max(1, min(20, int(2e11 // (2 * m * n * k))))
        times = {w: [] for w in fns}
        with new.flags():
            for rnd in range(3):
                for w in (list(fns) if rnd % 2 == 0 else list(fns)[::-1]):
                    times[w].append(graph_time(fns[w], len(sets), 20, calls)["median_ms"] * 1e3)
        med = {w: sorted(v)[1] for w, v in times.items()}
        row.update({f"{w}_us": round(v, 2) for w, v in med.items()})
        row["new/old"] = round(med["new"] / med["old"], 3)
        if "peer" in med:
            row["peer/new"] = round(med["peer"] / med["new"], 3)
        out["rows"].append(row)
        print(i, dt, m, n, k, row["old_cfg"], row["new_cfg"], row["old_us"], row["new_us"], row.get("peer_us"),
              row["new/old"], f"{time.time() - t0:.0f}s", flush=True)
        del sets, first
        json.dump(out, open(args.out, "w"), indent=1)  # so far: a run cut short keeps its rows
    ratios = [math.log(r["new/old"]) for r in out["rows"]]
    out["geomean_new_over_old"] = round(math.exp(sum(ratios) / len(ratios)), 4)
    json.dump(out, open(args.out, "w"), indent=1)
    print("geomean new/old", out["geomean_new_over_old"])


if __name__ == "__main__":
    main()
