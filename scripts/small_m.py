"""Decode and small-batch matmuls (M <= 128) on the wgmma path: GPU time per call under CUDA-graph replay (the
host out of the way) and wall time per eager call, for the heuristic's config and for forced alternatives,
against torch.matmul / torch._scaled_mm in the same process. Inputs rotate past L2.

    python scripts/small_m.py [--out results.json] [--configs sm90_64x128_s8_g8_c1,...]
"""

import argparse
import json
import time

import torch

import gn_mm
from gn_mm import api
from gn_mm.timing import graph_time, rotation_sets

SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (16, 14336, 4096), (16, 4096, 14336), (64, 4096, 4096),
          (128, 4096, 4096), (128, 14336, 4096), (128, 4096, 14336), (16, 1024, 4096), (16, 28672, 8192),
          (64, 28672, 8192), (128, 28672, 8192)]
CALLS = 20  # calls per captured graph


def graph_us(fn, n_sets: int) -> float:
    """Per call: CALLS calls (input set i % n_sets) captured in one graph, the graph replayed."""
    return graph_time(fn, n_sets, 20, CALLS)["median_ms"] * 1e3


def eager_us(fn, n_sets: int, n: int = 400) -> float:
    for i in range(20):
        fn(i % n_sets)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(n):
        fn(i % n_sets)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def run(configs: list, dtypes: list) -> list:
    rows, dev = [], torch.device("cuda")
    gpu = api._gpu(torch.cuda.current_device())
    for dtype in dtypes:
        for m, n, k in SHAPES:
            item = 2 if dtype == "bf16" else 1
            sets = rotation_sets((m + n) * k * item, dev)
            if dtype == "s8":
                a = [torch.randint(-8, 8, (m, k), device=dev, dtype=torch.int8) for _ in range(sets)]
                w = [torch.randint(-8, 8, (n, k), device=dev, dtype=torch.int8) for _ in range(sets)]
            else:
                a = [torch.randn(m, k, device=dev).to(torch.float8_e4m3fn if dtype == "e4m3" else torch.bfloat16)
                     for _ in range(sets)]
                w = [torch.randn(n, k, device=dev).to(a[0].dtype) for _ in range(sets)]
            one = torch.ones((), device=dev)
            if dtype == "s8":
                def ours(i, cfg=None):
                    return gn_mm.mm(a[i], w[i].t(), config=cfg)

                ap = [x if m > 16 else torch.nn.functional.pad(x, (0, 0, 0, 17 - m)) for x in a]

                def peer(i):  # torch._int_mm wants M > 16: below that its time at M = 17 stands in
                    return torch._int_mm(ap[i], w[i].t())
            elif dtype == "e4m3":
                def ours(i, cfg=None):
                    return gn_mm.mm(a[i], w[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, config=cfg)

                def peer(i):
                    return torch._scaled_mm(a[i], w[i].t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=True)
            else:
                def ours(i, cfg=None):
                    return gn_mm.mm(a[i], w[i].t(), config=cfg)

                def peer(i):
                    return torch.matmul(a[i], w[i].t())
            variant = gn_mm.variant_table.find(dtype, dtype, "s32" if dtype == "s8" else "f32")
            chosen = api._plan(variant, "s32" if dtype == "s8" else "bf16", m, n, k * item, gpu, None, None)
            row = {"dtype": dtype, "m": m, "n": n, "k": k, "config": chosen.config.name, "splits": chosen.splits,
                   "peer_graph_us": graph_us(peer, sets), "peer_eager_us": eager_us(peer, sets),
                   "graph_us": graph_us(ours, sets), "eager_us": eager_us(ours, sets)}
            for name in configs:
                row[f"graph_us[{name}]"] = graph_us(lambda i: ours(i, name), sets)
            rows.append(row)
            print(f"{dtype:5} {m:4} {n:6} {k:6} {row['config']:24} s{row['splits']}  graph {row['graph_us']:6.1f} us "
                  f"(peer {row['peer_graph_us']:6.1f})  eager {row['eager_us']:6.1f} (peer {row['peer_eager_us']:6.1f})  "
                  + "  ".join(f"{c[-22:]} {row[f'graph_us[{c}]']:.1f}" for c in configs), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out")
    p.add_argument("--configs", default="", help="comma-separated Sm90Config names to time as well")
    p.add_argument("--dtypes", default="bf16,e4m3", help="comma-separated: bf16, e4m3, s8")
    args = p.parse_args()
    rows = run([c for c in args.configs.split(",") if c], args.dtypes.split(","))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
