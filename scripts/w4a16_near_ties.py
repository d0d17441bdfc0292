"""W4A16 near ties: where `sm90_w4a16.choose`'s two cheapest small-M candidates (plain plans or cluster variants) cost
within --tol of each other on a K x N grid, the places the time model is least sure; with a GPU, both are forced and
timed (CUDA-graph replay, median of 3 interleaved rounds, inputs rotated past L2, bf16, G = 128); with a large --tol
and --top, every candidate: the data scripts/w4a16_cost_fit.py fits the time model to
(benchmarks/results/w4a16_{small,mid}_m_grids_{probe,check}_h100.json; before every grid was a candidate:
w4a16_small_m_costing_probe_h100.json; the near ties of the stage-time model before that: w4a16_near_tie_probe_h100.json). A candidate is a plan: a config with one of its grids (`plain_plans`, forced through
`splits`) or a cluster variant; each timed one is written with its grid and whether it is stream-K.

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


def near_ties(tol: float, top: int = 2, sm_count: int = 132, clusters: dict | None = None, dram_tbs: float = 3.35,
               ms=MS, ks=KS, ns=NS):
    """(m, k, n, [(config name, (grid, stream), cost), ...]): the cheapest `top` plans, cheapest first, where at least
    the runner-up costs at most (1 + tol) x the cheapest (the others too), costed as `choose` costs the small-M
    candidates of M's row (the first is its pick)."""
    from gn_mm import sm90_w4a16 as s

    clusters = H100_CLUSTERS if clusters is None else clusters
    for m, k, n in itertools.product(ms, ks, ns):
        limit, row = next((lim, cs) for lim, cs in s.CONFIGS if m <= lim)
        stage, max_n, k64 = s.SMALL_M_STAGE_US.get(limit, {}), s.SMALL_M_MAX_N.get(limit, {}), k // 64
        pool = [c for c in row if c in stage and c.problem(128, k64) is None and n <= max_n.get(c, n)]
        cost = s.small_m_costs(pool, stage, m, n, k64, sm_count, clusters, dram_tbs)
        near = [(c.name, plan, round(v, 3)) for (c, plan), v in sorted(cost.items(), key=lambda x: x[1])[:top]
                if v <= min(cost.values()) * (1 + tol)]
        if len(near) > 1:
            yield m, k, n, near


def forced_splits(name: str, plan, m: int, n: int, k64: int, sm_count: int = 132):
    """The `splits` that force config `name`'s plan (grid, stream) through gn_mm.w4a16_mm: None for a cluster
    variant, 1 for whole tiles, else the least s whose `schedule` gives that stream-K grid."""
    from gn_mm import sm90_w4a16 as s

    c = s.Sm90W4A16Config.parse(name)
    if c.cluster_k > 1:
        return None
    if not plan[1]:
        return 1
    sp = next((sp for sp in range(2, k64 + 1)
               if s.schedule(c, m, n, k64 // c.k_sub, sm_count, splits=sp) == plan), None)
    if sp is None:
        raise ValueError(f"{name}: no splits in 1..{k64} forces the plan {plan} at M = {m}, N = {n}")
    return sp


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tol", type=float, default=0.03)
    p.add_argument("--top", type=int, default=2, help="the most candidates a shape lists (and times)")
    p.add_argument("--ms", default=",".join(map(str, MS)), help="rows of M, comma-separated")
    p.add_argument("--ks", default=",".join(map(str, KS)), help="K values, comma-separated")
    p.add_argument("--ns", default=",".join(map(str, NS)), help="N values, comma-separated")
    p.add_argument("--list", action="store_true", help="only list the near ties (no GPU)")
    p.add_argument("--out", help="results JSON (with a GPU)")
    args = p.parse_args()
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    ties = list(near_ties(args.tol, args.top, ms=ints(args.ms), ks=ints(args.ks), ns=ints(args.ns)))
    if args.list or not args.out:
        for m, k, n, near in ties:
            print(m, k, n, *(f"{c}/{g}{'s' if st else ''}:{v}" for c, (g, st), v in near))
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
        for m, _, _, near in ts:
            acts = [torch.randn(m, k, device="cuda").to(torch.bfloat16) for _ in ws]
            fns = {(c, plan): (lambda c, sp: lambda i: gn_mm.w4a16_mm(acts[i], ws[i][0], config=c, splits=sp))(
                c, forced_splits(c, plan, m, n, k // 64)) for c, plan, _ in near}
            times = {key: [] for key in fns}
            for r in range(3):
                for key in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                    times[key].append(graph_time(fns[key], len(ws), 20, 10)["median_ms"] * 1e3)
            row = {"m": m, "k": k, "n": n, "candidates": [
                {"config": c, "grid": plan[0], "stream": plan[1], "cost": cost,
                 "us": round(statistics.median(times[c, plan]), 2)} for c, plan, cost in near]}
            best = min(row["candidates"], key=lambda x: x["us"])
            row["pick_over_fastest"] = round(row["candidates"][0]["us"] / best["us"], 3)
            print(json.dumps(row), flush=True)
            rows.append(row)
        del ws
        torch.cuda.empty_cache()
    json.dump({"gpu": torch.cuda.get_device_name(), "method": __doc__.split("\n\n")[0].replace("\n", " "),
               "rows": rows}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
