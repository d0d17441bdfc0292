"""Fit the W4A16 small-M time model (sm90_w4a16.SMALL_M_STAGE_US and SMALL_M_MODEL) to forced-plan timings, and score
a model by the picks it makes: how much slower than the fastest timed candidate `choose`'s pick runs.

    # on the GPU: every plan `choose` costs, timed, over the K x N grid at the rows' largest M (and a check set)
    python scripts/w4a16_near_ties.py --tol 100 --top 99 --ms 8,16,32,64 --out fit.json
    python scripts/w4a16_near_ties.py --tol 100 --top 99 --ms 4,12,24,48 --out check.json
    python scripts/w4a16_near_ties.py --tol 100 --top 99 --ms 128,80 --ks 1024,2048,3072,4096,5120,6144,8192,11008,14336 \
        --out tall.json
    # offline (needs scipy): the fitted constants, and both models' picks on both sets (several files each may be given;
    # --stages-only keeps the library's constants and fits the stage times alone; fit the 128-row tiles, which have
    # their own constants (TALL_MODEL), apart from the smaller ones)
    python scripts/w4a16_cost_fit.py fit.json --check check.json

How the model was fitted: NOTES W4A16 68 and 70, benchmarks/results/w4a16_{small,mid}_m_grids_*_h100.json.
"""

import argparse
import json
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from w4a16_near_ties import H100_CLUSTERS  # noqa: E402  (the cluster capacity the probes were listed with)

# SMALL_M_MODEL's constants as fitted parameters (a pair: its us and its us per KB of the tile's sums)
NAMES = ("whole", "stream", "cluster", "dram_us_per_mb", "stream_fixup_us", "stream_part_us", "cluster_part_us_per_kb",
         "tile_us")


def candidates(path: str):
    """Per timed (M, K, N): [(row, plain config, cluster variant or config, kind, CTAs, grid, weight MB, us)], the plans as
    `sm90_w4a16.small_m_plans` describes them (on an H100: 132 SMs, its cluster capacity), matched by config, grid and
    stream-K (files written before NOTES W4A16 70 lack the grid: KeyError)."""
    from gn_mm import sm90_w4a16 as s

    out = []
    for r in json.load(open(path))["rows"]:
        m, k, n = r["m"], r["k"], r["n"]
        row = next(limit for limit, _ in s.CONFIGS if m <= limit)
        pool = list(s.SMALL_M_STAGE_US[row])
        plans = {(v.name, *plan): (c, v, kind, ctas, plan[0]) for c, v, kind, ctas, plan in
                 s.small_m_plans(pool, m, n, k // 64, 132, H100_CLUSTERS)}
        out.append([(row, *plans[x["config"], x["grid"], x["stream"]], k * n / 2e6, x["us"])
                    for x in r["candidates"]])
    return out


def unpack(x, stage_keys):
    """Parameter vector -> (stage times by (row, config), SMALL_M_MODEL-shaped dict)."""
    stage = dict(zip(stage_keys, x))
    rest = list(x[len(stage_keys):])
    model = dict(zip(NAMES[:4], rest[:4]))
    model.update(stream_fixup_us=(rest[4], rest[5]), stream_part_us=(rest[6], rest[7]), cluster_part_us_per_kb=rest[8],
                 tile_us=rest[9])
    return stage, model


def predict(stage, model, cand) -> float:
    from gn_mm import sm90_w4a16 as s

    row, c, v, kind, ctas, grid, mb, _ = cand
    return s.plan_us(kind, ctas, stage[row, c], v, mb, 3.35, grid, model)


def regret(sets, stage, model) -> tuple[float, int, float]:
    """(geometric mean, rows over 5%, worst) of pick time / fastest time, picking the cheapest as `choose` does."""
    r = []
    for cands in sets:
        pick = min(cands, key=lambda c: predict(stage, model, c))
        r.append(pick[-1] / min(c[-1] for c in cands))
    return math.exp(sum(map(math.log, r)) / len(r)), sum(q > 1.05 for q in r), max(r)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fit", nargs="+", help="timings to fit (scripts/w4a16_near_ties.py --out)")
    p.add_argument("--check", nargs="*", default=[], help="timings to score the fit on, not fitted")
    p.add_argument("--stages-only", action="store_true", help="fit the stage times only (SMALL_M_MODEL as it is)")
    p.add_argument("--near", type=float, default=0.0,
                   help="fit only the plans within this factor of their shape's fastest (0: all): the ranking that "
                        "matters is near the top")
    args = p.parse_args()
    try:
        import numpy as np
        from scipy.optimize import least_squares
    except ImportError:
        sys.exit("w4a16_cost_fit.py needs numpy and scipy (pip install scipy)")
    from gn_mm import sm90_w4a16 as s

    sets = {path: candidates(path) for path in args.fit + args.check}
    flat = [c for path in args.fit for cands in sets[path] for c in cands
            if not args.near or c[-1] <= args.near * min(x[-1] for x in cands)]
    stage_keys = sorted({(c[0], c[1]) for c in flat}, key=lambda rc: (rc[0], rc[1].name))
    # the library's constants for these tiles (`plan_us`: the 128-row tiles have their own; fit them apart)
    m = s.TALL_MODEL if flat[0][1].block_m >= 128 else s.SMALL_M_MODEL
    now_model = [m[k] for k in NAMES[:4]] + [*m["stream_fixup_us"], *m["stream_part_us"], m["cluster_part_us_per_kb"],
                                              m.get("tile_us", 0.0)]
    x0 = [0.4] * len(stage_keys) + ([] if args.stages_only else [2.0, 2.0, 2.0, 0.35, 1.0, 0.0, 0.0, 0.01, 0.01, 0.5])

    def full(x):
        return list(x) + (now_model if args.stages_only else [])

    def residuals(x):
        stage, model = unpack(full(x), stage_keys)
        return np.array([math.log(predict(stage, model, c) / c[-1]) for c in flat])

    x = [float(v) for v in least_squares(residuals, x0, bounds=(0, 100)).x]
    stage, model = unpack(full(x), stage_keys)
    # (a row or tile the library does not cost yet: its fitted stage time, to score the library's other constants)
    now = {k: s.SMALL_M_STAGE_US.get(k[0], {}).get(k[1], stage[k]) for k in stage_keys}, None  # (plan_us's own)
    rms = float(np.sqrt(np.mean(residuals(x) ** 2)))
    print(f"{len(flat)} plans of {sum(len(sets[p]) for p in args.fit)} shapes: rms log error {rms:.4f}")
    for (row, c), v in stage.items():
        print(f"  SMALL_M_STAGE_US[{row}][{c.name}] = {v:.3f}  (now {now[0][row, c]})")
    table = "TALL_MODEL" if m is s.TALL_MODEL else "SMALL_M_MODEL"
    for name, v in model.items():
        v = tuple(round(a, 4) for a in v) if isinstance(v, tuple) else round(v, 4)
        print(f"  {table}[{name!r}] = {v}  (now {m.get(name)})")
    for path, cands in sets.items():
        for tag, (st, mo) in (("fitted", (stage, model)), ("current", now)):
            g, over, worst = regret(cands, st, mo)
            label = "fit" if path in args.fit else "check"
            print(f"{label} {path}, {tag} model: picks {g:.4f}x the fastest (geomean), {over} over 5%, "
                  f"worst {worst:.3f}x")


if __name__ == "__main__":
    main()
