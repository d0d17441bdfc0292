"""W4A16 near ties: where `sm90_w4a16.choose`'s two cheapest small-M candidates (plain plans or cluster variants) cost
within --tol of each other on a K x N grid, the places a stage-time fit is least sure; with a GPU, both are forced and
timed (CUDA-graph replay, median of 3 interleaved rounds, inputs rotated past L2, bf16, G = 128). How the cluster
tie rule (`choose`: exact ties go to the cluster variant) was found: benchmarks/results/w4a16_near_tie_probe_h100.json.

    python scripts/w4a16_near_ties.py --list                      # offline (no GPU): the near ties of an H100
    python scripts/w4a16_near_ties.py --out near_tie_probe.json   # on the GPU: time both candidates of each
"""

import argparse
import itertools
import json
import statistics
import sys

KS = (1024, 2048, 3072, 4096, 5120, 6144, 8192, 11008, 14336)
NS = (256, 512, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 11008, 14336)
MS = (8, 16, 32, 64)
H100_CLUSTERS = {2: 66, 3: 39, 4: 30, 5: 22, 6: 17, 7: 15, 8: 15}  # cuOccupancyMaxActiveClusters, 132-SM H100


def near_ties(tol: float, sm_count: int = 132, clusters: dict | None = None, dram_tbs: float = 3.35):
    """(m, k, n, cheapest, its cost, runner-up, its cost) where the runner-up costs at most (1 + tol) x the cheapest,
    costed as `choose` costs the small-M candidates of M's row (on an exact tie the one costed first, the plain plan,
    is listed first)."""
    from gn_mm import sm90_w4a16 as s

    clusters = H100_CLUSTERS if clusters is None else clusters
    for m, k, n in itertools.product(MS, KS, NS):
        limit, row = next((lim, cs) for lim, cs in s.CONFIGS if m <= lim)
        stage, max_n, k64 = s.SMALL_M_STAGE_US.get(limit, {}), s.SMALL_M_MAX_N.get(limit, {}), k // 64
        pool = [c for c in row if c in stage and c.problem(128, k64) is None and k64 <= s.MAX_K64.get(c, k64)
                and n <= max_n.get(c, n)]
        cost = s.small_m_costs(pool, stage, m, n, k64, sm_count, clusters, dram_tbs)
        best = sorted(cost.items(), key=lambda x: x[1])[:2]
        if len(best) == 2 and best[1][1] <= best[0][1] * (1 + tol):
            yield m, k, n, best[0][0].name, round(best[0][1], 3), best[1][0].name, round(best[1][1], 3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tol", type=float, default=0.03)
    p.add_argument("--list", action="store_true", help="only list the near ties (no GPU)")
    p.add_argument("--out", help="results JSON (with a GPU)")
    args = p.parse_args()
    ties = list(near_ties(args.tol))
    if args.list or not args.out:
        for t in ties:
            print(*t)
        return
    import torch

    import gn_mm
    from gn_mm.timing import graph_time, rotation_sets

    sys.path.insert(0, "scripts")
    from w4a16_ab import _weights

    rows, by_shape = [], {}
    for t in ties:
        by_shape.setdefault((t[1], t[2]), []).append(t)
    for (k, n), ts in by_shape.items():
        ws = _weights(k, n, rotation_sets(k * n // 2 + (k // 128) * n * 2, "cuda"), None)
        for m, _, _, a, cost_a, b, cost_b in ts:
            acts = [torch.randn(m, k, device="cuda").to(torch.bfloat16) for _ in ws]
            fns = {c: (lambda c: lambda i: gn_mm.w4a16_mm(acts[i], ws[i][0], config=c))(c) for c in (a, b)}
            times = {c: [] for c in fns}
            for r in range(3):
                for c in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                    times[c].append(graph_time(fns[c], len(ws), 20, 10)["median_ms"] * 1e3)
            row = {"m": m, "k": k, "n": n, "pick": a, "pick_cost": cost_a, "runner_up": b, "runner_cost": cost_b,
                   "pick_us": round(statistics.median(times[a]), 2), "runner_us": round(statistics.median(times[b]), 2)}
            row["runner_over_pick"] = round(row["runner_us"] / row["pick_us"], 3)
            print(json.dumps(row), flush=True)
            rows.append(row)
        del ws
        torch.cuda.empty_cache()
    json.dump({"gpu": torch.cuda.get_device_name(), "method": __doc__.split("\n\n")[0].replace("\n", " "),
               "rows": rows}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
