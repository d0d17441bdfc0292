"""W4A16 heuristic A/B and forced-config probes: GPU time per call under CUDA-graph replay, median of 3 interleaved
rounds (order alternating), inputs rotated past L2, bf16, G = 128. How the W4A16 heuristic changes are measured
before they land (benchmarks/results/w4a16_*_ab_h100.json, w4a16_*_probe_h100.json).

    # against another build: a copy of the package renamed gn_mm_base (as for scripts/heuristic_ab.py)
    mkdir -p base && git archive REV gn_mm cuda_src codegen | tar -x -C base && mv base/gn_mm base/gn_mm_base
    python scripts/w4a16_ab.py --base base --shapes rows.json --out ab.json
    # forced configs (name/splits; splits: h = the config's own schedule, 1 = whole tiles, s = stream-K) against the
    # heuristic and fp16 torch.matmul on the dequantised weight (with --base: on both builds, against each other)
    python scripts/w4a16_ab.py --configs w4a16wg_192x128_c2_s6/1,w4a16wg_128x128_c2_s8/2 --shapes rows.json --out p.json

rows.json: any results file with rows of k, n, m (e.g. benchmarks/results/w4a16_mid_m_ab_h100.json).
"""

import argparse
import json
import math
import statistics
import sys

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="directory holding gn_mm_base (and its cuda_src, codegen)")
    p.add_argument("--configs", default="", help="forced configs, name/splits, comma-separated")
    p.add_argument("--shapes", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import gn_mm
    from gn_mm import runtime, sm90_w4a16
    from gn_mm.timing import graph_time, rotation_sets
    base = None
    if args.base:
        sys.path.insert(0, args.base)
        import gn_mm_base as base
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dram_tbs = runtime.dram_bandwidth(0) / 1e12
    forced = [(c.split("/")[0], None if c.split("/")[1] == "h" else int(c.split("/")[1]))
              for c in args.configs.split(",") if c]
    shapes = {}
    for r in json.load(open(args.shapes))["rows"]:
        shapes.setdefault((r["k"], r["n"]), []).append(r["m"])
    rows = []
    for (k, n), ms in shapes.items():
        ws = _weights(k, n, rotation_sets(k * n // 2 + (k // 128) * n * 2, "cuda"), base)
        for m in sorted(set(ms)):
            acts = [torch.randn(m, k, device="cuda").to(torch.bfloat16) for _ in ws]
            fns = {"new": lambda i: gn_mm.w4a16_mm(acts[i], ws[i][0])}
            if base:
                fns["old"] = lambda i: base.w4a16_mm(acts[i], ws[i][1])
            else:
                fns["fp16"] = lambda i: acts[i] @ ws[i][1].t()  # an [N, K] weight, as the benchmark has it
            builds = (("", gn_mm, 0), ("old ", base, 1)) if base else (("", gn_mm, 0),)
            for (cfg, sp), (tag, lib, j) in ((f, b) for f in forced for b in builds):  # "old ...": the other build's
                fns[f"{tag}{cfg}/{sp or 'h'}"] = (lambda lib, j, cfg, sp: lambda i: lib.w4a16_mm(
                    acts[i], ws[i][j], config=cfg, splits=sp))(lib, j, cfg, sp)
            ref = fns["new"](0).double()
            rel = {w: float((f(0).double() - ref).abs().max() / ref.abs().max()) for w, f in fns.items() if w != "fp16"}
            t = {w: [] for w in fns}
            for r in range(3):
                for w in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                    t[w].append(graph_time(fns[w], len(ws), 20, 10)["median_ms"] * 1e3)
            pick = sm90_w4a16.choose(m, n, sms, 128, k // 64, sm90_w4a16.cluster_capacity(0), dram_tbs) \
                if m > 8 else None
            row = {"k": k, "n": n, "m": m, "new_pick": pick and pick.name,
                   "new_plan": pick and sm90_w4a16.schedule(pick, m, n, k // 64 // pick.k_sub, sms, dram_tbs=dram_tbs),
                   **{f"{w}_us": round(statistics.median(v), 2) for w, v in t.items()}, "rel_diff": rel}
            if base:
                old = base.sm90_w4a16.choose(m, n, sms, 128, k // 64) if m > 8 else None
                row["old_pick"] = old and old.name
                row["ratio"] = round(row["new_us"] / row["old_us"], 3)
            print(json.dumps({**{x: y for x, y in row.items() if x != "rel_diff"},
                              "max_rel_diff": float(f"{max(rel.values()):.2g}")}), flush=True)
            rows.append(row)
        del ws
        torch.cuda.empty_cache()
    if base:
        changed = [r["ratio"] for r in rows if r["old_pick"] != r["new_pick"]]
        if changed:
            print(f"changed picks: {len(changed)}, new/old geomean "
                  f"{math.exp(sum(map(math.log, changed)) / len(changed)):.3f}")
    method = __doc__.split("\n\n")[0].replace("\n", " ")
    json.dump({"gpu": torch.cuda.get_device_name(), "method": method, "rows": rows}, open(args.out, "w"), indent=1)


def _weights(k: int, n: int, sets: int, base):
    """`sets` random symmetric GPTQ weights: (gn_mm's prepared weight, the other build's (with --base) or the
    dequantised [N, K] weight in the activations' dtype (without))."""
    from gn_mm import prepare_w4a16, w4a16_formats as fmt
    out = []
    for _ in range(sets):
        q = torch.randint(0, 16, (k, n), device="cuda", dtype=torch.int32)
        scales = (torch.rand(k // 128, n, device="cuda") * 0.01 + 0.001).to(torch.bfloat16)
        qweight = fmt.pack_nibbles(q, dim=1)
        if base:
            other = base.prepare_w4a16(qweight, scales, None, group_size=128)
        else:
            other = fmt.dequantize_gptq(qweight, scales, None, group_size=128, dtype=torch.float32)
            other = other.to(torch.bfloat16).t().contiguous()
        out.append((prepare_w4a16(qweight, scales, None, group_size=128), other))
    return out


if __name__ == "__main__":
    main()
